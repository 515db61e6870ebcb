package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestAddCounter(t *testing.T) {
	tests := []struct {
		name         string
		kind         schemas.Kind
		value, delta uint64
		want         uint64
	}{
		{"sat16 counts", schemas.Sat16, 10, 5, 15},
		{"sat16 pins at 65535", schemas.Sat16, 65530, 10, 65535},
		{"sat16 stays pinned", schemas.Sat16, 65535, 1, 65535},
		{"sat16 huge delta", schemas.Sat16, 1, 1 << 63, 65535},
		{"sat8 pins at 255", schemas.Sat8, 250, 6, 255},
		{"sat8 reaches 255 exactly", schemas.Sat8, 250, 5, 255},
		{"sat4 pins at 15", schemas.Sat4, 14, 3, 15},
		{"wrap32 counts", schemas.Wrap32, 1, 2, 3},
		{"wrap32 wraps", schemas.Wrap32, 1<<32 - 2, 5, 3},
		{"wrap32 wraps to 0", schemas.Wrap32, 1<<32 - 1, 1, 0},
		{"counter64 counts past 2^32", schemas.Counter64, 1<<32 - 1, 2, 1<<32 + 1},
		{"gauge does not move", schemas.Gauge, 10, 5, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := addCounter(tt.kind, tt.value, tt.delta); got != tt.want {
				t.Errorf("addCounter(%v, %d, %d) = %d, want %d", tt.kind, tt.value, tt.delta, got, tt.want)
			}
		})
	}
}

func TestPortStateSemantics(t *testing.T) {
	eth := newPortState(PortInfo{PortRef: PortRef{"n", "mlx5_0", 1}, LinkLayer: LinkLayerEthernet, RateGbps: 200})
	ib := newPortState(PortInfo{PortRef: PortRef{"n", "mlx5_1", 1}, LinkLayer: LinkLayerInfiniBand, RateGbps: 200})
	tests := []struct {
		name  string
		port  *PortState
		src   schemas.Source
		key   string
		start uint64
		add   uint64
		want  uint64
	}{
		{"symbol_error saturates", ib, schemas.SourceCounters, "symbol_error", 65000, 1000, 65535},
		{"link_error_recovery saturates", ib, schemas.SourceCounters, "link_error_recovery", 200, 100, 255},
		{"link_downed saturates", eth, schemas.SourceCounters, "link_downed", 254, 3, 255},
		{"local_link_integrity_errors saturates at 15", ib, schemas.SourceCounters, "local_link_integrity_errors", 0, 20, 15},
		{"excessive_buffer_overrun_errors saturates at 15", ib, schemas.SourceCounters, "excessive_buffer_overrun_errors", 14, 1, 15},
		{"port_xmit_discards saturates", eth, schemas.SourceCounters, "port_xmit_discards", 65535, 1, 65535},
		{"out_of_buffer wraps", eth, schemas.SourceHWCounters, "out_of_buffer", 1<<32 - 10, 20, 10},
		{"out_of_sequence wraps", eth, schemas.SourceHWCounters, "out_of_sequence", 1<<32 - 1, 1, 0},
		{"np_cnp_sent is 64-bit", eth, schemas.SourceHWCounters, "np_cnp_sent", 1<<32 - 1, 1, 1 << 32},
		{"port_xmit_data is 64-bit", ib, schemas.SourceCounters, "port_xmit_data", 1<<40 - 1, 1, 1 << 40},
		{"rx_bits_phy is 64-bit", eth, schemas.SourceEthtool, "rx_bits_phy", 1<<60 - 1, 1, 1 << 60},
		{"lifespan is a setting", eth, schemas.SourceHWCounters, "lifespan", 10, 5, 10},
		{"Set clamps to the width", ib, schemas.SourceCounters, "link_downed", 1000, 0, 255},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.port.Set(tt.src, tt.key, tt.start)
			tt.port.Add(tt.src, tt.key, tt.add)
			if got, ok := tt.port.Value(tt.src, tt.key); !ok || got != tt.want {
				t.Errorf("%s = %d (present %v), want %d", tt.key, got, ok, tt.want)
			}
		})
	}
	t.Run("Clear keeps settings", func(t *testing.T) {
		eth.Add(schemas.SourceCounters, "port_rcv_data", 77)
		eth.Clear()
		if v, _ := eth.Value(schemas.SourceCounters, "port_rcv_data"); v != 0 {
			t.Errorf("port_rcv_data after Clear = %d", v)
		}
		if v, _ := eth.Value(schemas.SourceHWCounters, "lifespan"); v != 10 {
			t.Errorf("lifespan after Clear = %d, want 10", v)
		}
	})
	t.Run("InfiniBand has no RoCE congestion counters", func(t *testing.T) {
		for _, k := range []string{"np_cnp_sent", "np_ecn_marked_roce_packets", "rp_cnp_handled"} {
			if ib.Has(schemas.SourceHWCounters, k) {
				t.Errorf("IB port has %s", k)
			}
		}
		if ib.Has(schemas.SourceEthtool, "rx_bits_phy") {
			t.Error("IB port has ethtool statistics")
		}
	})
}

