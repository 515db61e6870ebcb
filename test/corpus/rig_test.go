package corpus

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// rig drives detectors with the delta engine's batches the way the
// processor's runtime does (processor/internal/detecttest is the model): per
// port in data-time order with stale samples dropped, the port observed
// after the detectors ran, and the watermark (newest data time - 10 s)
// ticking the fabric detectors after every newer sample. No topology.
type rig struct {
	t      *testing.T
	dets   []processor.Detector
	ports  map[schemas.PortID]*processor.PortState
	maxT   schemas.Millis
	events []*schemas.Event
	engine *collector.Engine
}

func newRig(t *testing.T, dets ...processor.Detector) *rig {
	t.Helper()
	r := &rig{t: t, dets: dets, ports: map[schemas.PortID]*processor.PortState{}, engine: collector.NewEngine(nil)}
	for _, d := range dets {
		if in, ok := d.(processor.Initializer); ok {
			if err := in.Init(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	return r
}

func (r *rig) Topology() *schemas.Topology { return nil }
func (r *rig) Watermark() schemas.Millis   { return r.maxT - 10_000 }
func (r *rig) Complete() bool              { return true }
func (r *rig) Port(id schemas.PortID) (*processor.PortState, bool) {
	p, ok := r.ports[id]
	return p, ok
}
func (r *rig) Ports(fn func(*processor.PortState) bool) {
	ids := make([]schemas.PortID, 0, len(r.ports))
	for id := range r.ports {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	for _, id := range ids {
		if !fn(r.ports[id]) {
			return
		}
	}
}

func (r *rig) Emit(ev *schemas.Event) {
	if err := ev.Validate(); err != nil {
		r.t.Errorf("invalid event: %v", err)
	}
	r.events = append(r.events, ev)
}

// read applies one reading to the rig's delta engine and feeds every port
// sample of the batch to the detectors; it returns the batch.
func (r *rig) read(prs ...collector.PortReading) *schemas.CounterBatch {
	r.t.Helper()
	if len(prs) == 0 {
		r.t.Fatal("no port reading")
	}
	b := r.engine.Apply(&collector.Reading{Node: "corpus", Time: prs[0].Time, Ports: prs})
	if b == nil {
		r.t.Fatal("the engine gave no batch")
	}
	ctx := context.Background()
	for i := range b.Ports {
		ps := &b.Ports[i]
		s := &processor.Sample{ID: schemas.PortID{Node: b.Node, Device: ps.Device, Port: ps.Port}, Time: schemas.Millis(ps.TimeMs), PortSample: ps}
		p, ok := r.ports[s.ID]
		if !ok {
			p = processor.NewPortState(s.ID)
			r.ports[s.ID] = p
		}
		if p.Samples > 0 && s.Time <= p.LastTime {
			continue
		}
		for _, d := range r.dets {
			if pd, ok := d.(processor.PortDetector); ok {
				pd.OnSample(ctx, p, s, r)
			}
		}
		p.Observe(s)
		if s.Time > r.maxT {
			r.maxT = s.Time
			for _, d := range r.dets {
				if fd, ok := d.(processor.FabricDetector); ok {
					fd.OnWatermark(ctx, r, r.Watermark(), r)
				}
			}
		}
	}
	return b
}

// ofState returns the events in the given state.
func (r *rig) ofState(state string) []*schemas.Event {
	var out []*schemas.Event
	for _, ev := range r.events {
		if ev.State == state {
			out = append(out, ev)
		}
	}
	return out
}

// logEvents writes the events to the test log (shown on failure).
func (r *rig) logEvents() {
	for _, ev := range r.events {
		r.t.Logf("%s %s %s at %s: %s %v", ev.Type, ev.State, ev.Severity, ev.DetectedAt, ev.Summary, ev.Evidence)
	}
}

// ethtoolReading is one reading of an ethtool capture's single netdev as
// a RoCE port of the given rate (the rate is sysfs's, not in the capture),
// its statistics given.
func ethtoolReading(device, netdev, rate string, at time.Time, stats map[string]uint64) collector.PortReading {
	return collector.PortReading{Device: device, Port: 1, Netdev: netdev, LinkLayer: "Ethernet", State: "ACTIVE", Rate: rate, Time: at, Ethtool: stats}
}

// onlyStats returns the statistics of an ethtool capture holding one
// netdev's dump.
func onlyStats(t *testing.T, file string) map[string]uint64 {
	t.Helper()
	c := load(t, fixtureByFile(t, file))
	if len(c.dumps) != 1 || len(c.dumps[0].stats) != 1 {
		t.Fatalf("%s: %d dumps, want one dump of one netdev", file, len(c.dumps))
	}
	for _, s := range c.dumps[0].stats {
		return s
	}
	return nil
}

func cloneMap(m map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
