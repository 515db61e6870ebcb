package cnp

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/internal/detecttest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// fleet is a small RoCE fabric in which CNPs balance: every CNP a
// notification point sends reaches a reaction point (spread evenly over the
// ports) unless loss says it is lost. The collector side is modelled too:
// baselines, resets, held glitches and silences produce the flags and deltas
// the delta engine would.
type fleet struct {
	n        int
	interval float64 // seconds between readings
	// marked is a port's ECN-marked packets per second; npRatio the share it
	// answers with CNPs; ignoring says its RP ignores the CNPs it receives;
	// loss is the fabric's lost share of CNPs.
	marked   func(i int, sec float64) float64
	npRatio  func(i int, sec float64) float64
	ignoring func(i int, sec float64) bool
	loss     func(sec float64) float64
	// noise returns "", "silent", "baseline", "reset" or "held" for a
	// reading.
	noise func(i int, sec float64) string
	// poisson, if set, draws the CNPs each port receives in an interval
	// around their mean, as a Poisson count would vary.
	poisson *rand.Rand
}

func (f *fleet) ids() []schemas.PortID {
	ids := make([]schemas.PortID, f.n)
	for i := range ids {
		ids[i] = schemas.PortID{Node: fmt.Sprintf("gpu-%03d", i+1), Device: "mlx5_0", Port: 1}
	}
	return ids
}

// run feeds [0, dur) seconds of readings into h.
func (f *fleet) run(h *detecttest.Harness, dur float64) {
	ids := f.ids()
	cur := make([][counters]float64, f.n)
	base := make([][counters]uint64, f.n)
	last := make([]float64, f.n)
	seen := make([]bool, f.n)
	for sec := 0.0; sec < dur; sec += f.interval {
		// Counters advance for everyone, reported or not.
		if sec > 0 {
			var sent float64
			for i := 0; i < f.n; i++ {
				m := f.marked(i, sec) * f.interval
				s := m * f.npRatio(i, sec)
				cur[i][npMarked] += m
				cur[i][npSent] += s
				sent += s
			}
			mean := sent * (1 - f.loss(sec)) / float64(f.n)
			for i := 0; i < f.n; i++ {
				delivered := mean
				if f.poisson != nil {
					delivered = max(0, mean+math.Sqrt(mean)*f.poisson.NormFloat64())
				}
				if f.ignoring(i, sec) {
					cur[i][rpIgnored] += delivered
				} else {
					cur[i][rpHandled] += delivered
				}
			}
		}
		for i := 0; i < f.n; i++ {
			ts := sec + 0.37*float64(i) // readings of different ports interleave
			kind := ""
			if f.noise != nil {
				kind = f.noise(i, sec)
			}
			if !seen[i] {
				kind = "baseline"
			}
			if kind == "silent" {
				continue
			}
			cs := make([]schemas.CounterDelta, 0, counters+1)
			cs = append(cs, schemas.CounterDelta{Name: "out_of_buffer", Source: schemas.SourceHWCounters})
			interval := int64(math.Round((ts - last[i]) * 1000))
			for k := 0; k < counters; k++ {
				v := uint64(cur[i][k])
				c := schemas.CounterDelta{Name: counterNames[k], Source: schemas.SourceHWCounters, Value: v & 0xffffffff}
				switch kind {
				case "baseline":
					c.Flags = schemas.FlagFirst
					base[i][k] = v
				case "reset":
					// Cleared at some point of the interval: what counted
					// since then is the delta.
					cur[i][k] = float64(v - base[i][k])
					c.Value, c.Delta, c.Flags = v-base[i][k], v-base[i][k], schemas.FlagReset
					base[i][k] = v - base[i][k]
				case "held":
					if k == rpHandled {
						c.Value, c.Flags = 0, schemas.FlagHeld
						break
					}
					fallthrough
				default:
					c.Delta = v - base[i][k]
					if v < 1<<32 && v&0xffffffff < base[i][k]&0xffffffff {
						c.Flags = schemas.FlagWrapped
					}
					base[i][k] = v
				}
				cs = append(cs, c)
			}
			if kind == "baseline" {
				interval = 0
			}
			seen[i] = true
			last[i] = ts
			h.Feed(&processor.Sample{ID: ids[i], Time: detecttest.At(ts), PortSample: &schemas.PortSample{
				Device: ids[i].Device, Port: 1, Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE",
				TimeMs: int64(detecttest.At(ts)), IntervalMs: interval, Counters: cs,
			}})
		}
	}
}

