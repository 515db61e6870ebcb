package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/Mellanox/rdmamap"
)

// ErrNoDevices says the host has no RDMA device under /sys/class/infiniband.
// A node without the hardware is not broken: the caller logs it and keeps
// running, since a driver can be loaded later.
var ErrNoDevices = errors.New("no RDMA devices")

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
}

// SkippedPort is a port, or a whole device when Port is empty, that a scrape
// left out.
type SkippedPort struct {
	Device string
	Port   string // the name of the ports/ entry; can be something other than a number
	Reason string
}

// SysfsReader reads RDMA ports through github.com/Mellanox/rdmamap, which
// always reads below rdmamap.RdmaClassDir (/sys/class/infiniband). The files
// rdmamap has no function for (state, rate, link_layer, gid_attrs, device
// facts) are read below the same directory, so one tree is the whole truth.
//
// rdmamap reports a counter file it cannot read as 0; that is left to the
// delta engine, which holds a lone 0 back as a read glitch. A counter file
// that is gone, or was replaced by a directory, is absent from the maps.
//
// Discovery (devices, ports) goes through rdmamap on every scrape. The
// values are read with rdmamap's semantics (a listed counter file that
// cannot be read or parsed is 0, a missing one absent, directories left
// out) but not through its functions: rdmamap lstats, opens, reads and
// closes every file on every call, about seven syscalls per counter. The
// reader instead lists each directory once per scrape (getdents, which
// also gives the inode) and keeps the files open between scrapes, reading
// each with one pread; a file whose inode changed (replaced) is reopened,
// one no longer listed is closed. See BENCHMARKS.md, figure 1.
type SysfsReader struct {
	logger *slog.Logger
	now    func() time.Time
	files  *sysfsFiles
}

