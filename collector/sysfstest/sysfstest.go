// Package sysfstest builds sysfs-like RDMA trees for tests and benchmarks.
//
// Build writes what /sys/class looks like to github.com/Mellanox/rdmamap:
//
//	<dir>/infiniband/<dev>  -> ../devices/<dev>   (a symlink, as in real sysfs)
//	<dir>/devices/<dev>/{fw_ver,board_id,hca_type,node_guid}
//	<dir>/devices/<dev>/ports/<p>/{state,phys_state,rate,link_layer}
//	<dir>/devices/<dev>/ports/<p>/{counters,hw_counters}/<name>
//	<dir>/devices/<dev>/ports/<p>/gid_attrs/ndevs/<index>
//	<dir>/net/<netdev>  -> ../devices/virtual/net/<netdev>
//	<dir>/devices/virtual/net/<netdev>/{mtu,...}
//	<dir>/devices/virtual/net/<netdev>/ecn/roce_np|roce_rp/enable/<prio>
//	<dir>/devices/virtual/net/<netdev>/ecn/roce_np/{cnp_dscp,cnp_802p_prio}
//	<dir>/devices/virtual/net/<bond>/bonding/slaves, lower_<member> -> ../<member>
//	<dir>/devices/<dev>/hw_counters/<name>        (device-wide, mlx4)
//	<dir>/devices/<dev>/tc/<p>/traffic_class      (MLNX_OFED)
//
// rdmamap only lists entries of /sys/class/infiniband that are not
// directories, so a device written as a plain directory would be invisible.
// The symlinks are relative, so the tree can be bind-mounted over /sys/class
// and still resolve inside itself.
package sysfstest

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Set names a port's counter directory.
type Set string

const (
	Counters   Set = "counters"
	HWCounters Set = "hw_counters"
)

// Spec is a whole tree.
type Spec struct {
	Devices []Device
	// Netdevs are the network interfaces below net/: what the collector
	// reads a RoCE port's configuration from.
	Netdevs []Netdev
}

// Netdev is one network interface.
type Netdev struct {
	Name string
	// Files are files directly below the netdev: mtu, ... name -> content
	// (a newline is appended).
	Files map[string]string
	// ECNNP and ECNRP are the files of ecn/roce_np/enable and
	// ecn/roce_rp/enable (MLNX_OFED's mlx5_core) by priority; nil: no such
	// directory, as with the upstream driver.
	ECNNP, ECNRP map[int]string
	// NPFiles are further files of ecn/roce_np (cnp_dscp, cnp_802p_prio).
	NPFiles map[string]string
	// Members makes the netdev a bond: bonding/slaves lists them in this
	// order and a lower_<member> link points at each.
	Members []string
}

// RoCENetdev returns an MLNX_OFED-like netdev: mtu, and ECN enable files
// for priorities 0-7, "1" for the priorities listed, "0" for the others.
// A nil list leaves its directory out.
func RoCENetdev(name string, mtu int, np, rp []int) Netdev {
	nd := Netdev{Name: name, Files: map[string]string{"mtu": strconv.Itoa(mtu)}}
	enable := func(on []int) map[int]string {
		if on == nil {
			return nil
		}
		m := make(map[int]string, 8)
		for p := range 8 {
			m[p] = "0"
			if slices.Contains(on, p) {
				m[p] = "1"
			}
		}
		return m
	}
	nd.ECNNP, nd.ECNRP = enable(np), enable(rp)
	return nd
}

// Device is one RDMA device.
type Device struct {
	Name string
	// Files are files directly below the device: fw_ver, board_id,
	// hca_type, node_guid, ... name -> content (a newline is appended).
	Files map[string]string
	Ports []Port
	// HWCounters are device-wide hw_counters (mlx4); nil: no directory.
	HWCounters map[string]string
	// TrafficClass is the content of tc/<port>/traffic_class by port.
	TrafficClass map[int]string
}

// Port is one port of a device.
type Port struct {
	Num int
	// Files are files directly below ports/<p>: state, phys_state, rate,
	// link_layer, ... name -> content (a newline is appended).
	Files map[string]string
	// Counters and HWCounters are the files of counters/ and hw_counters/,
	// name -> content. A nil map means the directory does not exist, as on
	// ports without hw_counters (mlx4) or on iWARP devices.
	Counters   map[string]string
	HWCounters map[string]string
	// Netdevs are the gid_attrs/ndevs files by GID index; "" writes an
	// empty file, like a GID entry without a netdev.
	Netdevs []string
}

// Device returns the device named name, or nil.
func (s *Spec) Device(name string) *Device {
	for i := range s.Devices {
		if s.Devices[i].Name == name {
			return &s.Devices[i]
		}
	}
	return nil
}

