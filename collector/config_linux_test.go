package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/collector/sysfstest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func intp(v int) *int        { return &v }
func priosp(p ...int) *[]int { return &p }
func noDCB(context.Context, string) (dcbConfig, error) {
	return dcbConfig{}, errDCBNotExposed
}

// configFixtureReader is a reader of a fixture tree whose DCB answer is
// fixed: the sysfs half is what is tested here, the netlink half has its own
// tests (TestDecodeDCBReply, TestConfigDCBRealNetlink).
func configFixtureReader(t *testing.T, spec sysfstest.Spec, dcb func(context.Context, string) (dcbConfig, error)) (*ConfigReader, string) {
	t.Helper()
	root := t.TempDir()
	if err := sysfstest.Build(filepath.Join(root, "class"), spec); err != nil {
		t.Fatal(err)
	}
	r := NewConfigReader(root)
	r.dcb = dcb
	return r, root
}

func TestConfigReaderFixture(t *testing.T) {
	spec := sysfstest.Spec{Netdevs: []sysfstest.Netdev{
		sysfstest.RoCENetdev("ofed0", 9000, []int{3}, []int{3, 5}),
		sysfstest.RoCENetdev("ofed1", 4200, []int{}, []int{}),
		sysfstest.RoCENetdev("upstream0", 1500, nil, nil), // no ecn directory
	}}
	dcb := func(_ context.Context, netdev string) (dcbConfig, error) {
		switch netdev {
		case "ofed0":
			return dcbConfig{pfc: priosp(3), trust: "dscp"}, nil
		case "ofed1":
			return dcbConfig{}, syscall.EPERM // a failure, not "no DCB"
		}
		return dcbConfig{}, errDCBNotExposed
	}
	r, _ := configFixtureReader(t, spec, dcb)
	ctx := context.Background()
	tests := []struct {
		netdev  string
		want    *schemas.PortConfig
		wantErr string
	}{
		{"ofed0", &schemas.PortConfig{MTU: intp(9000), PFCEnabled: priosp(3), ECNNPEnabled: priosp(3), ECNRPEnabled: priosp(3, 5), Trust: "dscp"}, ""},
		{"ofed1", &schemas.PortConfig{MTU: intp(4200), ECNNPEnabled: priosp(), ECNRPEnabled: priosp()}, "DCB of netdev ofed1: operation not permitted"},
		{"upstream0", &schemas.PortConfig{MTU: intp(1500)}, ""},
		{"gone0", nil, ""}, // the netdev is not there at all: nothing known, no error
		{"../x", nil, "not a netdev name"},
	}
	for _, tc := range tests {
		t.Run(tc.netdev, func(t *testing.T) {
			got, err := r.Read(ctx, tc.netdev)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if !got.Equal(tc.want) || (got == nil) != (tc.want == nil) {
				t.Fatalf("config %s, want %s", fmtConfig(got), fmtConfig(tc.want))
			}
			// Equal compares sets; an empty list must stay a known empty list.
			if got != nil && tc.want != nil && (got.ECNNPEnabled == nil) != (tc.want.ECNNPEnabled == nil) {
				t.Fatalf("ECN NP known %v, want %v", got.ECNNPEnabled != nil, tc.want.ECNNPEnabled != nil)
			}
		})
	}
}