// The model's data counters count 4-byte words and PHY bits run at the line
// rate: checked on a noiseless (history) window.
func TestModelUnits(t *testing.T) {
	tests := []struct {
		name      string
		layer     string
		rateGbps  int
		util      float64
		up        float64
		wantWords uint64
		wantBits  uint64
	}{
		{"200G Ethernet half busy", LinkLayerEthernet, 200, 0.5, 1, 200e9 / 8 * 0.5 / 4, 200e9},
		{"100G Ethernet down half the time", LinkLayerEthernet, 100, 0.5, 0.5, 100e9 / 8 * 0.5 * 0.5 / 4, 50e9},
		{"200G InfiniBand", LinkLayerInfiniBand, 200, 0.25, 1, 200e9 / 8 * 0.25 / 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPortState(PortInfo{PortRef: PortRef{"n", "mlx5_0", 1}, LinkLayer: tt.layer, RateGbps: tt.rateGbps})
			rng := rand.New(rand.NewPCG(1, 2))
			m := newPortModel(rng, 0.3, false)
			m.txUtil = tt.util
			now := time.Unix(1000, 0)
			tick := Tick{Prev: now.Add(-time.Second), Now: now, Port: p, Rand: rng, UpFraction: tt.up, UtilScale: 1, BERScale: 1, CNPScale: 1}
			m.advance(&tick, true)
			if got, _ := p.Value(schemas.SourceCounters, "port_xmit_data"); got != tt.wantWords {
				t.Errorf("port_xmit_data = %d words, want %d", got, tt.wantWords)
			}
			if got, _ := p.Value(schemas.SourceEthtool, "rx_bits_phy"); got != tt.wantBits {
				t.Errorf("rx_bits_phy = %d, want %d", got, tt.wantBits)
			}
		})
	}
}

func TestDeterminism(t *testing.T) {
	s, _ := ScenarioByName("example-fleet")
	gen := func(c Config) ([]byte, []byte) {
		var tr, lb bytes.Buffer
		if _, err := Generate(c, &tr, &lb); err != nil {
			t.Fatal(err)
		}
		return tr.Bytes(), lb.Bytes()
	}
	t1, l1 := gen(s.Config)
	t2, l2 := gen(s.Config)
	if !bytes.Equal(t1, t2) || !bytes.Equal(l1, l2) {
		t.Fatal("same config gave different output")
	}
	other := s.Config
	other.Seed++
	if t3, _ := gen(other); bytes.Equal(t1, t3) {
		t.Fatal("a different seed gave the same trace")
	}
}

// traceLine is a parsed trace line, read strictly as docs/formats.md describes it.
type traceLine struct {
	Kind       string            `json:"kind"`
	TS         string            `json:"ts"`
	Node       string            `json:"node"`
	Device     string            `json:"device"`
	Port       int               `json:"port"`
	Netdev     string            `json:"netdev"`
	LinkLayer  string            `json:"link_layer"`
	State      string            `json:"state"`
	Rate       string            `json:"rate"`
	Counters   map[string]uint64 `json:"counters"`
	HWCounters map[string]uint64 `json:"hw_counters"`
	Ethtool    map[string]uint64 `json:"ethtool"`
	Config     json.RawMessage   `json:"config"`
	raw        string
	time       time.Time
}

func (l *traceLine) ref() PortRef { return PortRef{l.Node, l.Device, l.Port} }

