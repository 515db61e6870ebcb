package collector

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Read scrapes every device and port once. Nothing about one device or port
// stops the scrape: an unreadable state, a port without counters or a
// device without ports is recorded in Skipped and logged at debug. With no
// device at all, Read returns an empty scrape and an error wrapping
// ErrNoDevices. ctx ending stops it between ports, so a deadline bounds a
// scrape of many ports; no single read can block, since only regular files
// are read (sysfs attributes answer at once).
func (r *SysfsReader) Read(ctx context.Context) (*SysfsScrape, error) {
	sc := &SysfsScrape{Devices: make(map[string]DeviceInfo)}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sysfs scrape of %s not started: %w", r.classDir, err)
	}
	f := r.files
	f.mu.Lock()
	defer f.mu.Unlock()
	f.begin()
	// Files of devices and ports that were not visited are closed, also
	// when the scrape stops early or finds nothing.
	defer f.sweep()
	class := f.dir(r.classDir)
	// rdmamap's device list: the entries that are not directories (in real
	// sysfs, symlinks to the device). "Missing" and "empty" both mean "no
	// RDMA here" to the caller.
	devices := f.names(class, func(e *sysfsEntry) bool { return !e.isDir })
	if len(devices) == 0 {
		return sc, fmt.Errorf("%w under %s", ErrNoDevices, r.classDir)
	}
	sort.Strings(devices)
	for _, dev := range devices {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("sysfs scrape stopped before device %s: %w", dev, err)
		}
		devDir := f.subdir(class, dev)
		devDir.follow = true
		sc.Devices[dev] = f.deviceInfo(devDir)
		portsDir := f.subdir(devDir, sysfsPortsDir)
		ports := f.names(portsDir, func(*sysfsEntry) bool { return true })
		if len(ports) == 0 {
			r.skip(sc, dev, "", SkipNoPorts, "no ports below "+filepath.Join(r.classDir, dev, sysfsPortsDir))
			continue
		}
		sortSysfsPorts(ports)
		// Device-wide hw_counters (mlx4: rq_num_oos, sq_num_wrfe, ...
		// below the device, not a port) go with the lowest-numbered port:
		// on a one-port-per-fabric HCA that is the port they describe, and
		// on a two-port card always the same one, so their baseline never
		// moves between ports. While that port is skipped they are not
		// published: their next delta spans the gap.
		devHW := r.counters(sc, devDir, sysfsHWCountersDir)
		lowest := slices.IndexFunc(ports, func(p string) bool { n, err := strconv.Atoi(p); return err == nil && n >= 1 })
		for i, p := range ports {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("sysfs scrape stopped before %s port %s: %w", dev, p, err)
			}
			var extra map[string]uint64
			if i == lowest {
				extra = devHW
			}
			r.readPort(sc, portsDir, dev, p, extra)
		}
	}
	return sc, nil
}

// readPort reads one port; devHW are the device-wide hw_counters to add to
// its own (names the port lists itself win: per port is more precise).
func (r *SysfsReader) readPort(sc *SysfsScrape, portsDir *sysfsDir, dev, port string, devHW map[string]uint64) {
	num, err := strconv.Atoi(port)
	if err != nil || num < 1 {
		r.skip(sc, dev, port, SkipNotAPort, "ports entry is not a port number")
		return
	}
	f := r.files
	dir := f.subdir(portsDir, port)
	stateText, err := f.text(dir, "state")
	if err != nil {
		r.skip(sc, dev, port, SkipStateUnreadable, "state unreadable: "+err.Error())
		return
	}
	state := parsePortState(stateText)
	if state != sysfsActiveState {
		r.skip(sc, dev, port, SkipNotActive, "state "+state)
		return
	}

	// The port's time is taken just before its counters are read: that is
	// the instant the figures describe.
	at := r.now()
	counters := r.counters(sc, dir, sysfsCountersDir)
	hw := r.counters(sc, dir, sysfsHWCountersDir)
	if counters == nil && hw == nil {
		// iWARP devices (cxgb4, i40iw) have no per-port counters at all:
		// Telegraf once aborted the whole scrape on such a device.
		r.skip(sc, dev, port, SkipNoCounters, "no counters or hw_counters directory")
		return
	}
	if len(counters) == 0 && len(hw) == 0 {
		// Listed but nothing readable: unknown, which the delta engine must
		// not see as a port of zeros.
		r.skip(sc, dev, port, SkipNoReadableCounter, "no readable counter")
		return
	}
	if len(devHW) > 0 {
		if hw == nil {
			hw = make(map[string]uint64, len(devHW))
		}
		for name, v := range devHW {
			if _, own := hw[name]; !own {
				hw[name] = v
			}
		}
	}
	pr := PortReading{
		Device:     dev,
		Port:       num,
		State:      state,
		Time:       at,
		Counters:   counters,
		HWCounters: hw,
	}
	if pr.LinkLayer, err = f.text(dir, "link_layer"); err != nil {
		sc.skipFile(SkipLinkLayerUnreadable)
		r.logger.Debug("rdma port link_layer unreadable", "device", dev, "port", num, "err", err)
	}
	if pr.Rate, err = f.text(dir, "rate"); err != nil {
		sc.skipFile(SkipRateUnreadable)
		r.logger.Debug("rdma port rate unreadable", "device", dev, "port", num, "err", err)
	}
	pr.Netdev = f.portNetdev(dir)
	sc.Ports = append(sc.Ports, pr)
}