// healthyFleet is eight ports under normal congestion: marks on most ports,
// CNPs in proportion, one idle port, one with a trickle of marks.
func healthyFleet() *fleet {
	return &fleet{
		n: 8, interval: 5,
		marked: func(i int, sec float64) float64 {
			switch i {
			case 6:
				return 0 // idle
			case 7:
				return 0.5 // a trickle
			}
			return 100 + 60*float64(i) + 50*math.Sin(sec/97+float64(i))
		},
		npRatio: func(i int, sec float64) float64 {
			if i == 7 {
				return 0 // a trickle with no CNPs proves nothing
			}
			return 0.2 + 0.05*float64(i%3)
		},
		ignoring: func(int, float64) bool { return false },
		loss:     func(float64) float64 { return 0 },
	}
}

// dropLoadSilent changes f to 16 ports read every second whose ECN marks
// (and CNPs) drop twentyfold from 500 s to 560 s, with port 3 silent over
// [silentFrom, silentTo) and loss of the CNPs from lossFrom on (none if 0).
func dropLoadSilent(f *fleet, silentFrom, silentTo, lossFrom, loss float64) {
	f.n, f.interval = 16, 1
	marked := f.marked
	f.marked = func(i int, sec float64) float64 {
		load := 1 - 0.95*min(1, max(0, (sec-500)/60))
		return marked(i, sec) * load
	}
	f.loss = func(sec float64) float64 {
		if lossFrom > 0 && sec > lossFrom {
			return loss
		}
		return 0
	}
	f.noise = func(i int, sec float64) string {
		if i == 3 && sec >= silentFrom && sec < silentTo {
			return "silent"
		}
		return ""
	}
}

type incident struct {
	id      string
	subject schemas.Subject
	scope   string
	states  []string
	first   *schemas.Event
	last    *schemas.Event
}

func incidents(t *testing.T, evs []*schemas.Event) []*incident {
	t.Helper()
	byID := map[string]*incident{}
	var out []*incident
	for _, ev := range evs {
		if ev.Type != schemas.TypeCNPECNImbalance {
			t.Errorf("event type %s", ev.Type)
		}
		for k, v := range ev.Evidence {
			if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
				t.Errorf("evidence %s = %v", k, f)
			}
		}
		in, ok := byID[ev.ID]
		if !ok {
			in = &incident{id: ev.ID, subject: ev.Subject, scope: ev.Scope, first: ev}
			byID[ev.ID] = in
			out = append(out, in)
		}
		in.states = append(in.states, ev.State)
		in.last = ev
	}
	// One fault, one incident: open once, then updates, resolved at most
	// once and last.
	for _, in := range out {
		if in.states[0] != schemas.StateOpen {
			t.Errorf("%s starts with %s", in.id, in.states[0])
		}
		for j, s := range in.states[1:] {
			if s == schemas.StateOpen || (s == schemas.StateResolved && j != len(in.states)-2) {
				t.Errorf("%s lifecycle %v", in.id, in.states)
			}
		}
	}
	return out
}