var tsFormat = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func parseTrace(t *testing.T, trace []byte) []traceLine {
	t.Helper()
	var out []traceLine
	for i, raw := range strings.Split(strings.TrimSuffix(string(trace), "\n"), "\n") {
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		var l traceLine
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, raw)
		}
		if !tsFormat.MatchString(l.TS) {
			t.Fatalf("line %d: ts %q is not RFC 3339 UTC with milliseconds", i+1, l.TS)
		}
		ts, err := time.Parse(time.RFC3339Nano, l.TS)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		l.raw, l.time = raw, ts
		if l.Node == "" {
			t.Fatalf("line %d: no node", i+1)
		}
		switch l.Kind {
		case KindCollectorRestart:
			if l.Device != "" || l.Counters != nil {
				t.Fatalf("line %d: restart line with port fields", i+1)
			}
		case KindSample:
			// A bond member's sample carries its PHY statistics alone.
			member := strings.Contains(l.Device, ".") && l.Ethtool != nil && l.Counters == nil && l.HWCounters == nil
			if l.Device == "" || l.Port < 1 || l.State == "" || l.Rate == "" || (l.Counters == nil || l.HWCounters == nil) && !member {
				t.Fatalf("line %d: sample lacks a field: %s", i+1, raw)
			}
			switch l.LinkLayer {
			case LinkLayerEthernet:
				if l.Netdev == "" || l.Ethtool == nil {
					t.Fatalf("line %d: RoCE sample without netdev or ethtool", i+1)
				}
			case LinkLayerInfiniBand:
				if l.Netdev != "" || l.Ethtool != nil {
					t.Fatalf("line %d: InfiniBand sample with netdev or ethtool", i+1)
				}
				for k := range l.HWCounters {
					if strings.HasPrefix(k, "np_") || strings.HasPrefix(k, "rp_") {
						t.Fatalf("line %d: InfiniBand sample with %s", i+1, k)
					}
				}
			default:
				t.Fatalf("line %d: link_layer %q", i+1, l.LinkLayer)
			}
		default:
			t.Fatalf("line %d: kind %q", i+1, l.Kind)
		}
		out = append(out, l)
	}
	return out
}

// The label's field order is the one of docs/formats.md's examples (the trace
// lines' is pinned in schemas/trace).
func TestLabelFieldOrder(t *testing.T) {
	l := Label{Type: schemas.TypeLinkFlap, Start: 1773446406000, Subject: schemas.Subject{Node: "a", Device: "mlx5_0", Port: 1}}
	b, _ := json.Marshal(l)
	if got, want := string(b), `{"type":"link_flap","start":"2026-03-14T00:00:06.000Z","end":null,"subject":{"node":"a","device":"mlx5_0","port":1}}`; got != want {
		t.Errorf("label:\n got %s\nwant %s", got, want)
	}
}

func generate(t *testing.T, c Config) ([]traceLine, []Label, *Summary) {
	t.Helper()
	var tr, lb bytes.Buffer
	sum, err := Generate(c, &tr, &lb)
	if err != nil {
		t.Fatal(err)
	}
	var labels []Label
	dec := json.NewDecoder(&lb)
	for dec.More() {
		var l Label
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		labels = append(labels, l)
	}
	return parseTrace(t, tr.Bytes()), labels, sum
}

// Each port's lines are in time order; lines of different ports are at most
// one interval out of order.
func TestOrder(t *testing.T) {
	for _, s := range Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			lines, _, _ := generate(t, s.Config)
			last := map[PortRef]time.Time{}
			var latest time.Time
			for i, l := range lines {
				if l.Kind != KindSample {
					continue
				}
				if prev, ok := last[l.ref()]; ok && l.time.Before(prev) {
					t.Fatalf("line %d: %s goes back in time from %s to %s", i+1, l.ref(), prev, l.time)
				}
				last[l.ref()] = l.time
				if latest.Sub(l.time) > s.Config.Interval {
					t.Fatalf("line %d: %s is %v behind the latest line", i+1, l.TS, latest.Sub(l.time))
				}
				if l.time.After(latest) {
					latest = l.time
				}
			}
		})
	}
}

// byPort groups the sample lines of each port, duplicates dropped.
func byPort(lines []traceLine) map[PortRef][]traceLine {
	out := map[PortRef][]traceLine{}
	for _, l := range lines {
		if l.Kind != KindSample {
			continue
		}
		ls := out[l.ref()]
		if len(ls) > 0 && ls[len(ls)-1].raw == l.raw {
			continue
		}
		out[l.ref()] = append(ls, l)
	}
	return out
}