// NewSysfsReader returns a reader. now stamps each port's reading; nil means
// time.Now. A nil logger means slog.Default().
func NewSysfsReader(logger *slog.Logger, now func() time.Time) *SysfsReader {
	if logger == nil {
		logger = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	r := &SysfsReader{logger: logger, now: now, files: newSysfsFiles()}
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

// Read scrapes every device and port once. Nothing about one device or port
// stops the scrape: an unreadable state, a port without counters or a
// device without ports is recorded in Skipped and logged at debug. With no
// device at all, Read returns an empty scrape and an error wrapping
// ErrNoDevices. Only ctx ending stops it early.
func (r *SysfsReader) Read(ctx context.Context) (*SysfsScrape, error) {
	sc := &SysfsScrape{Devices: make(map[string]DeviceInfo)}
	r.files.mu.Lock()
	defer r.files.mu.Unlock()
	r.files.begin()
	// Files of devices and ports that were not visited are closed, also
	// when the scrape stops early or finds nothing.
	defer r.files.sweep()
	devices := rdmamap.GetRdmaDeviceList()
	if len(devices) == 0 {
		// rdmamap says nil both for a missing directory and for an empty
		// one; both mean "no RDMA here" to the caller.
		return sc, fmt.Errorf("%w under %s", ErrNoDevices, rdmamap.RdmaClassDir)
	}
	sort.Strings(devices)
	for _, dev := range devices {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("sysfs scrape stopped before device %s: %w", dev, err)
		}
		sc.Devices[dev] = r.files.deviceInfo(dev)
		ports := rdmamap.GetPorts(dev)
		if len(ports) == 0 {
			r.skip(sc, dev, "", "no ports below "+filepath.Join(rdmamap.RdmaClassDir, dev, rdmamap.RdmaPortsdir))
			continue
		}
		sortSysfsPorts(ports)
		for _, p := range ports {
			r.readPort(sc, dev, p)
		}
	}
	return sc, nil
}

func (r *SysfsReader) skip(sc *SysfsScrape, dev, port, reason string) {
	sc.Skipped = append(sc.Skipped, SkippedPort{Device: dev, Port: port, Reason: reason})
	r.logger.Debug("rdma port skipped", "device", dev, "port", port, "reason", reason)
}

func (r *SysfsReader) readPort(sc *SysfsScrape, dev, port string) {
	num, err := strconv.Atoi(port)
	if err != nil || num < 1 {
		r.skip(sc, dev, port, "ports entry is not a port number")
		return
	}
	dir := r.files.dir(filepath.Join(rdmamap.RdmaClassDir, dev, rdmamap.RdmaPortsdir, port))
	r.files.list(dir)
	stateText, err := r.files.text(dir, "state")
	if err != nil {
		r.skip(sc, dev, port, "state unreadable: "+err.Error())
		return
	}
	state := parsePortState(stateText)
	if state != sysfsActiveState {
		r.skip(sc, dev, port, "state "+state)
		return
	}

	// The port's time is taken just before its counters are read: that is
	// the instant the figures describe.
	at := r.now()
	counters := r.files.counters(dir, rdmamap.RdmaCountersDir)
	hw := r.files.counters(dir, rdmamap.RdmaHwCountersDir)
	if counters == nil && hw == nil {
		// iWARP devices (cxgb4, i40iw) have no per-port counters at all:
		// Telegraf once aborted the whole scrape on such a device.
		r.skip(sc, dev, port, "no counters or hw_counters directory")
		return
	}
	pr := PortReading{
		Device:     dev,
		Port:       num,
		State:      state,
		Time:       at,
		Counters:   counters,
		HWCounters: hw,
	}
	if pr.LinkLayer, err = r.files.text(dir, "link_layer"); err != nil {
		r.logger.Debug("rdma port link_layer unreadable", "device", dev, "port", num, "err", err)
	}
	if pr.Rate, err = r.files.text(dir, "rate"); err != nil {
		r.logger.Debug("rdma port rate unreadable", "device", dev, "port", num, "err", err)
	}
	pr.Netdev = r.files.portNetdev(dir)
	sc.Ports = append(sc.Ports, pr)
}

// readSysfsText reads a sysfs attribute without its trailing newline.
func readSysfsText(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
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

// ParseRateGbps reads the speed out of the sysfs rate text, e.g. 200 from
// "200 Gb/sec (4X HDR)" or 2.5 from "2.5 Gb/sec (1X SDR)".
func ParseRateGbps(rate string) (float64, error) {
	fields := strings.Fields(rate)
	if len(fields) < 2 || fields[1] != "Gb/sec" {
		return 0, fmt.Errorf("rate %q is not \"<n> Gb/sec ...\"", rate)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || math.IsNaN(v) || v < 0 || v > 1e6 {
		return 0, fmt.Errorf("rate %q: %q is not a speed in Gb/s", rate, fields[0])
	}
	return v, nil
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

// sysfsMaxKeptFiles bounds the files a reader keeps open. Past it a file is
// opened, read and closed on every scrape, as rdmamap does; a host with
// dozens of RDMA ports should not run out of descriptors for counters.
const sysfsMaxKeptFiles = 4096

// sysfsValueBuf is the pread buffer: a counter is at most 20 digits, the
// attributes read as text are short lines. Longer contents are read whole
// with os.ReadFile.
const sysfsValueBuf = 256

// sysfsFiles is the reader's kept-open state: the directories visited, what
// each listed at the last scrape, and the open files. Guarded by mu; every
// method but close expects mu held.
type sysfsFiles struct {
	mu    sync.Mutex
	gen   uint64 // scrape number
	dirs  map[string]*sysfsDir
	kept  int // open descriptors in all dirs
	dents []byte
	buf   [sysfsValueBuf]byte
}

// sysfsDir is one directory: its entries as of the last listing.
type sysfsDir struct {
	path    string
	used    uint64 // scrape that last visited it
	listed  uint64 // scrape of the last successful listing
	err     error  // the last listing's error
	entries map[string]*sysfsEntry
	// changed says the last listing added, removed or replaced an entry;
	// derived views (the sorted GID indices) are rebuilt only then.
	changed bool
	// ndevs: the gid_attrs/ndevs entries with a numeric name, by number.
	ndevs []*sysfsEntry
	// sub are the subdirectories read below it, by name.
	sub map[string]*sysfsDir
	// dead: swept or closed; a parent's sub entry must be looked up again.
	dead bool
}

type sysfsEntry struct {
	name  string
	ino   uint64
	isDir bool
	seen  uint64 // listing (scrape number) that last saw it
	fd    int    // -1: not open
	text  string // last text read, reused while the bytes are equal
}

func newSysfsFiles() *sysfsFiles {
	return &sysfsFiles{dirs: make(map[string]*sysfsDir), dents: make([]byte, 16<<10)}
}

func (f *sysfsFiles) begin() { f.gen++ }

// dir returns the directory at path, marked as used by this scrape.
func (f *sysfsFiles) dir(path string) *sysfsDir {
	d := f.dirs[path]
	if d == nil {
		d = &sysfsDir{path: path, entries: make(map[string]*sysfsEntry)}
		f.dirs[path] = d
	}
	d.used = f.gen
	return d
}

// subdir returns a directory below d without building its path again.
func (f *sysfsFiles) subdir(d *sysfsDir, name string) *sysfsDir {
	s := d.sub[name]
	if s == nil || s.dead {
		s = f.dir(d.path + "/" + name)
		if d.sub == nil {
			d.sub = make(map[string]*sysfsDir)
		}
		d.sub[name] = s
	}
	s.used = f.gen
	return s
}

// list re-reads d's entries (once per scrape). An entry whose inode changed
// has its file closed, so the next read opens the new one; entries gone are
// dropped. A directory that cannot be listed has no entries.
func (f *sysfsFiles) list(d *sysfsDir) error {
	if d.listed == f.gen {
		return d.err
	}
	d.listed, d.changed = f.gen, false
	d.err = f.getdents(d)
	if d.err != nil {
		f.dropEntries(d, func(*sysfsEntry) bool { return true })
		return d.err
	}
	if len(d.entries) != d.seenCount(f.gen) {
		f.dropEntries(d, func(e *sysfsEntry) bool { return e.seen != f.gen })
	}
	return nil
}

func (d *sysfsDir) seenCount(gen uint64) int {
	n := 0
	for _, e := range d.entries {
		if e.seen == gen {
			n++
		}
	}
	return n
}

func (f *sysfsFiles) dropEntries(d *sysfsDir, drop func(*sysfsEntry) bool) {
	for name, e := range d.entries {
		if drop(e) {
			f.closeEntry(e)
			delete(d.entries, name)
			d.changed = true
		}
	}
}

func (f *sysfsFiles) getdents(d *sysfsDir) error {
	fd, err := sysfsOpen(d.path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC)
	if err != nil {
		return &os.PathError{Op: "open", Path: d.path, Err: err}
	}
	defer syscall.Close(fd)
	for {
		n, err := syscall.Getdents(fd, f.dents)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "getdents", Path: d.path, Err: err}
		}
		if n <= 0 {
			return nil
		}
		// struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name.
		for b := f.dents[:n]; len(b) >= 19; {
			reclen := int(b[16]) | int(b[17])<<8
			if reclen < 19 || reclen > len(b) {
				return &os.PathError{Op: "getdents", Path: d.path, Err: syscall.EIO}
			}
			rec := b[:reclen]
			b = b[reclen:]
			name := rec[19:]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if len(name) == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			ino := uint64(rec[0]) | uint64(rec[1])<<8 | uint64(rec[2])<<16 | uint64(rec[3])<<24 |
				uint64(rec[4])<<32 | uint64(rec[5])<<40 | uint64(rec[6])<<48 | uint64(rec[7])<<56
			typ := rec[18]
			e := d.entries[string(name)]
			if e == nil {
				e = &sysfsEntry{name: string(name), fd: -1}
				d.entries[e.name] = e
				d.changed = true
			} else if e.ino != ino {
				f.closeEntry(e)
				e.text = ""
				d.changed = true
			}
			e.ino, e.seen = ino, f.gen
			switch typ {
			case syscall.DT_DIR:
				e.isDir = true
			case syscall.DT_UNKNOWN:
				// File systems without d_type: ask, as rdmamap's lstat does.
				var st syscall.Stat_t
				e.isDir = syscall.Lstat(d.path+"/"+e.name, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR
			default:
				e.isDir = false
			}
		}
	}
}

// read returns the current content of a listed file (valid until the next
// read). A file kept open is read with one pread at offset 0, which makes
// sysfs produce the attribute anew.
func (f *sysfsFiles) read(d *sysfsDir, e *sysfsEntry) ([]byte, error) {
	if e.fd < 0 {
		fd, err := sysfsOpen(d.path+"/"+e.name, syscall.O_RDONLY|syscall.O_CLOEXEC)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: d.path + "/" + e.name, Err: err}
		}
		if f.kept >= sysfsMaxKeptFiles {
			defer syscall.Close(fd)
		} else {
			e.fd = fd
			f.kept++
		}
		return f.pread(d, e, fd)
	}
	return f.pread(d, e, e.fd)
}

func (f *sysfsFiles) pread(d *sysfsDir, e *sysfsEntry, fd int) ([]byte, error) {
	for {
		n, err := syscall.Pread(fd, f.buf[:], 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			// Next time from a fresh open: the attribute may be back.
			if e.fd == fd {
				f.closeEntry(e)
			}
			return nil, &os.PathError{Op: "read", Path: d.path + "/" + e.name, Err: err}
		}
		if n == len(f.buf) {
			return os.ReadFile(d.path + "/" + e.name)
		}
		return f.buf[:n], nil
	}
}

func (f *sysfsFiles) closeEntry(e *sysfsEntry) {
	if e.fd >= 0 {
		syscall.Close(e.fd)
		e.fd = -1
		f.kept--
	}
}

// text reads an attribute of d like os.ReadFile + strings.TrimSpace: an
// error when it is not listed, is a directory or cannot be read.
func (f *sysfsFiles) text(d *sysfsDir, name string) (string, error) {
	if err := f.list(d); err != nil {
		return "", err
	}
	e := d.entries[name]
	if e == nil {
		return "", &os.PathError{Op: "open", Path: d.path + "/" + name, Err: syscall.ENOENT}
	}
	if e.isDir {
		return "", &os.PathError{Op: "read", Path: d.path + "/" + name, Err: syscall.EISDIR}
	}
	b, err := f.read(d, e)
	if err != nil {
		return "", err
	}
	b = bytes.TrimSpace(b)
	if string(b) != e.text {
		e.text = string(b)
	}
	return e.text, nil
}

// counters reads every file of the counters directory name below the port
// directory d with rdmamap's semantics: nil when the directory cannot be
// listed; subdirectories left out; a file that cannot be read or parsed is
// 0.
func (f *sysfsFiles) counters(d *sysfsDir, name string) map[string]uint64 {
	if e := d.entries[name]; e == nil || !e.isDir {
		return nil
	}
	cd := f.subdir(d, name)
	if f.list(cd) != nil {
		return nil
	}
	m := make(map[string]uint64, len(cd.entries))
	for _, e := range cd.entries {
		if e.isDir {
			continue
		}
		var v uint64
		if b, err := f.read(cd, e); err == nil {
			v = parseSysfsCounter(b)
		}
		m[e.name] = v
	}
	return m
}

// parseSysfsCounter is rdmamap's readCounter without the allocations:
// newlines trimmed at both ends, then strconv.ParseUint(s, 10, 64) with the
// error ignored: 0 for text that is not a number, the maximum on overflow.
func parseSysfsCounter(b []byte) uint64 {
	for len(b) > 0 && b[0] == '\n' {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return 0
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			// ParseUint stops at the overflow, whatever follows.
			return math.MaxUint64
		}
		v = v*10 + d
	}
	return v
}