func TestCNPECNImbalance(t *testing.T) {
	gpu1 := schemas.Subject{Node: "gpu-001", Device: "mlx5_0", Port: 1}
	gpu3 := schemas.Subject{Node: "gpu-003", Device: "mlx5_0", Port: 1}
	fabric := schemas.Subject{}
	type want struct {
		subject  schemas.Subject
		onset    float64 // seconds: when the fault started
		resolved bool
		key      string
	}
	cases := []struct {
		name   string
		dur    float64
		modify func(f *fleet)
		want   []want
	}{
		{name: "normal congestion with proportional CNPs, idle and trickle ports", dur: 1200},
		{
			name: "notification point disabled", dur: 900,
			modify: func(f *fleet) {
				ratio := f.npRatio
				f.npRatio = func(i int, sec float64) float64 {
					if i == 0 && sec > 300 && sec <= 600 {
						return 0
					}
					return ratio(i, sec)
				}
			},
			want: []want{{subject: gpu1, onset: 300, resolved: true, key: "np_disabled"}},
		},
		{
			name: "notification point disabled on a 1 s interval", dur: 600,
			modify: func(f *fleet) {
				f.interval = 1
				ratio := f.npRatio
				f.npRatio = func(i int, sec float64) float64 {
					if i == 0 && sec > 200 {
						return 0
					}
					return ratio(i, sec)
				}
			},
			want: []want{{subject: gpu1, onset: 200}},
		},
		{
			name: "reaction point ignoring CNPs, 10 s interval", dur: 900,
			modify: func(f *fleet) {
				f.interval = 10
				f.ignoring = func(i int, sec float64) bool { return i == 2 && sec > 250 && sec <= 650 }
			},
			want: []want{{subject: gpu3, onset: 250, resolved: true, key: "rp_ignoring"}},
		},
		{
			// Three readings must show it: a 60 s window held two at 30 s
			// and the port was never judged.
			name: "reaction point ignoring CNPs, 30 s interval", dur: 1500,
			modify: func(f *fleet) {
				f.interval = 30
				f.ignoring = func(i int, sec float64) bool { return i == 2 && sec > 300 && sec <= 900 }
			},
			want: []want{{subject: gpu3, onset: 300, resolved: true, key: "rp_ignoring"}},
		},
		{
			name: "CNPs lost in the fabric, 30 s interval", dur: 1800,
			modify: func(f *fleet) {
				f.interval = 30
				f.loss = func(sec float64) float64 {
					if sec > 600 && sec <= 1200 {
						return 0.4
					}
					return 0
				}
			},
			want: []want{{subject: fabric, onset: 600, resolved: true}},
		},
		{
			name: "CNPs lost in the fabric", dur: 1200,
			modify: func(f *fleet) {
				f.loss = func(sec float64) float64 {
					if sec > 400 && sec <= 800 {
						return 0.4
					}
					return 0
				}
			},
			want: []want{{subject: fabric, onset: 400, resolved: true}},
		},
		{
			name: "CNPs lost in the fabric, with a gap and a reset elsewhere", dur: 1000,
			modify: func(f *fleet) {
				f.loss = func(sec float64) float64 {
					if sec > 400 {
						return 0.3
					}
					return 0
				}
				f.noise = func(i int, sec float64) string {
					switch {
					case i == 4 && sec >= 500 && sec < 530:
						return "silent"
					case i == 5 && sec == 600:
						return "reset"
					}
					return ""
				}
			},
			want: []want{{subject: fabric, onset: 400}},
		},
		// 1 s readings; the fabric's CNP load drops twentyfold (the jobs end)
		// while a node that received a sixteenth of the CNPs is silent for
		// minutes. Its usual rate, learned before the drop, would bound
		// more CNPs than the whole fabric now sends: the unknown share must
		// follow the load, and the minutes it is away must not blind the
		// step test.
		{
			name: "CNPs lost on a 1 s interval while a node is silent and the load has dropped", dur: 1200,
			modify: func(f *fleet) { dropLoadSilent(f, 300, 1100, 800, 0.6) },
			want:   []want{{subject: fabric, onset: 800}},
		},
		{
			name: "CNPs lost on a 1 s interval just before a node silent for minutes returns", dur: 1200,
			modify: func(f *fleet) { dropLoadSilent(f, 300, 880, 800, 0.6) },
			want:   []want{{subject: fabric, onset: 800}},
		},
		{
			name: "a silent node and a dropped load on a 1 s interval are not loss", dur: 1500,
			modify: func(f *fleet) { dropLoadSilent(f, 300, 1100, 0, 0) },
		},
		{
			name: "a silent node that received a sixth of the CNPs and a dropped load are not loss", dur: 1500,
			modify: func(f *fleet) {
				dropLoadSilent(f, 300, 1100, 0, 0)
				// What the silent port misses is more than the
				// tolerance: the observed CNPs do not balance.
				f.n = 6
			},
		},
		{
			name: "resets, restarts, held glitches and silent nodes are not loss", dur: 1500,
			modify: func(f *fleet) {
				f.noise = func(i int, sec float64) string {
					switch {
					case i == 1 && sec >= 300 && sec < 360: // a silent node that receives CNPs
						return "silent"
					case i == 2 && sec >= 400 && sec < 700: // silent for 5 min
						return "silent"
					case i == 3 && sec == 500:
						return "reset"
					case i == 4 && (sec == 550 || sec == 900):
						return "baseline" // collector restart
					case i == 5 && int(sec)%60 == 0:
						return "held"
					case i == 0 && sec >= 800 && sec < 3000: // gone for good
						return "silent"
					}
					return ""
				}
			},
		},
		{
			name: "a fabric that never balances (unmonitored endpoints) says nothing", dur: 900,
			modify: func(f *fleet) {
				f.loss = func(float64) float64 { return 0.45 }
			},
		},
		{
			name: "a gap that creeps up over 20 minutes is the workload moving, not loss", dur: 1800,
			modify: func(f *fleet) {
				f.loss = func(sec float64) float64 { return max(0, min(0.5, (sec-300)/2400)) }
			},
		},
		{
			name: "an RP that ignores a few CNPs once is not a fault", dur: 600,
			modify: func(f *fleet) {
				f.ignoring = func(i int, sec float64) bool { return i == 2 && sec == 300 }
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := healthyFleet()
			if tc.modify != nil {
				tc.modify(f)
			}
			h := detecttest.NewHarness(t, New())
			f.run(h, tc.dur)
			ins := incidents(t, h.Events)
			if len(ins) != len(tc.want) {
				for _, in := range ins {
					t.Logf("incident %s %v: %s %v", in.id, in.states, in.first.Summary, in.first.Evidence)
				}
				t.Fatalf("%d incidents, want %d", len(ins), len(tc.want))
			}
			for i, w := range tc.want {
				in := ins[i]
				if in.subject != w.subject {
					t.Errorf("subject %v, want %v", in.subject, w.subject)
				}
				if (w.subject == fabric) != (in.scope == schemas.ScopeFabric) {
					t.Errorf("scope %s for %v", in.scope, in.subject)
				}
				if in.first.Layer != schemas.LayerLinkNetwork {
					t.Errorf("layer %s", in.first.Layer)
				}
				onset, detected := in.first.Start, in.first.DetectedAt
				if onset < detecttest.At(w.onset-20) || onset > detecttest.At(w.onset+30) {
					t.Errorf("onset %s, fault from %s", onset, detecttest.At(w.onset))
				}
				if lat := time.Duration(detected-detecttest.At(w.onset)) * time.Millisecond; lat > 3*time.Minute || lat < 0 {
					t.Errorf("detected %s after the fault started", lat)
				}
				if got := in.last.State == schemas.StateResolved; got != w.resolved {
					t.Errorf("resolved %v, want %v (%v)", got, w.resolved, in.states)
				}
				if w.key != "" && !containsString(in.first.Summary, map[string]string{"np_disabled": "notification point", "rp_ignoring": "reaction point"}[w.key]) {
					t.Errorf("summary %q", in.first.Summary)
				}
				t.Logf("%s %v onset %s detected %s: %s", in.id, in.states, onset, detected, in.first.Summary)
			}
		})
	}
}