func TestLinkFlapLabel(t *testing.T) {
	c := DefaultConfig()
	c.Hosts, c.IBHosts = 4, 2
	at := c.Start.Add(2*time.Minute + 1234*time.Millisecond)
	for _, ref := range []PortRef{{"gpu-001", "mlx5_1", 1}, {"gpu-004", "mlx5_0", 1}} {
		t.Run(ref.String(), func(t *testing.T) {
			c.Faults = []Fault{LinkFlap{Port: ref, At: at, Down: 2 * time.Second}}
			lines, labels, _ := generate(t, c)
			if len(labels) != 1 {
				t.Fatalf("labels = %+v, want one", labels)
			}
			l := labels[0]
			if l.Type != schemas.TypeLinkFlap || l.Start.Time() != at || l.End == nil || l.End.Time() != at.Add(2*time.Second) || l.Subject != portSubject(ref) {
				t.Fatalf("label = %+v", l)
			}
			for port, ls := range byPort(lines) {
				var downs, phyDowns int
				for i := 1; i < len(ls); i++ {
					if ls[i].Counters["link_downed"] != ls[i-1].Counters["link_downed"] {
						downs++
						if port != ref || !ls[i].time.After(at) || ls[i-1].time.After(at) {
							t.Errorf("%s: link_downed moved between %s and %s", port, ls[i-1].TS, ls[i].TS)
						}
						if ls[i].Counters["link_downed"] != ls[i-1].Counters["link_downed"]+1 {
							t.Errorf("link_downed jumped by more than one")
						}
					}
					if ls[i].Ethtool["link_down_events_phy"] != ls[i-1].Ethtool["link_down_events_phy"] {
						phyDowns++
					}
				}
				wantPhy := 0
				if port == ref && ls[0].LinkLayer == LinkLayerEthernet {
					wantPhy = 1
				}
				if port == ref && downs != 1 || port != ref && downs != 0 || phyDowns != wantPhy {
					t.Errorf("%s: link_downed moved %d times, link_down_events_phy %d times", port, downs, phyDowns)
				}
			}
		})
	}
}

func TestCounterSaturatedLabel(t *testing.T) {
	base := DefaultConfig()
	base.Hosts, base.IBHosts = 4, 2
	ib := PortRef{"gpu-004", "mlx5_1", 1}
	eth := PortRef{"gpu-002", "mlx5_0", 1}
	tests := []struct {
		name      string
		fault     CounterSaturated
		wantLabel int
		wantEnd   bool
	}{
		{"climbs and pins", CounterSaturated{Port: eth, Counter: "symbol_error", From: base.Start.Add(time.Minute), Initial: 65300, PerSecond: 2}, 1, false},
		{"pinned from the start", CounterSaturated{Port: ib, Counter: "symbol_error"}, 1, false},
		{"cleared after repair", CounterSaturated{Port: ib, Counter: "link_error_recovery", From: base.Start.Add(time.Minute), Initial: 240, PerSecond: 0.5, ClearAt: base.Start.Add(7 * time.Minute)}, 1, true},
		{"never reaches the top", CounterSaturated{Port: ib, Counter: "port_rcv_errors", From: base.Start.Add(time.Minute), Initial: 100, PerSecond: 0.1}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			c.Faults = []Fault{tt.fault}
			lines, labels, _ := generate(t, c)
			if len(labels) != tt.wantLabel {
				t.Fatalf("labels = %+v, want %d", labels, tt.wantLabel)
			}
			max := schemas.KindOf(schemas.SourceCounters, tt.fault.Counter).Max()
			ls := byPort(lines)[tt.fault.Port]
			var firstMax, firstBelow time.Time
			for _, l := range ls {
				v := l.Counters[tt.fault.Counter]
				if v == max && firstMax.IsZero() {
					firstMax = l.time
				}
				if v < max && !firstMax.IsZero() && firstBelow.IsZero() {
					firstBelow = l.time
				}
			}
			if tt.wantLabel == 0 {
				if !firstMax.IsZero() {
					t.Fatalf("counter reached %d without a label", max)
				}
				return
			}
			l := labels[0]
			if l.Type != schemas.TypeCounterSaturated || l.Subject != portSubject(tt.fault.Port) || l.Start.Time() != firstMax {
				t.Fatalf("label %+v, first reading at max %s", l, firstMax)
			}
			if tt.fault.From.IsZero() && firstMax != ls[0].time {
				t.Fatalf("pinned from the start, but first at max at %s", firstMax)
			}
			if (l.End != nil) != tt.wantEnd || tt.wantEnd && l.End.Time() != firstBelow {
				t.Fatalf("label end %v, first reading below max %s", l.End, firstBelow)
			}
		})
	}
}