// deviceInfo reads the device facts; a missing file leaves its field empty
// (mlx4 has no node_guid in some captures, soft devices have no board_id).
func (f *sysfsFiles) deviceInfo(dev string) DeviceInfo {
	d := f.dir(filepath.Join(rdmamap.RdmaClassDir, dev))
	text := func(name string) string {
		s, _ := f.text(d, name)
		return s
	}
	return DeviceInfo{
		FWVersion: text("fw_ver"),
		BoardID:   text("board_id"),
		HCAType:   text("hca_type"),
		NodeGUID:  text(rdmamap.RdmaNodeGuidFile),
	}
}

// portNetdev returns the netdev of a RoCE port from gid_attrs/ndevs/<index>,
// or "" when the port names none (InfiniBand ports, older kernels without
// gid_attrs). rdmamap only maps netdev -> device, not port -> netdev, hence
// the direct read. The lowest indices are the default GIDs.
func (f *sysfsFiles) portNetdev(port *sysfsDir) string {
	if e := port.entries[rdmamap.RdmaGidAttrDir]; e == nil || !e.isDir {
		return ""
	}
	gid := f.subdir(port, rdmamap.RdmaGidAttrDir)
	d := f.subdir(gid, rdmamap.RdmaGidAttrNdevDir)
	if f.list(d) != nil {
		return ""
	}
	if d.changed || d.ndevs == nil {
		d.ndevs = d.ndevs[:0]
		for _, e := range d.entries {
			if i, err := strconv.Atoi(e.name); err == nil && i >= 0 {
				d.ndevs = append(d.ndevs, e)
			}
		}
		sort.Slice(d.ndevs, func(i, j int) bool {
			a, _ := strconv.Atoi(d.ndevs[i].name)
			b, _ := strconv.Atoi(d.ndevs[j].name)
			return a < b
		})
	}
	for n, e := range d.ndevs {
		if n == sysfsMaxNdevProbes {
			break
		}
		name, err := f.text(d, e.name)
		if err == nil && validNetdevName(name) {
			return name
		}
	}
	return ""
}

// sweep closes the files of directories this scrape did not visit (a
// device or port that went away).
func (f *sysfsFiles) sweep() {
	for path, d := range f.dirs {
		if d.used != f.gen {
			f.dropEntries(d, func(*sysfsEntry) bool { return true })
			d.dead = true
			delete(f.dirs, path)
		}
	}
}

// close closes every kept file.
func (f *sysfsFiles) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for path, d := range f.dirs {
		f.dropEntries(d, func(*sysfsEntry) bool { return true })
		d.dead = true
		delete(f.dirs, path)
	}
}

func sysfsOpen(path string, flags int) (int, error) {
	for {
		fd, err := syscall.Open(path, flags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
