package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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
type SysfsReader struct {
	logger *slog.Logger
	now    func() time.Time
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
	return &SysfsReader{logger: logger, now: now}
}

// Read scrapes every device and port once. Nothing about one device or port
// stops the scrape: an unreadable state, a port without counters or a
// device without ports is recorded in Skipped and logged at debug. With no
// device at all, Read returns an empty scrape and an error wrapping
// ErrNoDevices. Only ctx ending stops it early.
func (r *SysfsReader) Read(ctx context.Context) (*SysfsScrape, error) {
	sc := &SysfsScrape{Devices: make(map[string]DeviceInfo)}
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
		sc.Devices[dev] = readSysfsDeviceInfo(dev)
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
	dir := filepath.Join(rdmamap.RdmaClassDir, dev, rdmamap.RdmaPortsdir, port)
	stateText, err := readSysfsText(filepath.Join(dir, "state"))
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
	counters, errCounters := rdmamap.GetRdmaSysfsStats(dev, num)
	hw, errHW := rdmamap.GetRdmaSysfsHwStats(dev, num)
	if errCounters != nil && errHW != nil {
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
		Counters:   sysfsStatMap(counters, errCounters),
		HWCounters: sysfsStatMap(hw, errHW),
	}
	if pr.LinkLayer, err = readSysfsText(filepath.Join(dir, "link_layer")); err != nil {
		r.logger.Debug("rdma port link_layer unreadable", "device", dev, "port", num, "err", err)
	}
	if pr.Rate, err = readSysfsText(filepath.Join(dir, "rate")); err != nil {
		r.logger.Debug("rdma port rate unreadable", "device", dev, "port", num, "err", err)
	}
	pr.Netdev = readSysfsPortNetdev(dir)
	sc.Ports = append(sc.Ports, pr)
}

// sysfsStatMap turns rdmamap's entries into a map. A directory that could not
// be listed gives nil, so "no hw_counters on this port" stays distinguishable
// from "hw_counters with no files".
func sysfsStatMap(entries []rdmamap.RdmaStatEntry, err error) map[string]uint64 {
	if err != nil {
		return nil
	}
	m := make(map[string]uint64, len(entries))
	for _, e := range entries {
		// rdmamap already leaves directories out (its Readdir lstats), so
		// a counter replaced by a directory is absent, not a 0.
		m[e.Name] = e.Value
	}
	return m
}

// readSysfsDeviceInfo reads the device facts; a missing file leaves its
// field empty (mlx4 has no node_guid in some captures, soft devices have no
// board_id).
func readSysfsDeviceInfo(dev string) DeviceInfo {
	dir := filepath.Join(rdmamap.RdmaClassDir, dev)
	text := func(name string) string {
		s, _ := readSysfsText(filepath.Join(dir, name))
		return s
	}
	return DeviceInfo{
		FWVersion: text("fw_ver"),
		BoardID:   text("board_id"),
		HCAType:   text("hca_type"),
		NodeGUID:  text(rdmamap.RdmaNodeGuidFile),
	}
}

// readSysfsPortNetdev returns the netdev of a RoCE port from
// gid_attrs/ndevs/<index>, or "" when the port names none (InfiniBand ports,
// older kernels without gid_attrs). rdmamap only maps netdev -> device, not
// port -> netdev, hence the direct read.
func readSysfsPortNetdev(portDir string) string {
	dir := filepath.Join(portDir, rdmamap.RdmaGidAttrDir, rdmamap.RdmaGidAttrNdevDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	indices := make([]int, 0, len(entries))
	for _, e := range entries {
		if i, err := strconv.Atoi(e.Name()); err == nil && i >= 0 {
			indices = append(indices, i)
		}
	}
	// os.ReadDir sorts by name ("10" before "2"); the default GIDs are the
	// lowest indices.
	sort.Ints(indices)
	for n, i := range indices {
		if n == sysfsMaxNdevProbes {
			break
		}
		name, err := readSysfsText(filepath.Join(dir, strconv.Itoa(i)))
		if err == nil && validNetdevName(name) {
			return name
		}
	}
	return ""
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