// lightFleet is healthyFleet under a light load: its ECN marks, and so its
// CNPs, scaled by load (1 gives about 22,000 CNPs a minute), with the CNPs
// each port receives drawn as Poisson counts.
func lightFleet(load float64) *fleet {
	f := healthyFleet()
	marked := f.marked
	f.marked = func(i int, sec float64) float64 { return load * marked(i, sec) }
	f.poisson = rand.New(rand.NewPCG(1, 2))
	return f
}

func lossBetween(from, to, loss float64) func(float64) float64 {
	return func(sec float64) float64 {
		if sec > from && (to == 0 || sec <= to) {
			return loss
		}
		return 0
	}
}

// TestCNPECNImbalanceLightLoad: under a light load a minute carries far
// fewer than the thousands of CNPs a fixed floor would ask for; the lost
// CNPs count once they stand out of the noise of the counts, and the noise
// itself is no loss.
func TestCNPECNImbalanceLightLoad(t *testing.T) {
	fabric := schemas.Subject{}
	type want struct {
		onset    float64
		resolved bool
	}
	cases := []struct {
		name string
		dur  float64
		f    func() *fleet
		want []want
	}{
		{
			name: "about 1,500 CNPs a minute, 40% lost", dur: 1200,
			f: func() *fleet {
				f := lightFleet(1.0 / 15)
				f.loss = lossBetween(400, 800, 0.4)
				return f
			},
			want: []want{{onset: 400, resolved: true}},
		},
		{
			name: "about 1,000 CNPs a minute on a 1 s interval, 30% lost", dur: 900,
			f: func() *fleet {
				f := lightFleet(1.0 / 22)
				f.interval = 1
				f.loss = lossBetween(400, 0, 0.3)
				return f
			},
			want: []want{{onset: 400}},
		},
		{
			name: "about 1,500 CNPs a minute, balanced within the noise", dur: 1500,
			f: func() *fleet { return lightFleet(1.0 / 15) },
		},
		{
			name: "about 400 CNPs a minute, 60% lost", dur: 1200,
			f: func() *fleet {
				f := lightFleet(1.0 / 55)
				f.loss = lossBetween(400, 800, 0.6)
				return f
			},
			want: []want{{onset: 400, resolved: true}},
		},
		{
			name: "about 700 CNPs a minute on a 10 s interval, balanced within the noise", dur: 1500,
			f: func() *fleet {
				f := lightFleet(1.0 / 32)
				f.interval = 10
				return f
			},
		},
		{
			// A trickle of CNPs: about 60 a minute, fewer than
			// MinFabricLost: even all of them missing would say nothing.
			name: "a load that drops to a trickle, then half its CNPs missing", dur: 1200,
			f: func() *fleet {
				f := lightFleet(1)
				marked := f.marked
				f.marked = func(i int, sec float64) float64 {
					if sec > 300 {
						return marked(i, sec) / 400
					}
					return marked(i, sec)
				}
				f.loss = lossBetween(500, 0, 0.5)
				return f
			},
		},
		{
			// 300 CNPs a minute, then 3,000: the unmonitored endpoints'
			// steady gap is within FabricSigmas·√sent of the light
			// windows, and must not pass for balance there.
			name: "a load rising from light, 25% of CNPs never balanced (unmonitored endpoints)", dur: 1500,
			f: func() *fleet {
				f := lightFleet(1.0 / 75)
				marked := f.marked
				f.marked = func(i int, sec float64) float64 {
					return marked(i, sec) * (1 + 9*min(1, max(0, (sec-600)/60)))
				}
				f.loss = func(float64) float64 { return 0.25 }
				return f
			},
		},
		{
			name: "a light load that never balances (unmonitored endpoints) says nothing", dur: 900,
			f: func() *fleet {
				f := lightFleet(1.0 / 15)
				f.loss = func(float64) float64 { return 0.3 }
				return f
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := detecttest.NewHarness(t, New())
			tc.f().run(h, tc.dur)
			ins := incidents(t, h.Events)
			if len(ins) != len(tc.want) {
				for _, in := range ins {
					t.Logf("incident %s %v: %s %v", in.id, in.states, in.first.Summary, in.first.Evidence)
				}
				t.Fatalf("%d incidents, want %d", len(ins), len(tc.want))
			}
			for i, w := range tc.want {
				in := ins[i]
				if in.subject != fabric || in.scope != schemas.ScopeFabric {
					t.Errorf("subject %v scope %s, want the fabric", in.subject, in.scope)
				}
				onset, detected := in.first.Start, in.first.DetectedAt
				if onset < detecttest.At(w.onset-20) || onset > detecttest.At(w.onset+30) {
					t.Errorf("onset %s, fault from %s", onset, detecttest.At(w.onset))
				}
				if lat := time.Duration(detected-detecttest.At(w.onset)) * time.Millisecond; lat > 3*time.Minute || lat < 0 {
					t.Errorf("detected %s after the fault started", lat)
				}
				if got := in.last.State == schemas.StateResolved; got != w.resolved {
					t.Errorf("resolved %v, want %v (%v)", got, w.resolved, in.states)
				}
				if sent := in.first.Evidence["fabric_cnp_sent"].(float64); sent >= 2000 {
					t.Errorf("%.0f CNPs in the window: not a light load", sent)
				}
				t.Logf("%s %v onset %s detected %s: %s", in.id, in.states, onset, detected, in.first.Summary)
			}
		})
	}
}

