package processor

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// t0 is the data time every test trace starts at.
var t0 = schemas.MillisOf(time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC))

func at(sec float64) schemas.Millis { return t0 + schemas.Millis(sec*1000) }

// harness drives detectors the way the runtime does: per-port order with
// stale samples dropped, port state observed after the detectors, and the
// watermark (max data time - 10 s) after every sample.
type harness struct {
	t      *testing.T
	dets   []Detector
	ports  map[schemas.PortID]*PortState
	topo   *schemas.Topology
	maxT   schemas.Millis
	events []*schemas.Event
}

func newHarness(t *testing.T, dets ...Detector) *harness {
	h := &harness{t: t, dets: dets, ports: map[schemas.PortID]*PortState{}}
	for _, d := range dets {
		if in, ok := d.(Initializer); ok {
			if err := in.Init(h); err != nil {
				t.Fatal(err)
			}
		}
	}
	return h
}

func (h *harness) Topology() *schemas.Topology { return h.topo }
func (h *harness) Watermark() schemas.Millis   { return h.maxT - 10_000 }
func (h *harness) Complete() bool              { return true }
func (h *harness) Port(id schemas.PortID) (*PortState, bool) {
	p, ok := h.ports[id]
	return p, ok
}
func (h *harness) Ports(fn func(*PortState) bool) {
	ids := make([]schemas.PortID, 0, len(h.ports))
	for id := range h.ports {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	for _, id := range ids {
		if !fn(h.ports[id]) {
			return
		}
	}
}

func (h *harness) Emit(ev *schemas.Event) {
	if err := ev.Validate(); err != nil {
		h.t.Errorf("invalid event: %v", err)
	}
	h.events = append(h.events, ev)
}

func (h *harness) feed(s *Sample) {
	ctx := context.Background()
	p, ok := h.ports[s.ID]
	if !ok {
		p = NewPortState(s.ID)
		h.ports[s.ID] = p
	}
	if p.Samples > 0 && s.Time <= p.LastTime {
		return
	}
	for _, d := range h.dets {
		if pd, ok := d.(PortDetector); ok {
			pd.OnSample(ctx, p, s, h)
		}
	}
	p.Observe(s)
	if s.Time > h.maxT {
		h.maxT = s.Time
		for _, d := range h.dets {
			if fd, ok := d.(FabricDetector); ok {
				fd.OnWatermark(ctx, h, h.Watermark(), h)
			}
		}
	}
}

func (h *harness) states() []string {
	out := make([]string, len(h.events))
	for i, ev := range h.events {
		out[i] = ev.State
	}
	return out
}

var portA = schemas.PortID{Node: "host-a", Device: "mlx5_0", Port: 1}

// sample builds a sample of portA at sec seconds with a 5 s interval (0 for
// a baseline, i.e. when every counter has FlagFirst).
func sample(id schemas.PortID, sec float64, state string, cs ...schemas.CounterDelta) *Sample {
	interval := int64(5000)
	baseline := len(cs) > 0
	for _, c := range cs {
		if c.Flags&schemas.FlagFirst == 0 {
			baseline = false
		}
	}
	if baseline {
		interval = 0
	}
	return &Sample{ID: id, Time: at(sec), PortSample: &schemas.PortSample{
		Device: id.Device, Port: id.Port, Netdev: "ens1f0np0", LinkLayer: "Ethernet",
		State: state, TimeMs: int64(at(sec)), IntervalMs: interval, Counters: cs,
	}}
}

func ctr(name string, value, delta uint64, flags schemas.Flag) schemas.CounterDelta {
	return schemas.CounterDelta{Name: name, Source: schemas.SourceCounters, Value: value, Delta: delta, Flags: flags}
}

func eth(name string, value, delta uint64, flags schemas.Flag) schemas.CounterDelta {
	return schemas.CounterDelta{Name: name, Source: schemas.SourceEthtool, Value: value, Delta: delta, Flags: flags}
}

// steady feeds samples of portA every 5 s in [from, to) with counters made
// by mk.
func (h *harness) steady(id schemas.PortID, from, to float64, state string, mk func(sec float64) []schemas.CounterDelta) {
	for sec := from; sec < to; sec += 5 {
		h.feed(sample(id, sec, state, mk(sec)...))
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var (
	portB = schemas.PortID{Node: "host-b", Device: "mlx5_0", Port: 1}
	portC = schemas.PortID{Node: "host-c", Device: "mlx5_1", Port: 1}
)

func hw(name string, value, delta uint64, flags schemas.Flag) schemas.CounterDelta {
	return schemas.CounterDelta{Name: name, Source: schemas.SourceHWCounters, Value: value, Delta: delta, Flags: flags}
}

// traffic is a 5 s sample's received packets and the named hw counters'
// deltas (values are the deltas: the detectors read deltas only).
func traffic(pkts uint64, kv ...any) []schemas.CounterDelta {
	cs := []schemas.CounterDelta{ctr("port_rcv_packets", pkts, pkts, 0), ctr("port_xmit_packets", pkts, pkts, 0)}
	for i := 0; i+1 < len(kv); i += 2 {
		name, d := kv[i].(string), uint64(kv[i+1].(int))
		if strings.HasPrefix(name, "rx_") {
			cs = append(cs, eth(name, d, d, 0))
		} else {
			cs = append(cs, hw(name, d, d, 0))
		}
	}
	return cs
}

const (
	first = schemas.FlagFirst
	reset = schemas.FlagReset
	held  = schemas.FlagHeld
	sat   = schemas.FlagSaturated
)

// quiet is a healthy sample's link counters at the given link_downed value.
func quiet(v uint64) []schemas.CounterDelta {
	return []schemas.CounterDelta{ctr("link_downed", v, 0, 0), eth("link_down_events_phy", v, 0, 0)}
}