func TestHealthyNoisy(t *testing.T) {
	s, _ := ScenarioByName("healthy-noisy")
	lines, labels, sum := generate(t, s.Config)
	if len(labels) != 0 {
		t.Fatalf("labels = %+v", labels)
	}
	var restarts, dups, glitches, resets, wraps int
	for i, l := range lines {
		switch {
		case l.Kind == KindCollectorRestart:
			restarts++
		case i > 0 && l.raw == lines[i-1].raw:
			dups++
		}
	}
	ports := byPort(lines)
	for port, ls := range ports {
		for i, l := range ls {
			if n := len(l.Counters) + len(l.HWCounters) + len(l.Ethtool); n < len(ls[0].Counters)+len(ls[0].HWCounters)+len(ls[0].Ethtool) {
				glitches++
			}
			for k, v := range l.Counters {
				if kind := schemas.KindOf(schemas.SourceCounters, k); kind.Saturating() && v == kind.Max() {
					t.Errorf("%s %s: %s at its maximum in a healthy trace", port, l.TS, k)
				}
			}
			// A glitch drops a key: compare only what both readings have.
			fell := func(m func(traceLine) map[string]uint64, key string) bool {
				v, ok1 := m(l)[key]
				pv, ok2 := m(ls[i-1])[key]
				return ok1 && ok2 && v < pv/2
			}
			counters := func(l traceLine) map[string]uint64 { return l.Counters }
			hw := func(l traceLine) map[string]uint64 { return l.HWCounters }
			if i > 0 {
				reset := fell(counters, "port_xmit_data")
				if reset {
					resets++
				}
				for _, k := range []string{"out_of_buffer", "out_of_sequence", "duplicate_request", "packet_seq_err"} {
					if !reset && fell(hw, k) {
						wraps++
					}
				}
			}
			if i > 0 && l.Counters["link_downed"] > ls[i-1].Counters["link_downed"] {
				t.Errorf("%s %s: link_downed moved in a healthy trace", port, l.TS)
			}
		}
		if len(ls) < sum.Ticks-s.Config.Noise.GapIntervals*(s.Config.Noise.PortGaps+s.Config.Noise.NodeGaps) {
			t.Errorf("%s has %d readings of %d", port, len(ls), sum.Ticks)
		}
	}
	want := s.Config.Noise
	if restarts != want.CollectorRestarts || dups != want.Duplicates || glitches != want.Glitches || resets != want.Resets || sum.Missing == 0 || wraps == 0 {
		t.Errorf("restarts %d dups %d glitches %d resets %d missing %d wraps %d, want %+v", restarts, dups, glitches, resets, sum.Missing, wraps, want)
	}
	if sum.Samples != len(lines)-restarts || sum.CollectorRestarts != restarts || sum.Duplicates != dups || sum.Glitches != glitches || sum.Resets != resets {
		t.Errorf("summary %+v disagrees with the trace", sum)
	}
}

// Background error rates stay low: pre-FEC BER 1e-9..1e-8 of the PHY bits.
func TestBackgroundRates(t *testing.T) {
	c := DefaultConfig()
	c.Noise.IdleFraction = 0
	lines, _, _ := generate(t, c)
	for port, ls := range byPort(lines) {
		first, last := ls[0], ls[len(ls)-1]
		bits := last.Ethtool["rx_bits_phy"] - first.Ethtool["rx_bits_phy"]
		ber := float64(last.Ethtool["rx_corrected_bits_phy"]-first.Ethtool["rx_corrected_bits_phy"]) / float64(bits)
		if ber < 0.8e-9 || ber > 1.2e-8 {
			t.Errorf("%s: pre-FEC BER %.2g", port, ber)
		}
		if d := last.Counters["symbol_error"] - first.Counters["symbol_error"]; d > 2 {
			t.Errorf("%s: %d symbol errors in %v", port, d, c.Duration)
		}
		gbps := float64(last.Counters["port_xmit_data"]-first.Counters["port_xmit_data"]) * 4 * 8 / last.time.Sub(first.time).Seconds() / 1e9
		if gbps <= 1 || gbps > 200 {
			t.Errorf("%s: transmits %.1f Gb/s", port, gbps)
		}
	}
}