func containsString(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// partialView is a processor that owns only some partitions.
type partialView struct{ *detecttest.Harness }

func (partialView) Complete() bool { return false }

// A processor that sees part of the fabric must not sum it.
func TestCNPECNImbalancePartialView(t *testing.T) {
	f := healthyFleet()
	f.loss = func(sec float64) float64 {
		if sec > 300 {
			return 0.5
		}
		return 0
	}
	d := New()
	h := detecttest.NewHarness(t)
	pv := partialView{h}
	// Drive the detector by hand with the partial view.
	h.Dets = []processor.Detector{partialDriver{d: d, view: pv}}
	f.run(h, 900)
	if len(h.Events) != 0 {
		t.Fatalf("%d events on a partial view: %+v", len(h.Events), h.Events[0])
	}
}

// partialDriver hands the detector a partial fabric view.
type partialDriver struct {
	d    *Detector
	view processor.FabricView
}

func (p partialDriver) Name() string { return p.d.Name() }
func (p partialDriver) OnSample(ctx context.Context, port *processor.PortState, s *processor.Sample, em processor.Emitter) {
	p.d.OnSample(ctx, port, s, em)
}
func (p partialDriver) OnWatermark(ctx context.Context, _ processor.FabricView, wm schemas.Millis, em processor.Emitter) {
	p.d.OnWatermark(ctx, p.view, wm, em)
}

// TestCNPECNImbalanceMemory: a RoCE port's state for this detector stays a
// small fraction of the 8 KiB budget.
func TestCNPECNImbalanceMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	f := healthyFleet()
	f.n = 200
	f.marked = func(i int, sec float64) float64 { return 100 + float64(i%7)*30 }
	f.npRatio = func(int, float64) float64 { return 0.3 }
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := detecttest.NewHarness(t, New())
	f.run(h, 600)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perPort := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(f.n)
	t.Logf("%d B per port", perPort)
	if perPort > 2<<10 {
		t.Errorf("%d B per port for this detector alone", perPort)
	}
	runtime.KeepAlive(h)
}

