// Package detecttest drives detectors in tests the way the processor's
// runtime does, with samples built in a few words. Only tests import it:
// no binary links it (go list -deps ./cmd/rdmawatch shows it absent).
package detecttest

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// T0 is the data time every test trace starts at.
var T0 = schemas.MillisOf(time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC))

// At is the data time sec seconds after T0.
func At(sec float64) schemas.Millis { return T0 + schemas.Millis(sec*1000) }

// The test ports.
var (
	PortA = schemas.PortID{Node: "host-a", Device: "mlx5_0", Port: 1}
	PortB = schemas.PortID{Node: "host-b", Device: "mlx5_0", Port: 1}
	PortC = schemas.PortID{Node: "host-c", Device: "mlx5_1", Port: 1}
)

// The counter flags, short.
const (
	First = schemas.FlagFirst
	Reset = schemas.FlagReset
	Held  = schemas.FlagHeld
	Sat   = schemas.FlagSaturated
)

// Harness drives detectors the way the runtime does: per-port order with
// stale samples dropped, port state observed after the detectors, and the
// watermark (max data time - 10 s) after every sample. It is their
// FabricView and their Emitter.
type Harness struct {
	T          *testing.T
	Dets       []processor.Detector
	PortStates map[schemas.PortID]*processor.PortState
	Topo       *schemas.Topology
	MaxT       schemas.Millis
	Events     []*schemas.Event
}

// NewHarness initialises dets (Initializer) with the harness as their
// fabric.
func NewHarness(t *testing.T, dets ...processor.Detector) *Harness {
	h := &Harness{T: t, Dets: dets, PortStates: map[schemas.PortID]*processor.PortState{}}
	for _, d := range dets {
		if in, ok := d.(processor.Initializer); ok {
			if err := in.Init(h); err != nil {
				t.Fatal(err)
			}
		}
	}
	return h
}

// Topology implements processor.FabricView.
func (h *Harness) Topology() *schemas.Topology { return h.Topo }

// Watermark implements processor.FabricView.
func (h *Harness) Watermark() schemas.Millis { return h.MaxT - 10_000 }

// Complete implements processor.FabricView.
func (h *Harness) Complete() bool { return true }

// Port implements processor.FabricView.
func (h *Harness) Port(id schemas.PortID) (*processor.PortState, bool) {
	p, ok := h.PortStates[id]
	return p, ok
}

// Ports implements processor.FabricView.
func (h *Harness) Ports(fn func(*processor.PortState) bool) {
	ids := make([]schemas.PortID, 0, len(h.PortStates))
	for id := range h.PortStates {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	for _, id := range ids {
		if !fn(h.PortStates[id]) {
			return
		}
	}
}

// Emit implements processor.Emitter: it validates and keeps the event.
func (h *Harness) Emit(ev *schemas.Event) {
	if err := ev.Validate(); err != nil {
		h.T.Errorf("invalid event: %v", err)
	}
	h.Events = append(h.Events, ev)
}

// Feed delivers one sample to the detectors, then the watermark if the
// sample moved it.
func (h *Harness) Feed(s *processor.Sample) {
	ctx := context.Background()
	p, ok := h.PortStates[s.ID]
	if !ok {
		p = processor.NewPortState(s.ID)
		h.PortStates[s.ID] = p
	}
	if p.Samples > 0 && s.Time <= p.LastTime {
		return
	}
	for _, d := range h.Dets {
		if pd, ok := d.(processor.PortDetector); ok {
			pd.OnSample(ctx, p, s, h)
		}
	}
	p.Observe(s)
	if s.Time > h.MaxT {
		h.MaxT = s.Time
		for _, d := range h.Dets {
			if fd, ok := d.(processor.FabricDetector); ok {
				fd.OnWatermark(ctx, h, h.Watermark(), h)
			}
		}
	}
}

// States are the states of the events so far, in order.
func (h *Harness) States() []string {
	out := make([]string, len(h.Events))
	for i, ev := range h.Events {
		out[i] = ev.State
	}
	return out
}

// Steady feeds samples of id every 5 s in [from, to) with counters made
// by mk.
func (h *Harness) Steady(id schemas.PortID, from, to float64, state string, mk func(sec float64) []schemas.CounterDelta) {
	for sec := from; sec < to; sec += 5 {
		h.Feed(Sample(id, sec, state, mk(sec)...))
	}
}

// Sample builds a sample of id at sec seconds with a 5 s interval (0 for
// a baseline, i.e. when every counter has FlagFirst).
func Sample(id schemas.PortID, sec float64, state string, cs ...schemas.CounterDelta) *processor.Sample {
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
	return &processor.Sample{ID: id, Time: At(sec), PortSample: &schemas.PortSample{
		Device: id.Device, Port: id.Port, Netdev: "ens1f0np0", LinkLayer: "Ethernet",
		State: state, TimeMs: int64(At(sec)), IntervalMs: interval, Counters: cs,
	}}
}

// Ctr is an IB port counter (source counters).
func Ctr(name string, value, delta uint64, flags schemas.Flag) schemas.CounterDelta {
	return schemas.CounterDelta{Name: name, Source: schemas.SourceCounters, Value: value, Delta: delta, Flags: flags}
}

// Eth is an ethtool counter.
func Eth(name string, value, delta uint64, flags schemas.Flag) schemas.CounterDelta {
	return schemas.CounterDelta{Name: name, Source: schemas.SourceEthtool, Value: value, Delta: delta, Flags: flags}
}

// HW is an RDMA hw_counters counter.
func HW(name string, value, delta uint64, flags schemas.Flag) schemas.CounterDelta {
	return schemas.CounterDelta{Name: name, Source: schemas.SourceHWCounters, Value: value, Delta: delta, Flags: flags}
}

// Traffic is a 5 s sample's received packets and the named hw counters'
// deltas (values are the deltas: the detectors read deltas only).
func Traffic(pkts uint64, kv ...any) []schemas.CounterDelta {
	cs := []schemas.CounterDelta{Ctr("port_rcv_packets", pkts, pkts, 0), Ctr("port_xmit_packets", pkts, pkts, 0)}
	for i := 0; i+1 < len(kv); i += 2 {
		name, d := kv[i].(string), uint64(kv[i+1].(int))
		if strings.HasPrefix(name, "rx_") {
			cs = append(cs, Eth(name, d, d, 0))
		} else {
			cs = append(cs, HW(name, d, d, 0))
		}
	}
	return cs
}

// Quiet is a healthy sample's link counters at the given link_downed value.
func Quiet(v uint64) []schemas.CounterDelta {
	return []schemas.CounterDelta{Ctr("link_downed", v, 0, 0), Eth("link_down_events_phy", v, 0, 0)}
}

// EqualStrings reports whether a and b hold the same strings in order.
func EqualStrings(a, b []string) bool {
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