func TestValidate(t *testing.T) {
	d := DefaultConfig()
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"no hosts", func(c *Config) { c.Hosts = 0 }},
		{"interval too short", func(c *Config) { c.Interval = 500 * time.Millisecond }},
		{"interval too long", func(c *Config) { c.Interval = 11 * time.Second }},
		{"duration below interval", func(c *Config) { c.Duration = time.Second }},
		{"unknown rate", func(c *Config) { c.RatesGbps = []int{123} }},
		{"too much jitter", func(c *Config) { c.Noise.JitterFraction = 0.9 }},
		{"gaps without length", func(c *Config) { c.Noise.PortGaps, c.Noise.GapIntervals = 1, 0 }},
		{"more IB hosts than hosts", func(c *Config) { c.IBHosts = 17 }},
		{"flap on unknown port", func(c *Config) { c.Faults = []Fault{LinkFlap{Port: PortRef{"nope", "mlx5_0", 1}, At: d.Start}} }},
		{"flap after the end", func(c *Config) {
			c.Faults = []Fault{LinkFlap{Port: PortRef{"gpu-001", "mlx5_0", 1}, At: d.Start.Add(time.Hour)}}
		}},
		{"saturating a wrapping counter", func(c *Config) {
			c.Faults = []Fault{CounterSaturated{Port: PortRef{"gpu-001", "mlx5_0", 1}, Counter: "port_xmit_data"}}
		}},
		{"nil fault", func(c *Config) { c.Faults = []Fault{nil} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Validate() = %v, want ErrInvalidConfig", err)
			}
			if _, err := Generate(c, &bytes.Buffer{}, nil); err == nil {
				t.Error("Generate accepted the config")
			}
		})
	}
	if err := d.Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
	for _, s := range Scenarios() {
		if err := s.Config.Validate(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
}

func TestTopology(t *testing.T) {
	s, _ := ScenarioByName("example-fleet")
	topo, err := Topology(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := topo.Write(&buf); err != nil {
		t.Fatal(err)
	}
	var back TopologyFile
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("topology is not JSON: %v", err)
	}
	tiers := map[string]string{}
	for _, sw := range back.Switches {
		tiers[sw.Name] = sw.Tier
	}
	hostLinks := map[string]bool{}
	for _, l := range back.Links {
		a, b := strings.Split(l.A, "/"), strings.Split(l.B, "/")
		if len(b) != 2 || tiers[b[0]] == "" {
			t.Errorf("link %+v: far end is not a switch port", l)
		}
		if len(a) == 3 {
			hostLinks[l.A] = true
		}
	}
	lines, _, _ := generate(t, s.Config)
	for port := range byPort(lines) {
		if !hostLinks[port.String()] {
			t.Errorf("%s is not cabled in the topology", port)
		}
	}
	if len(hostLinks) != s.Config.Hosts*s.Config.DevicesPerHost*s.Config.PortsPerDevice {
		t.Errorf("%d host links", len(hostLinks))
	}
}

// A 100k-sample trace is generated in well under a few seconds: see
// BenchmarkGenerate for the figure.
func BenchmarkGenerate(b *testing.B) {
	c := DefaultConfig()
	c.Hosts, c.DevicesPerHost = 100, 2
	c.Interval = time.Second
	c.Duration = 500 * time.Second // 100 hosts * 2 ports * 500 ticks = 100k samples
	c.Noise = Noise{JitterFraction: 0.2, IdleFraction: 0.05, Resets: 3, CollectorRestarts: 3, PortGaps: 3, NodeGaps: 3, GapIntervals: 5, Duplicates: 10, Glitches: 10}
	for b.Loop() {
		var n countingWriter
		sum, err := Generate(c, &n, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(sum.Samples), "samples/op")
		b.ReportMetric(float64(n)/1e6, "MB/op")
	}
}

type countingWriter int

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}

func ExampleGenerate() {
	c := DefaultConfig()
	c.Hosts, c.DevicesPerHost, c.Duration = 1, 1, 10*time.Second
	var trace bytes.Buffer
	sum, _ := Generate(c, &trace, nil)
	fmt.Println(sum.Samples, "samples,", strings.Count(trace.String(), "\n"), "lines")
	// Output: 2 samples, 2 lines
}