func BenchmarkCNPECNImbalance(b *testing.B) {
	// go test ./processor -run XXX -bench CNPECN -benchmem
	f := healthyFleet()
	f.n = 100
	for b.Loop() {
		h := detecttest.NewHarness(&testing.T{}, New())
		f.run(h, 500) // 100 ports x 100 readings = 10k port-samples
	}
}

// TestCNPECNImbalanceXmitWait: a reaction point that ignores CNPs keeps
// sending into the congestion; the finding shows how long its transmit
// waited (port_xmit_wait, ticks per second, and a share of the time once
// the tick is configured). A pinned counter (32-bit, saturating) gives no
// figure, only the note that it is pinned.
func TestCNPECNImbalanceXmitWait(t *testing.T) {
	cases := []struct {
		name      string
		tick      time.Duration
		waitFlags schemas.Flag
		noWait    bool
		want      map[string]any // evidence keys and values; nil value: must be absent
	}{
		{name: "ticks per second without a known tick", waitFlags: 0,
			want: map[string]any{"xmit_wait_ticks_per_s": 1e6, "xmit_wait_share": nil, "xmit_wait_pinned": nil}},
		{name: "a share of the time with the tick configured", tick: 500 * time.Nanosecond,
			want: map[string]any{"xmit_wait_ticks_per_s": 1e6, "xmit_wait_share": 0.5}},
		{name: "a pinned counter says nothing", waitFlags: schemas.FlagSaturated,
			want: map[string]any{"xmit_wait_ticks_per_s": nil, "xmit_wait_share": nil, "xmit_wait_pinned": true}},
		{name: "a port without the counter shows none", noWait: true,
			want: map[string]any{"xmit_wait_ticks_per_s": nil, "xmit_wait_pinned": nil}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := New()
			d.Fabric = false
			d.XmitWaitTick = c.tick
			h := detecttest.NewHarness(t, d)
			var wait uint64
			for sec := 0.0; sec < 300; sec += 5 {
				flags := schemas.Flag(0)
				if sec == 0 {
					flags = detecttest.First
				}
				wait += 5_000_000
				cs := []schemas.CounterDelta{
					detecttest.HW("np_ecn_marked_roce_packets", 0, 0, flags), detecttest.HW("np_cnp_sent", 0, 0, flags),
					detecttest.HW("rp_cnp_handled", 100, 100, flags), detecttest.HW("rp_cnp_ignored", 2000, 2000, flags),
				}
				if !c.noWait {
					cs = append(cs, detecttest.Ctr("port_xmit_wait", wait, 5_000_000, flags|c.waitFlags))
				}
				h.Feed(detecttest.Sample(detecttest.PortA, sec, "ACTIVE", cs...))
			}
			if len(h.Events) == 0 || h.Events[0].State != "open" {
				t.Fatalf("events %v, want an open", h.States())
			}
			ev := h.Events[0].Evidence
			for k, v := range c.want {
				got, ok := ev[k]
				switch {
				case v == nil && ok:
					t.Errorf("%s = %v, want none", k, got)
				case v != nil && got != v:
					t.Errorf("%s = %v, want %v", k, got, v)
				}
			}
		})
	}
}

func TestRound3(t *testing.T) {
	if got := round3(1.00049); got != 1 {
		t.Errorf("round3(1.00049) = %v, want 1", got)
	}
}