// Hostile files: each must give an error naming the file, leave its own
// setting unknown, and leave the others read.
func TestConfigReaderHostileFiles(t *testing.T) {
	tests := []struct {
		name    string
		break_  func(t *testing.T, nd string) // nd: the netdev's real directory
		file    string                        // relative to the netdev directory, named in the error
		wantErr string
		// what is still known after the breakage
		wantMTU bool
		wantNP  bool
	}{
		{"huge mtu", func(t *testing.T, nd string) {
			writeHostile(t, filepath.Join(nd, "mtu"), bytes.Repeat([]byte("9"), 1<<20))
		}, "mtu", "longer than 255 bytes", false, true},
		{"binary mtu", func(t *testing.T, nd string) { writeHostile(t, filepath.Join(nd, "mtu"), []byte("\x00\xff\x7fELF")) }, "mtu", "not a decimal number", false, true},
		{"negative mtu", func(t *testing.T, nd string) { writeHostile(t, filepath.Join(nd, "mtu"), []byte("-9000\n")) }, "mtu", "negative", false, true},
		{"two lines", func(t *testing.T, nd string) { writeHostile(t, filepath.Join(nd, "mtu"), []byte("1\n2\n")) }, "mtu", "more than one line", false, true},
		{"mtu out of range", func(t *testing.T, nd string) { writeHostile(t, filepath.Join(nd, "mtu"), []byte("12\n")) }, "mtu", "outside 68..65536", false, true},
		{"mtu symlink to /dev/zero", func(t *testing.T, nd string) {
			os.Remove(filepath.Join(nd, "mtu"))
			if err := os.Symlink("/dev/zero", filepath.Join(nd, "mtu")); err != nil {
				t.Fatal(err)
			}
		}, "mtu", "too many levels of symbolic links", false, true},
		{"enable is a FIFO", func(t *testing.T, nd string) {
			p := filepath.Join(nd, "ecn/roce_np/enable/3")
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "ecn/roce_np/enable/3", "not a regular file", true, false},
		{"enable is 2", func(t *testing.T, nd string) {
			writeHostile(t, filepath.Join(nd, "ecn/roce_np/enable/0"), []byte("2\n"))
		}, "ecn/roce_np/enable/0", "want 0 or 1", true, false},
		{"enable is huge", func(t *testing.T, nd string) {
			writeHostile(t, filepath.Join(nd, "ecn/roce_np/enable/7"), bytes.Repeat([]byte{0xff}, 4096))
		}, "ecn/roce_np/enable/7", "longer than 255 bytes", true, false},
		{"priority file missing", func(t *testing.T, nd string) { os.Remove(filepath.Join(nd, "ecn/roce_np/enable/4")) }, "ecn/roce_np/enable/4", "missing while", true, false},
		{"enable is a file", func(t *testing.T, nd string) {
			os.RemoveAll(filepath.Join(nd, "ecn/roce_np/enable"))
			writeHostile(t, filepath.Join(nd, "ecn/roce_np/enable"), []byte("1\n"))
		}, "ecn/roce_np/enable", "not a directory", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := sysfstest.Spec{Netdevs: []sysfstest.Netdev{sysfstest.RoCENetdev("rw0", 9000, []int{3}, []int{3})}}
			r, root := configFixtureReader(t, spec, noDCB)
			nd := sysfstest.NetdevDir(filepath.Join(root, "class"), "rw0")
			tc.break_(t, nd)
			done := make(chan struct{})
			var got *schemas.PortConfig
			var err error
			go func() {
				defer close(done)
				got, err = r.Read(context.Background(), "rw0")
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Read blocked on a hostile file")
			}
			// The error names the file by the path the reader used.
			wantPath := filepath.Join(root, "class/net/rw0", tc.file)
			if err == nil || !strings.Contains(err.Error(), wantPath) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v; want one naming %s and saying %q", err, wantPath, tc.wantErr)
			}
			if got == nil {
				t.Fatal("nothing read; the other settings must survive one bad file")
			}
			if (got.MTU != nil) != tc.wantMTU || (got.ECNNPEnabled != nil) != tc.wantNP {
				t.Fatalf("config %s: want mtu known %v, np known %v", fmtConfig(got), tc.wantMTU, tc.wantNP)
			}
			if got.ECNRPEnabled == nil || !slices.Equal(*got.ECNRPEnabled, []int{3}) {
				t.Fatalf("rp %s, want [3]: an untouched setting was lost", fmtPrios(got.ECNRPEnabled))
			}
		})
	}
}

func writeHostile(t *testing.T, path string, b []byte) {
	t.Helper()
	os.Remove(path)
	if err := os.WriteFile(path, b, 0o444); err != nil {
		t.Fatal(err)
	}
}

// A real RTM_GETDCB on this machine's interface. On a virtio NIC (or any
// without DCB) the kernel answers EOPNOTSUPP: "not exposed", never "off",
// never an error that stops the reading.
func TestConfigDCBRealNetlink(t *testing.T) {
	netdev := ethtoolTestNetdev()
	if netdev == "" {
		t.Skip("skipped: no network interface besides lo")
	}
	ctx := context.Background()
	d, err := queryDCB(ctx, netdev)
	switch {
	case errors.Is(err, errDCBNotExposed):
		if d.pfc != nil || d.trust != "" {
			t.Fatalf("not exposed but config %+v", d)
		}
	case err != nil:
		t.Fatalf("RTM_GETDCB on %s: %v (want an answer or 'not exposed')", netdev, err)
	default:
		t.Logf("%s has DCB: pfc %s trust %q", netdev, fmtPrios(d.pfc), d.trust)
	}
	if _, err := queryDCB(ctx, "rwnone0"); !errors.Is(err, errDCBNotExposed) || !errors.Is(err, syscall.ENODEV) {
		t.Fatalf("RTM_GETDCB on a netdev that does not exist: %v, want not exposed (ENODEV)", err)
	}

	// Through the reader on the real /sys: the MTU is the kernel's.
	cfg, err := NewConfigReader("/sys").Read(ctx, netdev)
	if err != nil {
		t.Fatalf("config of %s: %v", netdev, err)
	}
	b, rerr := os.ReadFile("/sys/class/net/" + netdev + "/mtu")
	if rerr != nil {
		t.Fatal(rerr)
	}
	want, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if cfg == nil || cfg.MTU == nil || *cfg.MTU != want {
		t.Fatalf("config of %s: %s, want mtu %d", netdev, fmtConfig(cfg), want)
	}
	if errors.Is(err, errDCBNotExposed) && (cfg.PFCEnabled != nil || cfg.Trust != "") {
		t.Fatalf("DCB not exposed but pfc %s trust %q", fmtPrios(cfg.PFCEnabled), cfg.Trust)
	}
}

