package collector

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Mellanox/rdmamap"
)

func TestHostOptions(t *testing.T) {
	if _, err := NewHostSource(""); !errors.Is(err, ErrInvalidHostOption) {
		t.Errorf("empty node: err = %v, want ErrInvalidHostOption", err)
	}
	if _, err := NewHostSource("n", WithHostClock(nil)); !errors.Is(err, ErrInvalidHostOption) {
		t.Errorf("nil clock: err = %v, want ErrInvalidHostOption", err)
	}
	if _, err := NewHostSource("n", WithHostLogger(nil)); !errors.Is(err, ErrInvalidHostOption) {
		t.Errorf("nil logger: err = %v, want ErrInvalidHostOption", err)
	}
	h, err := NewHostSource("n", WithEthtool(false))
	if err != nil {
		t.Fatal(err)
	}
	if h.eth != nil {
		t.Error("WithEthtool(false) still opened an ethtool socket")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}

// On a host without RDMA (this one, unless it has /sys/class/infiniband
// devices), Next says so with ErrNoDevices and an empty reading. The
// namespace test covers the same against a fixture tree on any host.
func TestHostNoDevicesOnThisHost(t *testing.T) {
	if devs := rdmamap.GetRdmaDeviceList(); len(devs) > 0 {
		t.Skipf("skipped: this host has RDMA devices %v; TestSysfsHostInMountNamespace covers ErrNoDevices", devs)
	}
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, eth := range []bool{false, true} {
		h, err := NewHostSource("gpu-001", WithEthtool(eth), WithHostClock(func() time.Time { return at }))
		if err != nil {
			t.Fatal(err)
		}
		rd, err := h.Next(context.Background())
		if !errors.Is(err, ErrNoDevices) {
			t.Fatalf("ethtool %v: err = %v, want ErrNoDevices", eth, err)
		}
		if rd == nil || rd.Node != "gpu-001" || !rd.Time.Equal(at) || len(rd.Ports) != 0 {
			t.Fatalf("ethtool %v: reading %+v, want an empty one for gpu-001 at %v", eth, rd, at)
		}
		// The caller keeps polling: the next scrape works the same.
		if _, err := h.Next(context.Background()); !errors.Is(err, ErrNoDevices) {
			t.Fatalf("second scrape: %v", err)
		}
		h.Close()
	}
}

func TestHostCloseAndCancel(t *testing.T) {
	h, err := NewHostSource("n")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: err = %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := h.Next(context.Background()); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Next after Close: err = %v", err)
	}
}

// hostRecorder is a slog handler that keeps the records.
type hostRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *hostRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *hostRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
	return nil
}
func (r *hostRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *hostRecorder) WithGroup(string) slog.Handler      { return r }

func (r *hostRecorder) count(level slog.Level, netdev string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.records {
		if rec.Level != level {
			continue
		}
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "netdev" && a.Value.String() == netdev {
				n++
			}
			return true
		})
	}
	return n
}

// The ethtool half of a scrape, on real netdevs: a shared netdev is read
// once and each port gets its own map; a missing netdev costs only that
// port's map and is logged at warn once, at debug after that.
func TestHostEthtoolPerPort(t *testing.T) {
	netdev := ethtoolTestNetdev()
	if netdev == "" {
		t.Skip("skipped: no default-route or up non-loopback interface to read ethtool statistics from")
	}
	rec := &hostRecorder{}
	h, err := NewHostSource("n", WithHostLogger(slog.New(rec)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.eth.Stats(netdev); err != nil {
		t.Skipf("skipped: %v", err)
	}
	scrape := func() []PortReading {
		ports := []PortReading{
			{Device: "mlx5_bond_0", Port: 1, Netdev: netdev},
			{Device: "mlx5_bond_0", Port: 2, Netdev: netdev},
			{Device: "mlx5_1", Port: 1, Netdev: sysfsNoNetdev},
			{Device: "mlx5_2", Port: 1},
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.readEthtool(ports)
		return ports
	}
	ports := scrape()
	if len(ports[0].Ethtool) == 0 || len(ports[1].Ethtool) == 0 {
		t.Fatalf("ports sharing %s: %d and %d stats", netdev, len(ports[0].Ethtool), len(ports[1].Ethtool))
	}
	for k := range ports[0].Ethtool {
		ports[0].Ethtool[k] = 1<<64 - 1
		if ports[1].Ethtool[k] == 1<<64-1 {
			t.Fatal("ports sharing a netdev share one map")
		}
		break
	}
	if ports[2].Ethtool != nil || ports[3].Ethtool != nil {
		t.Errorf("missing/no netdev got stats: %v, %v", ports[2].Ethtool, ports[3].Ethtool)
	}
	scrape()
	if w, d := rec.count(slog.LevelWarn, sysfsNoNetdev), rec.count(slog.LevelDebug, sysfsNoNetdev); w != 1 || d != 1 {
		t.Errorf("missing netdev over two scrapes: %d warn and %d debug records, want 1 and 1", w, d)
	}
}