// counters reads every file of the counters directory name below the port
// directory d: nil when there is no such directory or it cannot be listed;
// subdirectories left out; a file that cannot be read or is not a counter
// left out too, and logged at debug.
func (r *SysfsReader) counters(sc *SysfsScrape, d *sysfsDir, name string) map[string]uint64 {
	f := r.files
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
		b, err := f.read(cd, e)
		if err != nil {
			sc.skipFile(SkipCounterUnreadable)
			r.logger.Debug("rdma counter unreadable", "path", cd.path+"/"+e.name, "err", err)
			continue
		}
		v, ok := parseSysfsCounter(b)
		if !ok {
			sc.skipFile(SkipCounterNotANumber)
			r.logger.Debug("rdma counter is not a number", "path", cd.path+"/"+e.name, "text", string(b))
			continue
		}
		m[e.name] = v
	}
	return m
}

// sysfsMaxKeptFiles bounds the files a reader keeps open. Past it a file is
// opened, read and closed on every scrape, as rdmamap does; a host with
// dozens of RDMA ports should not run out of descriptors for counters.
const sysfsMaxKeptFiles = 4096

var (
	errSysfsNotRegular = errors.New("not a regular file")
	errSysfsTooLong    = fmt.Errorf("longer than %d bytes", sysfsMaxValue)
	errSysfsTooMany    = fmt.Errorf("more than %d entries", sysfsMaxEntries)
)