// The host source reads the configuration on its first scrape and then
// once per interval of data time, fills it into every RoCE port (a LAG's
// netdev once), leaves InfiniBand ports without, and a bad file costs a
// warning once and a count, never the scrape.
func TestHostSourceConfigCadence(t *testing.T) {
	root := t.TempDir()
	spec := sysfstest.MLX5RoCE(1, 2) // mlx5_0 ports 1, 2: netdevs ens1f0np0, ens1f1np1
	spec.Netdevs = []sysfstest.Netdev{
		sysfstest.RoCENetdev("ens1f0np0", 9000, []int{3}, []int{3}),
		sysfstest.RoCENetdev("ens1f1np1", 9000, []int{3}, []int{3}),
	}
	class := filepath.Join(root, "class")
	if err := sysfstest.Build(class, spec); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	h, err := NewHostSource("gpu-017", WithSysfsRoot(root), WithEthtool(false), WithHostLogger(logger),
		WithHostClock(func() time.Time { return now }), WithConfigInterval(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx := context.Background()
	scrape := func(at time.Duration) *Reading {
		t.Helper()
		now = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC).Add(at)
		rd, err := h.Next(ctx)
		if err != nil {
			t.Fatalf("scrape at +%v: %v", at, err)
		}
		if len(rd.Ports) != 2 {
			t.Fatalf("scrape at +%v: %d ports", at, len(rd.Ports))
		}
		return rd
	}
	mtus := func(rd *Reading) []string {
		var out []string
		for _, p := range rd.Ports {
			switch {
			case p.Config == nil:
				out = append(out, "-")
			case p.Config.MTU == nil:
				out = append(out, "?")
			default:
				out = append(out, strconv.Itoa(*p.Config.MTU))
			}
		}
		return out
	}
	steps := []struct {
		at     time.Duration
		before func()
		want   []string
	}{
		{0, nil, []string{"9000", "9000"}},
		{10 * time.Second, nil, []string{"-", "-"}},
		{29 * time.Second, nil, []string{"-", "-"}},
		{30 * time.Second, nil, []string{"9000", "9000"}},
		{40 * time.Second, func() {
			if err := sysfstest.SetFile(filepath.Join(sysfstest.NetdevDir(class, "ens1f1np1"), "mtu"), class, "4200"); err != nil {
				t.Fatal(err)
			}
		}, []string{"-", "-"}},
		{61 * time.Second, nil, []string{"9000", "4200"}},
		{95 * time.Second, func() {
			writeHostile(t, filepath.Join(sysfstest.NetdevDir(class, "ens1f0np0"), "ecn/roce_rp/enable/3"), []byte("yes\n"))
		}, []string{"9000", "4200"}},
		{130 * time.Second, nil, []string{"9000", "4200"}},
	}
	var last *Reading
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		last = scrape(s.at)
		if got := mtus(last); !slices.Equal(got, s.want) {
			t.Fatalf("at +%v: mtu per port %v, want %v (- = not read this scrape)", s.at, got, s.want)
		}
	}
	p0 := last.Ports[0].Config
	if p0.ECNRPEnabled != nil || p0.ECNNPEnabled == nil || !slices.Equal(*p0.ECNNPEnabled, []int{3}) {
		t.Fatalf("port 1 after a bad rp file: %s; want rp unknown, np [3]", fmtConfig(p0))
	}
	if p0.PFCEnabled != nil || p0.Trust != "" {
		t.Fatalf("the fixture's netdevs are not in this namespace, so DCB must be unknown: %s", fmtConfig(p0))
	}
	// Two reads saw the bad file: both counted, one warning.
	if got := h.ConfigErrors(); got != 2 {
		t.Errorf("ConfigErrors = %d, want 2", got)
	}
	if n := strings.Count(logs.String(), "port configuration partly unreadable"); n != 1 {
		t.Errorf("%d warnings for one lasting error, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "ecn/roce_rp/enable/3") {
		t.Errorf("the warning does not name the file:\n%s", logs.String())
	}
	// The ports' configs are not shared.
	if last.Ports[0].Config == last.Ports[1].Config || last.Ports[0].Config.ECNNPEnabled == last.Ports[1].Config.ECNNPEnabled {
		t.Error("two ports share one config")
	}

	t.Run("off", func(t *testing.T) {
		h, err := NewHostSource("gpu-017", WithSysfsRoot(root), WithEthtool(false), WithConfigInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		rd, err := h.Next(ctx)
		if err != nil || rd.Ports[0].Config != nil {
			t.Fatalf("config read with the interval 0: %v, %v", rd.Ports[0].Config, err)
		}
	})
	t.Run("negative interval refused", func(t *testing.T) {
		if _, err := NewHostSource("n", WithConfigInterval(-time.Second)); !errors.Is(err, ErrInvalidHostOption) {
			t.Fatalf("err = %v", err)
		}
	})
}

// stepSource is a host source read at data times t0, t0+step, ... that
// ends (io.EOF) after n readings; before reading i it runs before(i).
type stepSource struct {
	h      *HostSource
	now    *time.Time
	t0     time.Time
	step   time.Duration
	n, i   int
	before func(i int)
}

func (s *stepSource) Next(ctx context.Context) (*Reading, error) {
	if s.i == s.n {
		return nil, io.EOF
	}
	s.before(s.i)
	*s.now = s.t0.Add(time.Duration(s.i) * s.step)
	s.i++
	return s.h.Next(ctx)
}

func (s *stepSource) ConfigErrors() uint64 { return s.h.ConfigErrors() }

// The live path end to end on a fixture tree and a real JetStream: the
// host source reads the configuration, the collector publishes it in the
// node's inventory at the first scrape and again when it changes, and the
// failures are counted in what self-monitoring sees.
func TestCollectorPublishesHostConfigInInventory(t *testing.T) {
	root := t.TempDir()
	class := filepath.Join(root, "class")
	spec := sysfstest.MLX5RoCE(1, 1)
	spec.Netdevs = []sysfstest.Netdev{sysfstest.RoCENetdev("ens1f0np0", 9000, []int{3}, []int{3})}
	if err := sysfstest.Build(class, spec); err != nil {
		t.Fatal(err)
	}
	nd := sysfstest.NetdevDir(class, "ens1f0np0")
	writeHostile(t, filepath.Join(nd, "ecn/roce_rp/enable/2"), []byte("x\n"))
	var now time.Time
	h, err := NewHostSource("gpu-017", WithSysfsRoot(root), WithEthtool(false), WithHostLogger(slog.New(slog.DiscardHandler)),
		WithHostClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	src := &stepSource{h: h, now: &now, t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), step: 10 * time.Second, n: 9,
		before: func(i int) {
			if i == 4 {
				if err := sysfstest.SetFile(filepath.Join(nd, "mtu"), class, "4200"); err != nil {
					t.Fatal(err)
				}
			}
		}}
	js := startJS(t)
	var last Scrape
	c := New(src, NewEngine(nil), NewPublisher(js, 8, nil), Config{OnScrape: func(s Scrape) { last = s }})
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Config reads at +0, +30 s and +60 s (DefaultConfigInterval), each
	// failing on roce_rp/enable/2.
	if last.ConfigErrors != 3 {
		t.Errorf("Scrape.ConfigErrors = %d, want 3", last.ConfigErrors)
	}
	ctx := context.Background()
	cons, err := js.OrderedConsumer(ctx, schemas.StreamInventory, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range streamMsgs(t, js, schemas.StreamInventory) {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		inv, err := schemas.DecodeInventory(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range inv.Ports {
			got = append(got, fmt.Sprintf("+%ds %s/%d %s", (inv.TimeMs-src.t0.UnixMilli())/1000, p.Device, p.Port, fmtConfig(p.Config)))
		}
	}
	// The MTU changed before the read at +40 s; the next config read, at
	// +60 s, sees it and the inventory goes out again.
	want := []string{
		"+0s mlx5_0/1 mtu=9000 pfc=unknown np=[3] rp=unknown trust=",
		"+60s mlx5_0/1 mtu=4200 pfc=unknown np=[3] rp=unknown trust=",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("inventories\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func isNotExposed(err error) bool { return errors.Is(err, errDCBNotExposed) }
