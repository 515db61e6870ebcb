package collector

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/collector/sysfstest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestSysfsParsePortState(t *testing.T) {
	tests := []struct{ in, want string }{
		{"4: ACTIVE", "ACTIVE"},
		{"4: ACTIVE\n", "ACTIVE"},
		{"1: DOWN", "DOWN"},
		{"2: INIT", "INIT"},
		{"3: ARMED", "ARMED"},
		{"5: ACTIVE_DEFER", "ACTIVE_DEFER"},
		{"ACTIVE", "ACTIVE"},
		{"  ACTIVE  ", "ACTIVE"},
		{"4:ACTIVE", "ACTIVE"},
		{"", ""},
		{"x: ACTIVE", "x: ACTIVE"}, // not a numbered state: kept whole, so it is not mistaken for ACTIVE
		{": ACTIVE", ": ACTIVE"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := parsePortState(tc.in); got != tc.want {
				t.Errorf("parsePortState(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSysfsSortPorts(t *testing.T) {
	ports := []string{"10", "2", "x", "1", "b"}
	sortSysfsPorts(ports)
	if want := []string{"1", "2", "10", "b", "x"}; !slices.Equal(ports, want) {
		t.Fatalf("sorted %v, want %v", ports, want)
	}
}

func FuzzSysfsParsePortState(f *testing.F) {
	for _, s := range []string{"4: ACTIVE", "1: DOWN", "ACTIVE", "", ":", "9999999999999999999: X"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := parsePortState(s)
		if got != strings.TrimSpace(got) {
			t.Fatalf("parsePortState(%q) = %q, not trimmed", s, got)
		}
		if len(got) > len(s) {
			t.Fatalf("parsePortState(%q) = %q grew", s, got)
		}
		// A name without a numeric prefix is returned as it is.
		if !strings.Contains(s, ":") && got != strings.TrimSpace(s) {
			t.Fatalf("parsePortState(%q) = %q, want the trimmed input", s, got)
		}
	})
}

// The namespace test runs the real collector, through rdmamap and its fixed
// /sys/class/infiniband, against a fixture tree. The outer run builds the
// tree and re-executes this test binary inside a private mount namespace in
// which the tree is bind-mounted over /sys/class; the inner run, told by
// sysfsNSTreeEnv, does the assertions.
const (
	sysfsNSTreeEnv   = "RDMAWATCH_SYSFS_NS_TREE"
	sysfsNSNetdevEnv = "RDMAWATCH_SYSFS_NS_NETDEV"
	// sysfsNSMarker is a file the outer run puts in the tree: the inner run
	// checks it is there, so it never asserts against the host's sysfs.
	sysfsNSMarker = ".rdmawatch-sysfs-fixture"
	// sysfsNSMountFailed is the exit code of the wrapper when the bind
	// mount itself fails (the environment refuses it, not the code).
	sysfsNSMountFailed = 97
	sysfsCapture       = "../test/fixtures/mlx-sysfs-capture.txt"
	sysfsNoNetdev      = "rwnone0" // a netdev that does not exist
)

// sysfsNamespaceSpec is the tree: the real capture (mlx4_0, mlx5_0 on
// InfiniBand) plus RoCE devices, a DOWN port, an iWARP-like device without
// counters and a device without ports. realNetdev ("" if none) is the
// netdev mlx5_1 port 1 names, so ethtool reads a real interface.
func sysfsNamespaceSpec(t *testing.T, realNetdev string) sysfstest.Spec {
	t.Helper()
	spec, err := sysfstest.FromCapture(sysfsCapture)
	if err != nil {
		t.Fatal(err)
	}
	roce := sysfstest.MLX5RoCE(2, 2)
	roce.Devices[0].Name, roce.Devices[1].Name = "mlx5_1", "mlx5_2"
	if realNetdev == "" {
		realNetdev = sysfsNoNetdev
	}
	roce.Devices[0].Ports[0].Netdevs = []string{realNetdev, realNetdev}
	roce.Devices[0].Ports[1].Netdevs = []string{sysfsNoNetdev}
	// Empty default GID, then the netdev at index 1, and a wrong name at
	// index 10, which sorts before 2 by name: the reader must go by number.
	nd := make([]string, 12)
	nd[1], nd[10] = "rwtest2", "wrong0"
	roce.Devices[1].Ports[0].Netdevs = nd
	roce.Devices[1].Ports[1].Files["state"] = "1: DOWN"
	spec.Devices = append(spec.Devices, roce.Devices...)
	spec.Devices = append(spec.Devices,
		sysfstest.Device{
			Name:  "cxgb4_0",
			Files: map[string]string{"fw_ver": "1.27.0.0", "hca_type": "T62100-CR"},
			Ports: []sysfstest.Port{{Num: 1, Files: map[string]string{
				"state": "4: ACTIVE", "link_layer": "Ethernet", "rate": "100 Gb/sec (4X EDR)"}}},
		},
		sysfstest.Device{Name: "rxe0", Files: map[string]string{"node_guid": "0000:0000:0000:0001"}},
	)
	// The netdevs' configuration: the real interface gets MLNX_OFED's ecn
	// files and an MTU the host's own interface does not have, so the test
	// sees it comes from the tree; rwtest2 is upstream-like (no ecn);
	// rwnone0 has no netdev directory at all. DCB is the real kernel's.
	if realNetdev != "" {
		spec.Netdevs = append(spec.Netdevs, sysfstest.RoCENetdev(realNetdev, 9000, []int{3}, []int{3}))
	}
	spec.Netdevs = append(spec.Netdevs, sysfstest.RoCENetdev("rwtest2", 4200, nil, nil))
	return spec
}

func TestSysfsHostInMountNamespace(t *testing.T) {
	if tree := os.Getenv(sysfsNSTreeEnv); tree != "" {
		sysfsNamespaceChecks(t, tree, os.Getenv(sysfsNSNetdevEnv))
		return
	}
	if os.Geteuid() != 0 {
		t.Skipf("skipped: bind-mounting the fixture tree over /sys/class needs root (CAP_SYS_ADMIN); running as uid %d", os.Geteuid())
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skipf("skipped: unshare(1) (util-linux) is needed for a private mount namespace: %v", err)
	}

	netdev := ethtoolTestNetdev()
	tree := t.TempDir()
	if err := sysfstest.Build(tree, sysfsNamespaceSpec(t, netdev)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, sysfsNSMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	hostClassBefore := sysfsLstatDesc("/sys/class/infiniband")
	mountsBefore := sysfsMountsAt(t, "/sys/class")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The tree and binary go in as positional parameters, so no path is
	// ever parsed by the shell.
	script := `mount --bind "$1" /sys/class || exit ` + strconv.Itoa(sysfsNSMountFailed) + `
exec "$2" -test.run '^TestSysfsHostInMountNamespace$' -test.v -test.count=1 -test.timeout=90s`
	cmd := exec.CommandContext(ctx, unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", tree, os.Args[0])
	cmd.Env = append(os.Environ(), sysfsNSTreeEnv+"="+tree, sysfsNSNetdevEnv+"="+netdev)
	out, err := cmd.CombinedOutput()
	t.Logf("inner run (unshare -m, %s bound over /sys/class):\n%s", tree, out)

	// Whatever happened inside, the host's /sys/class must be untouched.
	if got := sysfsMountsAt(t, "/sys/class"); !slices.Equal(got, mountsBefore) {
		t.Errorf("mounts at /sys/class changed in the host namespace: before %q, after %q", mountsBefore, got)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); bytes.Contains(b, []byte(tree)) {
		t.Errorf("the fixture tree %s shows in the host's /proc/self/mountinfo: the bind mount leaked", tree)
	}
	if got := sysfsLstatDesc("/sys/class/infiniband"); got != hostClassBefore {
		t.Errorf("host /sys/class/infiniband changed: before %s, after %s", hostClassBefore, got)
	}

	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == sysfsNSMountFailed {
		t.Skipf("skipped: unshare worked but mount --bind over /sys/class was refused (a restricted container?): %s", out)
	}
	if err != nil {
		if ctx.Err() != nil {
			t.Fatalf("inner run timed out: %v", err)
		}
		// unshare's own failure (before anything of ours ran) is the
		// environment's refusal, not a collector bug.
		if bytes.HasPrefix(out, []byte("unshare: ")) {
			t.Skipf("skipped: unshare -m failed (no CAP_SYS_ADMIN in this environment?): %s", out)
		}
		t.Fatalf("inner run in the mount namespace failed: %v", err)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestSysfsHostInMountNamespace")) {
		t.Fatal("inner run exited 0 without passing TestSysfsHostInMountNamespace (did it run at all?)")
	}
}

// sysfsMountsAt lists the mountinfo lines whose mount point is dir, without
// the mount ids, which are the only part that may differ harmlessly.
func sysfsMountsAt(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[4] == dir {
			out = append(out, strings.Join(fields[2:], " "))
		}
	}
	return out
}

func sysfsLstatDesc(path string) string {
	fi, err := os.Lstat(path)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%v %v", fi.Mode(), fi.ModTime())
}

// sysfsStepClock is a clock that moves one second per call.
type sysfsStepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *sysfsStepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// sysfsNamespaceChecks runs inside the mount namespace.
func sysfsNamespaceChecks(t *testing.T, tree, realNetdev string) {
	if _, err := os.Stat(filepath.Join("/sys/class", sysfsNSMarker)); err != nil {
		t.Fatalf("/sys/class is not the fixture tree (marker: %v); refusing to test against the host", err)
	}
	// The bind mount must not be visible from the parent's namespace
	// while it exists: the parent is the outer test binary (unshare and
	// sh exec, they do not fork).
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", os.Getppid())); err == nil && bytes.Contains(b, []byte(tree)) {
		t.Errorf("the bind mount of %s is visible in the parent's mount namespace", tree)
	}
	spec := sysfsNamespaceSpec(t, realNetdev)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	clock := &sysfsStepClock{t: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
	h, err := NewHostSource("gpu-017", WithHostClock(clock.now), WithHostLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()

	rd, err := h.Next(ctx)
	if err != nil {
		t.Fatalf("first scrape: %v", err)
	}
	ports := map[string]*PortReading{}
	var order []string
	for i := range rd.Ports {
		p := &rd.Ports[i]
		key := fmt.Sprintf("%s/%d", p.Device, p.Port)
		ports[key] = p
		order = append(order, key)
	}

	t.Run("reading", func(t *testing.T) {
		if rd.Node != "gpu-017" || rd.Time.IsZero() || rd.Restart {
			t.Errorf("reading node %q time %v restart %v", rd.Node, rd.Time, rd.Restart)
		}
		for _, p := range rd.Ports {
			if !p.Time.After(rd.Time) {
				t.Errorf("%s/%d: port time %v not after scrape start %v", p.Device, p.Port, p.Time, rd.Time)
			}
		}
	})

	t.Run("ports found, DOWN and counterless skipped", func(t *testing.T) {
		want := []string{"mlx4_0/1", "mlx4_0/2", "mlx5_0/1", "mlx5_1/1", "mlx5_1/2", "mlx5_2/1"}
		if !slices.Equal(order, want) {
			t.Fatalf("ports %v, want %v (mlx5_2/2 is DOWN, cxgb4_0 has no counters, rxe0 no ports)", order, want)
		}
	})

	t.Run("devices", func(t *testing.T) {
		want := map[string]DeviceInfo{
			"mlx4_0":  {FWVersion: "2.31.5050", BoardID: "SM_1141000001000", HCAType: "MT4099"},
			"mlx5_0":  {FWVersion: "14.28.2006", BoardID: "SM_2001000001034", HCAType: "MT4118", NodeGUID: "0a7f:bc12:45ef:d23b"},
			"mlx5_1":  {FWVersion: "22.36.1010", BoardID: "MT_0000000359", HCAType: "MT4125", NodeGUID: "b8ce:f603:00a1:0000"},
			"mlx5_2":  {FWVersion: "22.36.1010", BoardID: "MT_0000000359", HCAType: "MT4125", NodeGUID: "b8ce:f603:00a1:0001"},
			"cxgb4_0": {FWVersion: "1.27.0.0", HCAType: "T62100-CR"},
			"rxe0":    {NodeGUID: "0000:0000:0000:0001"},
		}
		if !maps.Equal(rd.Devices, want) {
			t.Errorf("devices %+v\nwant    %+v", rd.Devices, want)
		}
	})

	t.Run("state, rate, link layer", func(t *testing.T) {
		for key, want := range map[string][2]string{
			"mlx4_0/1": {"InfiniBand", "40 Gb/sec (4X QDR)"},
			"mlx4_0/2": {"InfiniBand", "40 Gb/sec (4X QDR)"}, // the capture's literal \n is gone
			"mlx5_0/1": {"InfiniBand", "25 Gb/sec (1X EDR)"},
			"mlx5_1/1": {"Ethernet", "200 Gb/sec (4X HDR)"},
		} {
			p := ports[key]
			if p == nil {
				t.Fatalf("%s missing", key)
			}
			if p.State != "ACTIVE" || p.LinkLayer != want[0] || p.Rate != want[1] {
				t.Errorf("%s: state %q link_layer %q rate %q; want ACTIVE %q %q", key, p.State, p.LinkLayer, p.Rate, want[0], want[1])
			}
		}
	})

	t.Run("counters equal the capture", func(t *testing.T) {
		for _, dev := range []string{"mlx4_0", "mlx5_0"} {
			d := spec.Device(dev)
			for _, sp := range d.Ports {
				key := fmt.Sprintf("%s/%d", dev, sp.Num)
				p := ports[key]
				sysfsCompareSet(t, key+" counters", p.Counters, sp.Counters)
				sysfsCompareSet(t, key+" hw_counters", p.HWCounters, sp.HWCounters)
			}
		}
		if ports["mlx4_0/1"].HWCounters != nil {
			t.Errorf("mlx4_0/1 has hw_counters %v; its tree has no such directory", ports["mlx4_0/1"].HWCounters)
		}
		if v, ok := ports["mlx5_0/1"].HWCounters["lifespan"]; !ok || v != 10 {
			t.Errorf("mlx5_0/1 hw_counters/lifespan = %d, %v; want 10", v, ok)
		}
		for _, key := range []string{"mlx5_1/1", "mlx5_2/1"} {
			for _, name := range []string{"np_cnp_sent", "rp_cnp_handled", "out_of_buffer", "out_of_sequence", "lifespan"} {
				if _, ok := ports[key].HWCounters[name]; !ok {
					t.Errorf("%s: hw_counters/%s missing", key, name)
				}
			}
		}
	})

	t.Run("netdev mapping", func(t *testing.T) {
		want := realNetdev
		if want == "" {
			want = sysfsNoNetdev
		}
		for key, w := range map[string]string{
			"mlx4_0/1": "", "mlx5_0/1": "", "mlx5_1/1": want, "mlx5_1/2": sysfsNoNetdev, "mlx5_2/1": "rwtest2",
		} {
			if got := ports[key].Netdev; got != w {
				t.Errorf("%s netdev %q, want %q", key, got, w)
			}
		}
	})

	t.Run("ethtool", func(t *testing.T) {
		if realNetdev != "" {
			if len(ports["mlx5_1/1"].Ethtool) == 0 {
				t.Errorf("mlx5_1/1 (netdev %s) has no ethtool statistics", realNetdev)
			}
		}
		// A missing netdev costs its port the ethtool map, not the scrape.
		if ports["mlx5_1/2"].Ethtool != nil || ports["mlx5_1/2"].Counters == nil {
			t.Errorf("mlx5_1/2 (missing netdev): ethtool %v, counters %d", ports["mlx5_1/2"].Ethtool, len(ports["mlx5_1/2"].Counters))
		}
		if ports["mlx4_0/1"].Ethtool != nil {
			t.Error("an InfiniBand port without netdev got ethtool statistics")
		}
	})

	t.Run("config", func(t *testing.T) {
		sysfsNamespaceConfigChecks(t, rd, ports, realNetdev)
	})

	t.Run("skipped reasons", func(t *testing.T) {
		sc, err := NewSysfsReader(logger, nil).Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range sc.Skipped {
			got[s.Device+"/"+s.Port] = s.Reason
		}
		for key, reason := range map[string]string{
			"mlx5_2/2":  "state DOWN",
			"cxgb4_0/1": "no counters or hw_counters directory",
			"rxe0/":     "no ports below /sys/class/infiniband/rxe0/ports",
		} {
			if got[key] != reason {
				t.Errorf("skipped %s: reason %q, want %q (all: %v)", key, got[key], reason, got)
			}
		}
	})

	t.Run("values change between scrapes", func(t *testing.T) {
		oldData := ports["mlx4_0/1"].Counters["port_xmit_data"]
		oldOOS := ports["mlx5_0/1"].HWCounters["out_of_sequence"]
		if err := sysfstest.SetCounter(tree, "mlx4_0", 1, sysfstest.Counters, "port_xmit_data", oldData+12345); err != nil {
			t.Fatal(err)
		}
		if err := sysfstest.SetCounter(tree, "mlx5_0", 1, sysfstest.HWCounters, "out_of_sequence", oldOOS+1); err != nil {
			t.Fatal(err)
		}
		rd2, err := h.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p := sysfsFindPort(t, rd2, "mlx4_0", 1)
		if got := p.Counters["port_xmit_data"]; got != oldData+12345 {
			t.Errorf("port_xmit_data %d after update, want %d", got, oldData+12345)
		}
		if got := sysfsFindPort(t, rd2, "mlx5_0", 1).HWCounters["out_of_sequence"]; got != oldOOS+1 {
			t.Errorf("out_of_sequence %d after update, want %d", got, oldOOS+1)
		}
		if !rd2.Time.After(rd.Time) || !p.Time.After(ports["mlx4_0/1"].Time) {
			t.Errorf("second scrape not later: %v vs %v", rd2.Time, rd.Time)
		}
	})

	t.Run("missing and unreadable files", func(t *testing.T) {
		brk := func(name string, b sysfstest.Breakage) {
			t.Helper()
			if err := sysfstest.BreakCounter(tree, "mlx5_0", 1, sysfstest.Counters, name, b); err != nil {
				t.Fatal(err)
			}
		}
		brk("symbol_error", sysfstest.Remove)
		brk("port_rcv_errors", sysfstest.ReplaceWithDir)
		brk("link_downed", sysfstest.Garble)
		if err := sysfstest.SetCounter(tree, "mlx5_0", 1, sysfstest.Counters, "link_error_recovery", 3); err != nil {
			t.Fatal(err)
		}
		// A whole hw_counters directory gone (driver reload in progress).
		if err := os.RemoveAll(filepath.Join(sysfstest.PortDir(tree, "mlx5_1", 2), "hw_counters")); err != nil {
			t.Fatal(err)
		}
		// rate unreadable: the port stays, with the rate empty.
		if err := os.Remove(filepath.Join(sysfstest.PortDir(tree, "mlx5_2", 1), "rate")); err != nil {
			t.Fatal(err)
		}
		rd3, err := h.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := sysfsFindPort(t, rd3, "mlx5_0", 1).Counters
		if v, ok := c["symbol_error"]; ok {
			t.Errorf("removed symbol_error is present (%d); a missing file must be absent", v)
		}
		if v, ok := c["port_rcv_errors"]; ok {
			t.Errorf("port_rcv_errors replaced by a directory is present (%d); directories must stay out", v)
		}
		// rdmamap turns a file it cannot parse into 0; the reader leaves it
		// out: unknown, so the delta engine keeps its baseline.
		if v, ok := c["link_downed"]; ok {
			t.Errorf("garbled link_downed is present (%d); text that is not a counter must be absent", v)
		}
		if c["link_error_recovery"] != 3 || len(c) != 18 {
			t.Errorf("other counters disturbed: link_error_recovery %d, %d counters (want 18)", c["link_error_recovery"], len(c))
		}
		p := sysfsFindPort(t, rd3, "mlx5_1", 2)
		if p.HWCounters != nil || len(p.Counters) == 0 {
			t.Errorf("mlx5_1/2 without hw_counters: hw %v, counters %d; want nil hw, counters kept", p.HWCounters, len(p.Counters))
		}
		if p := sysfsFindPort(t, rd3, "mlx5_2", 1); p.Rate != "" || len(p.Counters) == 0 {
			t.Errorf("mlx5_2/1 without rate file: rate %q, %d counters", p.Rate, len(p.Counters))
		}
	})

	t.Run("port going down", func(t *testing.T) {
		if err := sysfstest.SetPortFile(tree, "mlx5_1", 2, "state", "1: DOWN"); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(sysfstest.PortDir(tree, "mlx4_0", 2), "state")); err != nil {
			t.Fatal(err)
		}
		rd4, err := h.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range rd4.Ports {
			if (p.Device == "mlx5_1" && p.Port == 2) || (p.Device == "mlx4_0" && p.Port == 2) {
				t.Errorf("%s/%d still read after going DOWN / losing its state file", p.Device, p.Port)
			}
		}
		if len(rd4.Ports) != 4 {
			t.Errorf("%d ports, want 4", len(rd4.Ports))
		}
	})

	t.Run("canceled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := NewSysfsReader(logger, nil).Read(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Read with canceled ctx: %v", err)
		}
		if _, err := h.Next(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Next with canceled ctx: %v", err)
		}
	})

	t.Run("no devices", func(t *testing.T) {
		class := filepath.Join(tree, "infiniband")
		if err := os.Rename(class, class+".off"); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(class+".off", class)
		check := func(what string) {
			t.Helper()
			rd, err := h.Next(ctx)
			if !errors.Is(err, ErrNoDevices) || !strings.Contains(err.Error(), "/sys/class/infiniband") {
				t.Fatalf("%s: err = %v, want ErrNoDevices naming /sys/class/infiniband", what, err)
			}
			if rd == nil || rd.Node != "gpu-017" || rd.Time.IsZero() || len(rd.Ports) != 0 || len(rd.Devices) != 0 {
				t.Fatalf("%s: reading %+v, want an empty one with node and time", what, rd)
			}
		}
		check("class directory missing")
		if err := os.Mkdir(class, 0o755); err != nil {
			t.Fatal(err)
		}
		check("class directory empty")
		// A real directory in the class dir is not a device to rdmamap.
		if err := os.Mkdir(filepath.Join(class, "mlx5_9"), 0o755); err != nil {
			t.Fatal(err)
		}
		check("only a plain directory")
		if err := os.RemoveAll(class); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("back after no devices", func(t *testing.T) {
		rd, err := h.Next(ctx)
		if err != nil || len(rd.Ports) != 4 {
			t.Fatalf("after the devices came back: %d ports, err %v", len(rd.Ports), err)
		}
	})
}

func sysfsCompareSet(t *testing.T, what string, got map[string]uint64, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for name, text := range want {
		w, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			t.Fatalf("%s/%s: capture value %q: %v", what, name, text, err)
		}
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s/%s = %d (present %v), want %d", what, name, g, ok, w)
		}
	}
}

func sysfsFindPort(t *testing.T, rd *Reading, dev string, port int) *PortReading {
	t.Helper()
	for i := range rd.Ports {
		if rd.Ports[i].Device == dev && rd.Ports[i].Port == port {
			return &rd.Ports[i]
		}
	}
	t.Fatalf("port %s/%d not in reading", dev, port)
	return nil
}

// sysfsNamespaceConfigChecks: the first scrape read each RoCE port's
// configuration from /sys/class/net (the tree) and the kernel's DCB
// netlink, and the collector's inventory carries it through the wire
// format.
func sysfsNamespaceConfigChecks(t *testing.T, rd *Reading, ports map[string]*PortReading, realNetdev string) {
	t.Helper()
	want := map[string]string{
		"mlx4_0/1": "nil", "mlx5_0/1": "nil", // InfiniBand: no netdev
		"mlx5_1/2": "nil", // rwnone0: no such netdev
		"mlx5_2/1": "mtu=4200 pfc=unknown np=unknown rp=unknown trust=",
	}
	if realNetdev != "" {
		// DCB: the real interface (virtio here) has none: unknown, not off.
		want["mlx5_1/1"] = "mtu=9000 pfc=unknown np=[3] rp=[3] trust="
	}
	for key, w := range want {
		if got := fmtConfig(ports[key].Config); got != w {
			t.Errorf("%s config %s, want %s", key, got, w)
		}
	}
	c := &Collector{inventory: map[string]map[portKey]schemas.PortInventory{}, inventorySent: map[string]time.Time{}}
	inv := c.inventoryChange(rd)
	if inv == nil {
		t.Fatal("no inventory for the first reading")
	}
	data, err := schemas.EncodeInventory(inv)
	if err != nil {
		t.Fatal(err)
	}
	back, err := schemas.DecodeInventory(data)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range back.Ports {
		got[fmt.Sprintf("%s/%d", p.Device, p.Port)] = fmtConfig(p.Config)
	}
	for key, w := range want {
		if got[key] != w {
			t.Errorf("inventory %s config %s, want %s", key, got[key], w)
		}
	}
}
