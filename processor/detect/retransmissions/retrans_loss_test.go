package retransmissions

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/detect/judged"
	"github.com/rdmawatch/rdmawatch/processor/detect/linkflap"
	"github.com/rdmawatch/rdmawatch/processor/internal/detecttest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// lossGen is a test-local model of a receiving port's transport counters,
// with physics of its own (not sim's or altgen's): traffic in packets per
// second that may change, healthy reordering from adaptive routing as a
// share of received packets (Poisson, or in bursts), and loss: lost
// packets at a share of what arrives, each making a clump of
// out-of-sequence packets (Go-Back-N resends what was in flight, 1 to 40)
// and one NAK on a sender.
type lossGen struct {
	r *rand.Rand
	// pps is the traffic at second sec.
	pps func(sec float64) float64
	// reorder is the healthy out-of-sequence share, burst its clump size
	// (1: Poisson).
	reorder float64
	burst   float64
	// perSec is reordering in out-of-sequence packets per second, whatever
	// the traffic (route changes, congestion).
	perSec float64
	// loss is the lost share at second sec; factor draws the
	// out-of-sequence packets of one loss.
	loss   func(sec float64) float64
	factor func(r *rand.Rand) float64
	// flap reports a link down at the sample ending at sec.
	flap func(sec, interval float64) bool
	ib   bool
}

