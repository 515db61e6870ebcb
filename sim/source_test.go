package sim

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/collector"
)

func sourceConfig(hosts int) Config {
	c := LiveConfig(hosts, 5*time.Second, 2*time.Minute, time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC))
	c.Noise = Noise{JitterFraction: 0.2}
	return c
}

func newSource(t *testing.T, cfg Config, opts ...Option) (*Source, *Fleet) {
	t.Helper()
	f, err := NewFleet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSource(f, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s, f
}

// readAll drains the source.
func readAll(t *testing.T, s *Source) []*collector.Reading {
	t.Helper()
	var out []*collector.Reading
	for {
		r, err := s.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
}

func TestSourceOneReadingPerNodePerRound(t *testing.T) {
	cfg := sourceConfig(16)
	s, f := newSource(t, cfg)
	rs := readAll(t, s)
	nodes := f.Layout().Nodes
	rounds := cfg.Ticks()
	if len(rs) != len(nodes)*rounds {
		t.Fatalf("%d readings, want %d nodes x %d rounds", len(rs), len(nodes), rounds)
	}
	perNode := map[string]int{}
	var last time.Time
	for i, r := range rs {
		perNode[r.Node]++
		if len(r.Ports) != cfg.DevicesPerHost*cfg.PortsPerDevice {
			t.Fatalf("reading %d of %s has %d ports, want %d", i, r.Node, len(r.Ports), cfg.DevicesPerHost*cfg.PortsPerDevice)
		}
		for _, p := range r.Ports {
			if p.Time.After(r.Time) {
				t.Errorf("%s %s/%d read at %s, after its reading's time %s", r.Node, p.Device, p.Port, p.Time, r.Time)
			}
			if len(p.Counters) == 0 || p.LinkLayer == "" || p.State != "ACTIVE" || p.Rate == "" {
				t.Errorf("%s %s/%d: incomplete port reading %+v", r.Node, p.Device, p.Port, p)
			}
			if d := r.Devices[p.Device]; d.NodeGUID == "" || d.FWVersion == "" {
				t.Errorf("%s %s: no device facts", r.Node, p.Device)
			}
		}
		// Readings leave in data-time order, whatever the node order.
		if r.Time.Before(last) {
			t.Fatalf("reading %d (%s at %s) before the previous one at %s", i, r.Node, r.Time, last)
		}
		last = r.Time
	}
	for _, n := range nodes {
		if perNode[n] != rounds {
			t.Errorf("node %s: %d readings, want %d", n, perNode[n], rounds)
		}
	}
	if s.Rounds() != int64(rounds) {
		t.Errorf("Rounds() = %d, want %d", s.Rounds(), rounds)
	}
	if !s.DataTime().Equal(last) {
		t.Errorf("DataTime() = %s, want the newest reading's %s", s.DataTime(), last)
	}
}

// A fleet that reports its configuration hands it to the collector on the
// port readings (the live run's config_mismatch depends on it).
func TestSourceCarriesConfig(t *testing.T) {
	cfg := sourceConfig(8)
	cfg.Faults = []Fault{ConfigReport{MTU: 4200, Priority: 3}}
	s, _ := newSource(t, cfg)
	with := 0
	for _, r := range readAll(t, s) {
		for _, p := range r.Ports {
			if p.Config != nil && p.Config.MTU != nil {
				with++
			}
		}
	}
	if with == 0 {
		t.Fatal("no port reading carries a config")
	}
}

// A collector restart is the node's next reading with Restart set and its
// ports: the engine gives the node a new boot id and takes those ports as a
// fresh baseline, while every other node goes on.
func TestSourceCollectorRestart(t *testing.T) {
	cfg := sourceConfig(8)
	cfg.Noise.CollectorRestarts = 2
	s, _ := newSource(t, cfg)
	boots := map[string]int{}
	eng := collector.NewEngine(func(node string, restarts int) string {
		boots[node]++
		return node + "-" + string(rune('a'+restarts))
	})
	restarted := map[string]bool{}
	var restarts int
	for _, r := range readAll(t, s) {
		b := eng.Apply(r)
		if b == nil {
			t.Fatalf("reading of %s at %s published nothing", r.Node, r.Time)
		}
		if r.Restart {
			restarts++
			restarted[r.Node] = true
			if len(r.Ports) == 0 {
				t.Errorf("restart of %s without ports", r.Node)
			}
			if b.Seq != 1 || b.BootID != r.Node+"-b" {
				t.Errorf("after a restart of %s: boot %s seq %d, want %s-b seq 1", r.Node, b.BootID, b.Seq, r.Node)
			}
			for _, p := range b.Ports {
				if p.IntervalMs != 0 {
					t.Errorf("%s %s/%d: the first sample after a restart covers %d ms, want a baseline", r.Node, p.Device, p.Port, p.IntervalMs)
				}
			}
		}
	}
	if restarts != 2 {
		t.Fatalf("%d restarts, want 2", restarts)
	}
	if st := eng.Stats(); st.Restarts != 2 || st.Duplicates != 0 {
		t.Errorf("engine stats %+v: want 2 restarts and no duplicates", st)
	}
	for n, c := range boots {
		want := 1
		if restarted[n] {
			want = 2
		}
		if c != want {
			t.Errorf("node %s got %d boot ids, want %d", n, c, want)
		}
	}
}

// Paced, a reading leaves at the wall time its data time maps to.
func TestSourcePacing(t *testing.T) {
	cfg := sourceConfig(4)
	wall := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var waited time.Duration
	s, _ := newSource(t, cfg, WithSpeed(50), WithClock(
		func() time.Time { return wall },
		func(ctx context.Context, d time.Duration) error {
			waited += d
			wall = wall.Add(d)
			return ctx.Err()
		}))
	rs := readAll(t, s)
	span := rs[len(rs)-1].Time.Sub(rs[0].Time)
	if want := span / 50; waited < want-time.Millisecond || waited > want+time.Millisecond {
		t.Errorf("waited %s over %s of data time at 50x, want %s", waited, span, want)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s2, _ := newSource(t, cfg, WithSpeed(50))
	if _, err := s2.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Next on a cancelled context: %v", err)
	}
}

func TestSourceOptions(t *testing.T) {
	f, err := NewFleet(sourceConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []Option{WithSpeed(-1), WithClock(nil, nil)} {
		if _, err := NewSource(f, o); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("want ErrInvalidOption, got %v", err)
		}
	}
	if _, err := NewSource(nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("nil fleet: want ErrInvalidOption, got %v", err)
	}
}

// A fault injected while the source runs shows in the port's counters from
// the next round on.
func TestSourceInject(t *testing.T) {
	cfg := sourceConfig(4)
	s, _ := newSource(t, cfg)
	port := PortRef{Node: "gpu-002", Device: "mlx5_0", Port: 1}
	downs := func(r *collector.Reading) (uint64, bool) {
		for _, p := range r.Ports {
			if p.Device == port.Device && p.Port == port.Port {
				return p.Counters["link_downed"], true
			}
		}
		return 0, false
	}
	var before uint64
	for range 4 { // the first round
		r, err := s.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if r.Node == port.Node {
			before, _ = downs(r)
		}
	}
	f, err := ParseFault("link_flap@+10s:"+port.String(), s.FleetNow())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Inject(f); err != nil {
		t.Fatal(err)
	}
	past, _ := ParseFault("link_flap@+0s:"+port.String(), cfg.Start)
	if err := s.Inject(past); !errors.Is(err, ErrInvalidFault) {
		t.Errorf("a fault before the fleet's data time: want ErrInvalidFault, got %v", err)
	}
	var after uint64
	for _, r := range readAll(t, s) {
		if n, ok := downs(r); ok && r.Node == port.Node {
			after = n
		}
	}
	if after != before+1 {
		t.Errorf("link_downed %d -> %d, want one more after the injected flap", before, after)
	}
}
