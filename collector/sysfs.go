package collector

import (
	"errors"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrNoDevices says the host has no RDMA device under /sys/class/infiniband.
// A node without the hardware is not broken: the caller logs it and keeps
// running, since a driver can be loaded later.
var ErrNoDevices = errors.New("no RDMA devices")

// ErrSysfsUnsupported is returned by SysfsReader.Read on systems other than
// Linux: the RDMA counters it reads exist only in Linux's sysfs.
var ErrSysfsUnsupported = errors.New("the sysfs source needs Linux")

// The layout below the sysfs mount point that github.com/Mellanox/rdmamap
// reads (its RdmaClassDir, RdmaPortsdir, ... constants), relative to the
// mount point so a reader can be pointed at another one (a container that
// mounts the host's sysfs at /host/sys, a fixture tree in a test).
const (
	sysfsDefaultRoot   = "/sys"
	sysfsClassDir      = "class/infiniband"
	sysfsPortsDir      = "ports"
	sysfsCountersDir   = "counters"
	sysfsHWCountersDir = "hw_counters"
	sysfsGidAttrDir    = "gid_attrs"
	sysfsNdevsDir      = "ndevs"
	sysfsNodeGUIDFile  = "node_guid"
)

// sysfsActiveState is the only port state whose counters are worth reading:
// a DOWN, INIT or ARMED port carries no traffic, and its counters would only
// make the detectors see a link that is not there.
const sysfsActiveState = "ACTIVE"

// sysfsMaxNdevProbes bounds how many gid_attrs/ndevs entries are read per
// port and scrape. A RoCE port names its netdev in the default GIDs at the
// first indices; on an InfiniBand port every read fails with EINVAL, and a
// GID table has up to 255 entries, so reading all of them every scrape would
// cost hundreds of syscalls for nothing.
const sysfsMaxNdevProbes = 4

// sysfsMaxEntries bounds the entries kept from one directory listing. A
// counters directory holds tens of files, a GID table 255, the class
// directory a device per card; a directory with more is not sysfs as the
// kernel writes it, and reading all of it every scrape would cost without
// bound.
const sysfsMaxEntries = 4096

// sysfsMaxValue is the most bytes of one attribute the reader takes: a
// counter is at most 20 digits, the attributes read as text (state, rate,
// link_layer, fw_ver, board_id, hca_type, node_guid, a netdev name) are
// short lines. A longer file is refused, never read whole.
const sysfsMaxValue = 255

// SysfsScrape is one pass over the RDMA devices of the host.
type SysfsScrape struct {
	// Ports are the ACTIVE ports that have counters, in device then port
	// order.
	Ports []PortReading
	// Devices holds the facts of every listed device, also of devices whose
	// ports were all skipped: the inventory wants to know the card is there.
	Devices map[string]DeviceInfo
	// Skipped says which ports were left out and why.
	Skipped []SkippedPort
	// SkippedFiles counts, by Skip reason, the files of ports that were
	// read which were left out (a counter unreadable or not a number, an
	// unreadable link_layer or rate): each costs a figure, not the port.
	SkippedFiles map[string]int
}

// Why a port or a file was left out: the reason label of
// rdmawatch_collector_skipped_total, a short fixed set so a dashboard can
// group by it (the log line at debug has the details).
const (
	SkipNoPorts             = "no_ports"              // a device without ports/ entries
	SkipNotAPort            = "not_a_port"            // a ports/ entry that is not a port number
	SkipStateUnreadable     = "state_unreadable"      // the port's state file
	SkipNotActive           = "not_active"            // a port that is down, polling, ...
	SkipNoCounters          = "no_counters"           // no counters nor hw_counters directory (iWARP)
	SkipNoReadableCounter   = "no_readable_counter"   // counters listed, none readable
	SkipCounterUnreadable   = "counter_unreadable"    // one counter file
	SkipCounterNotANumber   = "counter_not_a_number"  // one counter file
	SkipLinkLayerUnreadable = "link_layer_unreadable" // the port's link_layer file
	SkipRateUnreadable      = "rate_unreadable"       // the port's rate file
)

// SkipReasons lists every reason, so the counter can be served at 0 for each
// before anything is skipped (a rule or dashboard sees the series exist).
var SkipReasons = []string{SkipNoPorts, SkipNotAPort, SkipStateUnreadable, SkipNotActive, SkipNoCounters,
	SkipNoReadableCounter, SkipCounterUnreadable, SkipCounterNotANumber, SkipLinkLayerUnreadable, SkipRateUnreadable}

func (sc *SysfsScrape) skipFile(why string) {
	if sc.SkippedFiles == nil {
		sc.SkippedFiles = map[string]int{}
	}
	sc.SkippedFiles[why]++
}

// SkippedPort is a port, or a whole device when Port is empty, that a scrape
// left out.
type SkippedPort struct {
	Device string
	Port   string // the name of the ports/ entry; can be something other than a number
	Why    string // one of the Skip constants
	Reason string // for people: Why with the details
}

// SysfsReader reads RDMA ports below <root>/class/infiniband, the tree
// github.com/Mellanox/rdmamap reads, with rdmamap's view of it (a device is
// a non-directory entry of the class directory, its ports the entries of
// ports/, counters the files of ports/<p>/counters and hw_counters) but not
// through rdmamap's functions, for two reasons:
//
//   - Safety. The tree is read as untrusted input: every file is opened with
//     O_NONBLOCK|O_NOFOLLOW and refused unless fstat says it is a regular
//     file (a FIFO would block the scrape forever, a symlink to /dev/zero
//     would be read until memory runs out), at most sysfsMaxValue bytes are
//     read from it, directories are opened with O_DIRECTORY|O_NOFOLLOW and
//     listings are bounded by sysfsMaxEntries. rdmamap opens directories
//     with a plain open(2) and reads files whole.
//   - Cost. rdmamap lstats, opens, reads and closes every file on every
//     call, about seven syscalls per counter. The reader lists each
//     directory once per scrape (getdents, which also gives the inode) and
//     keeps the files open between scrapes, reading each with one pread; a
//     file whose inode changed (replaced) is reopened, one no longer listed
//     is closed. A scrape takes about a quarter of rdmamap's CPU
//     (collector-scrape-cpu in BENCHMARKS.md).
//
// A counter file that cannot be opened, read or parsed is absent from its
// map: unknown, not zero (rdmamap reports it as 0, which the delta engine
// would have to tell from a reset). A counter file that is gone, or was
// replaced by a directory, is absent too.
type SysfsReader struct {
	logger   *slog.Logger
	now      func() time.Time
	classDir string
	files    *sysfsFiles
}

// NewSysfsReader returns a reader of /sys. now stamps each port's reading;
// nil means time.Now. A nil logger means slog.Default().
func NewSysfsReader(logger *slog.Logger, now func() time.Time) *SysfsReader {
	return newSysfsReader(sysfsDefaultRoot, logger, now)
}

// newSysfsReader returns a reader of the sysfs mounted at root.
func newSysfsReader(root string, logger *slog.Logger, now func() time.Time) *SysfsReader {
	if logger == nil {
		logger = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	r := &SysfsReader{logger: logger, now: now, classDir: filepath.Join(root, sysfsClassDir), files: newSysfsFiles()}
	// A reader dropped without Close must not leak its kept-open files.
	runtime.AddCleanup(r, func(f *sysfsFiles) { f.close() }, r.files)
	return r
}

// Close closes the files the reader keeps open. The reader stays usable:
// the next Read opens them again.
func (r *SysfsReader) Close() error {
	r.files.close()
	return nil
}

func (r *SysfsReader) skip(sc *SysfsScrape, dev, port, why, reason string) {
	sc.Skipped = append(sc.Skipped, SkippedPort{Device: dev, Port: port, Why: why, Reason: reason})
	r.logger.Debug("rdma port skipped", "device", dev, "port", port, "reason", reason)
}

// parsePortState turns the sysfs state text "4: ACTIVE" into "ACTIVE". Text
// without the numeric prefix passes through trimmed.
func parsePortState(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, ':'); i > 0 {
		if _, err := strconv.Atoi(strings.TrimSpace(s[:i])); err == nil {
			return strings.TrimSpace(s[i+1:])
		}
	}
	return s
}

// sortSysfsPorts orders port names numerically ("2" before "10"); names that
// are not numbers go last, in name order.
func sortSysfsPorts(ports []string) {
	sort.Slice(ports, func(i, j int) bool {
		a, errA := strconv.Atoi(ports[i])
		b, errB := strconv.Atoi(ports[j])
		switch {
		case errA == nil && errB == nil:
			return a < b
		case errA == nil:
			return true
		case errB == nil:
			return false
		}
		return ports[i] < ports[j]
	})
}

// parseSysfsCounter reads a counter file's content the way rdmamap's
// readCounter does (newlines trimmed at both ends, then base 10) without
// the allocations, but says when the text is not a counter: empty, not
// digits ("N/A (no PMA)"), or past 64 bits. Such a file is unknown, not 0.
func parseSysfsCounter(b []byte) (uint64, bool) {
	for len(b) > 0 && b[0] == '\n' {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}