// Port returns port num of the device, or nil.
func (d *Device) Port(num int) *Port {
	for i := range d.Ports {
		if d.Ports[i].Num == num {
			return &d.Ports[i]
		}
	}
	return nil
}

// Clone returns a deep copy, so a shared spec can be changed per test.
func (s Spec) Clone() Spec {
	out := Spec{Devices: make([]Device, len(s.Devices))}
	for i, d := range s.Devices {
		nd := Device{Name: d.Name, Files: maps.Clone(d.Files), Ports: make([]Port, len(d.Ports)), HWCounters: maps.Clone(d.HWCounters), TrafficClass: maps.Clone(d.TrafficClass)}
		for j, p := range d.Ports {
			nd.Ports[j] = Port{
				Num:        p.Num,
				Files:      maps.Clone(p.Files),
				Counters:   maps.Clone(p.Counters),
				HWCounters: maps.Clone(p.HWCounters),
				Netdevs:    slices.Clone(p.Netdevs),
			}
		}
		out.Devices[i] = nd
	}
	for _, n := range s.Netdevs {
		out.Netdevs = append(out.Netdevs, Netdev{Name: n.Name, Files: maps.Clone(n.Files), ECNNP: maps.Clone(n.ECNNP), ECNRP: maps.Clone(n.ECNRP),
			NPFiles: maps.Clone(n.NPFiles), Members: slices.Clone(n.Members)})
	}
	return out
}

// Build writes spec below dir (created if needed). It fails on names that
// would escape the tree.
func Build(dir string, spec Spec) error {
	classDir := filepath.Join(dir, "infiniband")
	if err := os.MkdirAll(classDir, 0o755); err != nil {
		return fmt.Errorf("sysfstest: %w", err)
	}
	for _, d := range spec.Devices {
		if err := checkName(d.Name); err != nil {
			return fmt.Errorf("sysfstest: device: %w", err)
		}
		devDir := filepath.Join(dir, "devices", d.Name)
		if err := writeFiles(devDir, d.Files); err != nil {
			return fmt.Errorf("sysfstest: device %s: %w", d.Name, err)
		}
		for _, p := range d.Ports {
			if p.Num < 1 {
				return fmt.Errorf("sysfstest: device %s: port %d: ports count from 1", d.Name, p.Num)
			}
			if err := buildPort(filepath.Join(devDir, "ports", strconv.Itoa(p.Num)), p); err != nil {
				return fmt.Errorf("sysfstest: device %s port %d: %w", d.Name, p.Num, err)
			}
		}
		if d.HWCounters != nil {
			if err := writeFiles(filepath.Join(devDir, string(HWCounters)), d.HWCounters); err != nil {
				return fmt.Errorf("sysfstest: device %s: %w", d.Name, err)
			}
		}
		for p, content := range d.TrafficClass {
			if err := writeFiles(filepath.Join(devDir, "tc", strconv.Itoa(p)), map[string]string{"traffic_class": content}); err != nil {
				return fmt.Errorf("sysfstest: device %s: %w", d.Name, err)
			}
		}
		if len(d.Ports) == 0 {
			if err := os.MkdirAll(filepath.Join(devDir, "ports"), 0o755); err != nil {
				return fmt.Errorf("sysfstest: device %s: %w", d.Name, err)
			}
		}
		link := filepath.Join(classDir, d.Name)
		if err := os.Symlink(filepath.Join("..", "devices", d.Name), link); err != nil {
			return fmt.Errorf("sysfstest: device %s: %w", d.Name, err)
		}
	}
	for _, n := range spec.Netdevs {
		if err := buildNetdev(dir, n); err != nil {
			return fmt.Errorf("sysfstest: netdev %s: %w", n.Name, err)
		}
	}
	return nil
}