func poissonDraw(r *rand.Rand, mu float64) float64 {
	if mu <= 0 {
		return 0
	}
	if mu > 50 {
		return math.Max(0, math.Round(mu+math.Sqrt(mu)*r.NormFloat64()))
	}
	l, k, p := math.Exp(-mu), 0.0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// sample is the receiver's sample ending at sec over interval seconds, and
// what its senders count (NAKs and timeouts) in the same interval.
func (g *lossGen) sample(id schemas.PortID, sec, interval float64) (recv *processor.Sample, naks float64) {
	pkts := math.Round(g.pps(sec) * interval * (1 + 0.05*g.r.NormFloat64()))
	burst := math.Max(1, g.burst)
	oos := burst*poissonDraw(g.r, pkts*g.reorder/burst) + poissonDraw(g.r, g.perSec*interval)
	var lost float64
	if g.loss != nil {
		lost = poissonDraw(g.r, pkts*g.loss(sec))
	}
	for range int(lost) {
		f := 30.0
		if g.factor != nil {
			f = g.factor(g.r)
		}
		oos += f
	}
	naks = lost + oos/200 // a loss's NAK, and a few of reordering's
	cs := []schemas.CounterDelta{
		detecttest.Ctr("port_rcv_packets", uint64(pkts), uint64(pkts), 0),
		detecttest.Ctr("port_xmit_packets", uint64(pkts), uint64(pkts), 0),
		detecttest.HW("out_of_sequence", uint64(oos), uint64(oos), 0),
		detecttest.HW("duplicate_request", uint64(lost/2), uint64(lost/2), 0),
	}
	if g.flap != nil {
		d := uint64(0)
		if g.flap(sec, interval) {
			d = 1
		}
		cs = append(cs, detecttest.Ctr("link_downed", d, d, 0))
		if !g.ib {
			cs = append(cs, detecttest.Eth("link_down_events_phy", d, d, 0))
		}
	}
	s := detecttest.Sample(id, sec, "ACTIVE", cs...)
	s.IntervalMs = int64(interval * 1000)
	if g.ib {
		s.LinkLayer, s.Netdev = "InfiniBand", ""
	}
	return s, naks
}

// senderSample is a sender's sample with its NAKs.
func senderSample(id schemas.PortID, sec, interval, naks float64) *processor.Sample {
	n := uint64(naks)
	s := detecttest.Sample(id, sec, "ACTIVE", detecttest.Ctr("port_rcv_packets", 1e6, 1e6, 0), detecttest.Ctr("port_xmit_packets", 1e6, 1e6, 0),
		detecttest.HW("packet_seq_err", n, n, 0), detecttest.HW("local_ack_timeout_err", n/50, n/50, 0))
	s.IntervalMs = int64(interval * 1000)
	return s
}

func constant(v float64) func(float64) float64 { return func(float64) float64 { return v } }

func between(from, to, v float64) func(float64) float64 {
	return func(sec float64) float64 {
		if sec >= from && sec < to {
			return v
		}
		return 0
	}
}

func uniformFactor(lo, hi float64) func(*rand.Rand) float64 {
	return func(r *rand.Rand) float64 { return math.Round(lo + r.Float64()*(hi-lo)) }
}

// TestRetransLoss: the cases of issue 26 at 1 s, 5 s and 10 s intervals.
// Each runs with its own seed; the port is judged against its own history.
func TestRetransLoss(t *testing.T) {
	const hour = 3600.0
	lossAt := 2 * hour // every fault starts after two quiet hours
	cases := []struct {
		name      string
		gen       func(r *rand.Rand) *lossGen
		duration  float64
		withFlaps bool
		// found: an incident must open within maxLatency seconds of
		// lossAt (0: no incident at all).
		found      bool
		maxLatency float64
		cause      string
	}{
		{
			name: "RoCE port at 1e-5 out of sequence per received packet from 0, one per loss",
			gen: func(r *rand.Rand) *lossGen {
				return &lossGen{r: r, pps: constant(1.6e6), loss: between(lossAt, lossAt+600, 1e-5), factor: uniformFactor(1, 1)}
			},
			duration: lossAt + 900, found: true, maxLatency: 180,
		},
		{
			name: "RoCE port at 1e-5 out of sequence per received packet from 0, 1e-6 lost with 10 per loss",
			gen: func(r *rand.Rand) *lossGen {
				return &lossGen{r: r, pps: constant(1.6e6), loss: between(lossAt, lossAt+600, 1e-6), factor: uniformFactor(10, 10)}
			},
			duration: lossAt + 900, found: true, maxLatency: 180,
		},
		{
			name: "the minimum effect: 1e-6 lost for 3 minutes, 1 to 40 per loss, on a port with a little reordering",
			gen: func(r *rand.Rand) *lossGen {
				return &lossGen{r: r, pps: constant(1e6), reorder: 1e-7, loss: between(lossAt, lossAt+180, 1e-6), factor: uniformFactor(1, 40)}
			},
			duration: lossAt + 600, found: true, maxLatency: 180,
		},
		{
			name: "1e-6 lost, 40 per loss, on a port that reorders 1e-6",
			gen: func(r *rand.Rand) *lossGen {
				return &lossGen{r: r, pps: constant(1e6), reorder: 1e-6, loss: between(lossAt, lossAt+600, 1e-6), factor: uniformFactor(40, 40)}
			},
			duration: lossAt + 900, found: true, maxLatency: 180,
		},
		{
			name: "IB port losing 3e-6 of packets in bursts around flaps: found, caused by the flap",
			gen: func(r *rand.Rand) *lossGen {
				// Flaps every 90 s for 10 minutes; each loses 3e-6 of
				// the packets of the 30 s after it.
				flapAt := func(sec float64) (float64, bool) {
					if sec < lossAt || sec >= lossAt+600 {
						return 0, false
					}
					return lossAt + 90*math.Floor((sec-lossAt)/90), true
				}
				return &lossGen{r: r, pps: constant(1.2e6), ib: true, factor: uniformFactor(1, 20),
					loss: func(sec float64) float64 {
						if f, ok := flapAt(sec); ok && sec-f < 30 {
							return 3e-6
						}
						return 0
					},
					flap: func(sec, interval float64) bool {
						f, ok := flapAt(sec)
						return ok && sec-f < interval
					}}
			},
			withFlaps: true, duration: lossAt + 900, found: true, maxLatency: 240, cause: schemas.TypeLinkFlap,
		},
		{
			name: "steady adaptive-routing reordering at 1e-5 per packet for hours, in bursts",
			gen: func(r *rand.Rand) *lossGen {
				return &lossGen{r: r, pps: func(sec float64) float64 { return 1e6 * (1 + 0.5*math.Sin(sec/900)) }, reorder: 1e-5, burst: 4}
			},
			duration: 8 * hour,
		},
		{
			name: "reordering that doubles with traffic",
			gen: func(r *rand.Rand) *lossGen {
				return &lossGen{r: r, reorder: 1e-5, pps: func(sec float64) float64 {
					if sec >= lossAt {
						return 2.4e6
					}
					return 1.2e6
				}}
			},
			duration: 4 * hour,
		},
		{
			name: "reordering a few packets a second whatever the traffic, then traffic falls tenfold",
			gen: func(r *rand.Rand) *lossGen {
				return &lossGen{r: r, perSec: 0.3, pps: func(sec float64) float64 {
					if sec >= lossAt {
						return 1e5
					}
					return 1e6
				}}
			},
			duration: 4 * hour,
		},
		{
			name: "reordering a few packets a second, then 1e-5 lost with 1 to 40 per loss",
			gen: func(r *rand.Rand) *lossGen {
				return &lossGen{r: r, perSec: 0.3, pps: constant(1e6), loss: between(lossAt, lossAt+1800, 1e-5), factor: uniformFactor(1, 40)}
			},
			duration: lossAt + 1800, found: true, maxLatency: 240,
		},
		{
			name: "1e-7 lost, 1 to 40 out of sequence per loss: below the minimum effect",
			gen: func(r *rand.Rand) *lossGen {
				return &lossGen{r: r, pps: constant(1.6e6), loss: between(lossAt, lossAt+3600, 1e-7), factor: uniformFactor(1, 40)}
			},
			duration: lossAt + 3600,
		},
		{
			name: "1e-7 lost, 40 out of sequence per loss: below the minimum effect",
			gen: func(r *rand.Rand) *lossGen {
				return &lossGen{r: r, pps: constant(1.6e6), loss: between(lossAt, lossAt+3600, 1e-7), factor: uniformFactor(40, 40)}
			},
			duration: lossAt + 3600,
		},
	}
	for ci, c := range cases {
		for _, interval := range []float64{1, 5, 10} {
			name := c.name + "/" + map[float64]string{1: "1s", 5: "5s", 10: "10s"}[interval]
			t.Run(name, func(t *testing.T) {
				if testing.Short() && interval == 1 && c.duration > 3*hour {
					t.Skip("long at 1 s intervals")
				}
				r := rand.New(rand.NewPCG(uint64(ci+1), uint64(interval)))
				g := c.gen(r)
				dets := []processor.Detector{New()}
				if c.withFlaps {
					dets = processor.Link([]processor.Detector{linkflap.New(), New()})
				}
				h := detecttest.NewHarness(t, dets...)
				for sec := interval; sec <= c.duration; sec += interval {
					s, naks := g.sample(detecttest.PortA, sec, interval)
					h.Feed(s)
					h.Feed(senderSample(detecttest.PortB, sec+0.5, interval, naks))
				}
				var opens []*schemas.Event
				var cause *schemas.Cause
				for _, ev := range h.Events {
					if ev.Type != schemas.TypeRetransmissions {
						continue
					}
					if ev.State == schemas.StateOpen {
						opens = append(opens, ev)
					}
					if ev.Cause != nil {
						cause = ev.Cause
					}
				}
				if !c.found {
					for _, ev := range opens {
						t.Errorf("unexpected incident at %s: %s (%v)", ev.DetectedAt, ev.Summary, ev.Evidence)
					}
					return
				}
				if len(opens) != 1 {
					for _, ev := range h.Events {
						t.Logf("%s %s %s %s", ev.Type, ev.State, ev.DetectedAt, ev.Summary)
					}
					t.Fatalf("%d incidents, want 1", len(opens))
				}
				o := opens[0]
				if o.Subject != detecttest.PortA.Subject() {
					t.Errorf("subject %s, want the lossy port", o.Subject)
				}
				lat := float64(o.DetectedAt-detecttest.At(lossAt)) / 1000
				t.Logf("detected %.0f s after the onset: %s", lat, o.Summary)
				if lat < 0 || lat > c.maxLatency {
					t.Errorf("detected %.0f s after the onset, want within %.0f s", lat, c.maxLatency)
				}
				if peers, _ := o.Evidence["peers"].([]string); len(peers) != 1 || peers[0] != detecttest.PortB.Subject().String() {
					t.Errorf("peers %v, want the sender", o.Evidence["peers"])
				}
				for _, k := range []string{"p_value", "lost_per_s", "lost_per_received_packet", "oos_per_loss"} {
					if _, ok := o.Evidence[k]; !ok {
						t.Errorf("evidence lacks %s: %v", k, o.Evidence)
					}
				}
				if !strings.Contains(o.Summary, "lost packets/s") {
					t.Errorf("summary %q", o.Summary)
				}
				if c.cause != "" && (cause == nil || cause.Type != c.cause || cause.Subject != detecttest.PortA.Subject()) {
					t.Errorf("cause %+v, want %s of the port", cause, c.cause)
				}
			})
		}
	}
}

// TestRetransFalseAlarms verifies the false-alarm rate the detector's
// comment states (at most 1 in 10,000 port-days) on 1000 port-hours of
// healthy ports: Poisson and bursty reordering from 1e-7 to 1e-4 of
// received packets, traffic that changes 20-fold every 20 minutes, at
// 5 s intervals, with a fixed seed. None may open; and the p-values must
// be calibrated: no more windows at p <= 1e-3 than about 1e-3 of them.
func TestRetransFalseAlarms(t *testing.T) {
	const (
		ports    = 200
		hours    = 5.0
		interval = 5.0
	)
	r := rand.New(rand.NewPCG(26, 1))
	det := New()
	h := detecttest.NewHarness(t, det)
	gens := make([]*lossGen, ports)
	ids := make([]schemas.PortID, ports)
	for i := range gens {
		reorder := math.Pow(10, -7+3*r.Float64())
		burst := 1.0
		if i%3 == 0 {
			burst = 1 + math.Floor(r.Float64()*8) // adaptive routing reorders in bursts
		}
		phase := r.Float64() * 2400
		base := 2e5 + 2e6*r.Float64()
		gens[i] = &lossGen{r: r, reorder: reorder, burst: burst, pps: func(sec float64) float64 {
			if int((sec+phase)/1200)%2 == 1 {
				return base / 20 // a job ends: a twentieth of the traffic
			}
			return base
		}}
		ids[i] = schemas.PortID{Node: "host-" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Device: "mlx5_0", Port: 1}
	}
	var evals, low int
	for sec := interval; sec <= hours*3600; sec += interval {
		for i, g := range gens {
			s, _ := g.sample(ids[i], sec, interval)
			h.Feed(s)
			if st, ok := processor.LookupPortLocal[judged.Port](h.PortStates[ids[i]], det.Name()); ok && st.Loss != nil && st.Loss.(*lossPort).histMs >= lossWarm.Milliseconds() {
				evals++
				if st.Loss.(*lossPort).p <= 1e-3 {
					low++
				}
			}
		}
	}
	for _, ev := range h.Events {
		t.Errorf("false alarm: %s %s %s", ev.State, ev.Subject, ev.Summary)
	}
	if float64(low) > 3e-3*float64(evals) {
		t.Errorf("%d of %d windows at p <= 1e-3: the test is not calibrated", low, evals)
	}
	t.Logf("%d port-hours, %d evaluations, %d at p <= 1e-3, %d events", int(ports*hours), evals, low, len(h.Events))
}