// sysfsFiles is the reader's kept-open state: the directories visited, what
// each listed at the last scrape, and the open files. Guarded by mu; every
// method but close expects mu held.
type sysfsFiles struct {
	mu    sync.Mutex
	gen   uint64 // scrape number
	dirs  map[string]*sysfsDir
	kept  int // open descriptors in all dirs
	dents []byte
	// buf is one byte longer than the longest value taken, so a full read
	// says the file is too long.
	buf [sysfsMaxValue + 1]byte
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
	// follow: the directory is reached through a symlink of its own (a
	// device entry of the class directory), the one place sysfs has them.
	follow bool
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

// names lists d and returns the names of the entries keep accepts; none
// when d cannot be listed.
func (f *sysfsFiles) names(d *sysfsDir, keep func(*sysfsEntry) bool) []string {
	if f.list(d) != nil {
		return nil
	}
	out := make([]string, 0, len(d.entries))
	for _, e := range d.entries {
		if keep(e) {
			out = append(out, e.name)
		}
	}
	return out
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

// Offsets into the kernel's struct linux_dirent64, taken from x/sys's
// mirror of it so the layout and byte order are the platform's own.
var (
	direntInoOff    = int(unsafe.Offsetof(unix.Dirent{}.Ino))
	direntReclenOff = int(unsafe.Offsetof(unix.Dirent{}.Reclen))
	direntTypeOff   = int(unsafe.Offsetof(unix.Dirent{}.Type))
	direntNameOff   = int(unsafe.Offsetof(unix.Dirent{}.Name))
)

func (f *sysfsFiles) getdents(d *sysfsDir) error {
	// O_NOFOLLOW: a directory of the tree that is a symlink is not the
	// kernel's layout, but for the class directory's device entries;
	// O_DIRECTORY makes the open fail on anything but a directory before it
	// can block.
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NONBLOCK | unix.O_CLOEXEC
	if !d.follow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := sysfsOpen(d.path, flags)
	if err != nil {
		return &os.PathError{Op: "open", Path: d.path, Err: err}
	}
	defer unix.Close(fd)
	listed := 0
	for {
		n, err := unix.Getdents(fd, f.dents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "getdents", Path: d.path, Err: err}
		}
		if n <= 0 {
			return nil
		}
		err = parseDirents(f.dents[:n], func(name []byte, ino uint64, typ uint8) error {
			if listed++; listed > sysfsMaxEntries {
				return errSysfsTooMany
			}
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
			case unix.DT_DIR:
				e.isDir = true
			case unix.DT_UNKNOWN:
				// File systems without d_type: ask, as rdmamap's lstat does.
				var st unix.Stat_t
				e.isDir = unix.Lstat(d.path+"/"+e.name, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
			default:
				e.isDir = false
			}
			return nil
		})
		if err != nil {
			return &os.PathError{Op: "getdents", Path: d.path, Err: err}
		}
	}
}

// parseDirents walks the struct linux_dirent64 records getdents64 filled b
// with, calling fn for each entry but "." and "..". A record that does not
// fit is EIO: the buffer is the kernel's, so that is a bug, not input to
// guess at.
func parseDirents(b []byte, fn func(name []byte, ino uint64, typ uint8) error) error {
	for len(b) > 0 {
		if len(b) < direntNameOff {
			return unix.EIO
		}
		reclen := int(binary.NativeEndian.Uint16(b[direntReclenOff:]))
		if reclen < direntNameOff || reclen > len(b) {
			return unix.EIO
		}
		rec := b[:reclen]
		b = b[reclen:]
		name := rec[direntNameOff:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		if err := fn(name, binary.NativeEndian.Uint64(rec[direntInoOff:]), rec[direntTypeOff]); err != nil {
			return err
		}
	}
	return nil
}

// read returns the current content of a listed file (valid until the next
// read). A file kept open is read with one pread at offset 0, which makes
// sysfs produce the attribute anew. Only regular files are read (see
// openRegular), at most sysfsMaxValue bytes of them.
func (f *sysfsFiles) read(d *sysfsDir, e *sysfsEntry) ([]byte, error) {
	if e.fd < 0 {
		fd, err := openRegular(d.path + "/" + e.name)
		if err != nil {
			return nil, err
		}
		if f.kept >= sysfsMaxKeptFiles {
			defer unix.Close(fd)
		} else {
			e.fd = fd
			f.kept++
		}
		return f.pread(d, e, fd)
	}
	return f.pread(d, e, e.fd)
}

// openRegular opens path for reading if it is a regular file. O_NONBLOCK
// keeps the open of a FIFO from waiting for a writer, O_NOFOLLOW refuses a
// symlink (to /dev/zero, say), and fstat on the open descriptor, not the
// path, refuses what is left (devices, sockets, FIFOs) without a race.
func openRegular(path string) (int, error) {
	fd, err := sysfsOpen(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (mode %#o)", errSysfsNotRegular, st.Mode&unix.S_IFMT)}
	}
	return fd, nil
}

func (f *sysfsFiles) pread(d *sysfsDir, e *sysfsEntry, fd int) ([]byte, error) {
	for {
		n, err := unix.Pread(fd, f.buf[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err == nil && n == len(f.buf) {
			err = errSysfsTooLong
		}
		if err != nil {
			// Next time from a fresh open: the attribute may be back.
			if e.fd == fd {
				f.closeEntry(e)
			}
			return nil, &os.PathError{Op: "read", Path: d.path + "/" + e.name, Err: err}
		}
		return f.buf[:n], nil
	}
}

func (f *sysfsFiles) closeEntry(e *sysfsEntry) {
	if e.fd >= 0 {
		unix.Close(e.fd)
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
		return "", &os.PathError{Op: "open", Path: d.path + "/" + name, Err: unix.ENOENT}
	}
	if e.isDir {
		return "", &os.PathError{Op: "read", Path: d.path + "/" + name, Err: unix.EISDIR}
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

// deviceInfo reads the device facts; a missing file leaves its field empty
// (mlx4 has no node_guid in some captures, soft devices have no board_id).
func (f *sysfsFiles) deviceInfo(d *sysfsDir) DeviceInfo {
	text := func(name string) string {
		s, _ := f.text(d, name)
		return s
	}
	return DeviceInfo{
		FWVersion: text("fw_ver"),
		BoardID:   text("board_id"),
		HCAType:   text("hca_type"),
		NodeGUID:  text(sysfsNodeGUIDFile),
	}
}

// portNetdev returns the netdev of a RoCE port from gid_attrs/ndevs/<index>,
// or "" when the port names none (InfiniBand ports, older kernels without
// gid_attrs). rdmamap only maps netdev -> device, not port -> netdev, hence
// the direct read. The lowest indices are the default GIDs.
func (f *sysfsFiles) portNetdev(port *sysfsDir) string {
	if e := port.entries[sysfsGidAttrDir]; e == nil || !e.isDir {
		return ""
	}
	gid := f.subdir(port, sysfsGidAttrDir)
	d := f.subdir(gid, sysfsNdevsDir)
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
		fd, err := unix.Open(path, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}