func buildNetdev(dir string, n Netdev) error {
	if err := checkName(n.Name); err != nil {
		return err
	}
	nd := NetdevDir(dir, n.Name)
	if err := writeFiles(nd, n.Files); err != nil {
		return err
	}
	for sub, files := range map[string]map[int]string{"roce_np": n.ECNNP, "roce_rp": n.ECNRP} {
		if files == nil {
			continue
		}
		named := make(map[string]string, len(files))
		for p, c := range files {
			named[strconv.Itoa(p)] = c
		}
		if err := writeFiles(filepath.Join(nd, "ecn", sub, "enable"), named); err != nil {
			return err
		}
	}
	if n.NPFiles != nil {
		if err := writeFiles(filepath.Join(nd, "ecn", "roce_np"), n.NPFiles); err != nil {
			return err
		}
	}
	if n.Members != nil {
		if err := writeFiles(filepath.Join(nd, "bonding"), map[string]string{"slaves": strings.Join(n.Members, " ")}); err != nil {
			return err
		}
		for _, m := range n.Members {
			if err := checkName(m); err != nil {
				return err
			}
			if err := os.Symlink(filepath.Join("..", m), filepath.Join(nd, "lower_"+m)); err != nil {
				return err
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "net"), 0o755); err != nil {
		return err
	}
	// As in real sysfs, class/net/<netdev> is a symlink to the device.
	return os.Symlink(filepath.Join("..", "devices", "virtual", "net", n.Name), filepath.Join(dir, "net", n.Name))
}

// NetdevDir is the real directory of a netdev in a tree built at dir.
func NetdevDir(dir, netdev string) string {
	return filepath.Join(dir, "devices", "virtual", "net", netdev)
}

func buildPort(dir string, p Port) error {
	if err := writeFiles(dir, p.Files); err != nil {
		return err
	}
	if p.Counters != nil {
		if err := writeFiles(filepath.Join(dir, string(Counters)), p.Counters); err != nil {
			return err
		}
	}
	if p.HWCounters != nil {
		if err := writeFiles(filepath.Join(dir, string(HWCounters)), p.HWCounters); err != nil {
			return err
		}
	}
	if len(p.Netdevs) > 0 {
		ndevs := make(map[string]string, len(p.Netdevs))
		for i, n := range p.Netdevs {
			ndevs[strconv.Itoa(i)] = n
		}
		if err := writeFiles(filepath.Join(dir, "gid_attrs", "ndevs"), ndevs); err != nil {
			return err
		}
	}
	return nil
}

// writeFiles creates dir and writes each file with a trailing newline, as
// sysfs attributes end. An empty content writes an empty file.
func writeFiles(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, content := range files {
		if err := checkName(name); err != nil {
			return err
		}
		if content != "" {
			content += "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o444); err != nil {
			return err
		}
	}
	return nil
}

func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%q is not a file name", name)
	}
	// Linux's NAME_MAX: a longer name parses but cannot be created (the
	// fuzzer found one).
	if len(name) > 255 {
		return fmt.Errorf("%.40q...: a file name of %d bytes, more than 255", name, len(name))
	}
	return nil
}

// PortDir is the real directory of a port in a tree built at dir.
func PortDir(dir, device string, port int) string {
	return filepath.Join(dir, "devices", device, "ports", strconv.Itoa(port))
}

// CounterPath is the file of one counter in a tree built at dir.
func CounterPath(dir, device string, port int, set Set, name string) string {
	return filepath.Join(PortDir(dir, device, port), string(set), name)
}

// SetCounter writes a new value into a counter file, to simulate counters
// moving between scrapes. The file is replaced by rename, so a concurrent
// reader sees the old or the new value, never a half-written one; the
// temporary file lives outside the counter directory so no reader ever
// lists it as a counter.
func SetCounter(dir, device string, port int, set Set, name string, value uint64) error {
	return SetFile(CounterPath(dir, device, port, set, name), dir, strconv.FormatUint(value, 10))
}

// SetPortFile replaces a file directly below the port (state, rate, ...).
func SetPortFile(dir, device string, port int, name, content string) error {
	return SetFile(filepath.Join(PortDir(dir, device, port), name), dir, content)
}

// SetFile atomically replaces path (inside the tree at dir) with content and
// a trailing newline.
func SetFile(path, dir, content string) error {
	tmp, err := os.CreateTemp(dir, ".sysfstest-*")
	if err != nil {
		return fmt.Errorf("sysfstest: set %s: %w", path, err)
	}
	_, err = tmp.WriteString(content + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o444)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("sysfstest: set %s: %w", path, err)
	}
	return nil
}

// Breakage is a way to make a counter file unreadable. chmod 000 does not
// stop root, so the file is removed or replaced instead.
type Breakage int

const (
	// Remove deletes the file: rdmamap no longer lists it, so the counter is
	// absent from the reading.
	Remove Breakage = iota
	// ReplaceWithDir puts a directory in its place: rdmamap's listing skips
	// directories, so the counter is absent too.
	ReplaceWithDir
	// Garble writes text that is not a number, like a driver's
	// "N/A (no PMA)": rdmamap lists it and reports 0.
	Garble
)

// BreakCounter makes one counter unreadable in the way b says.
func BreakCounter(dir, device string, port int, set Set, name string, b Breakage) error {
	path := CounterPath(dir, device, port, set, name)
	switch b {
	case Remove:
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("sysfstest: break %s: %w", path, err)
		}
	case ReplaceWithDir:
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sysfstest: break %s: %w", path, err)
		}
		if err := os.Mkdir(path, 0o755); err != nil {
			return fmt.Errorf("sysfstest: break %s: %w", path, err)
		}
	case Garble:
		return SetFile(path, dir, "N/A (no PMA)")
	default:
		return fmt.Errorf("sysfstest: break %s: unknown breakage %d", path, b)
	}
	return nil
}
