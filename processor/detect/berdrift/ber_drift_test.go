package berdrift

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/internal/detecttest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// link generates one port's readings the way the collector's delta
// engine hands them over: cumulative values, deltas, flags.
type link struct {
	ib        bool
	rateGbps  float64
	interval  float64 // seconds
	duration  float64 // seconds
	ber       func(sec float64) float64
	noise     float64 // sigma of ln BER per reading
	wander    float64 // stationary sigma of a slow ln BER wander (temperature)
	wanderMin float64 // its correlation time in minutes (default 20)
	utilBits  float64 // share of the line the port carries (IB port_rcv_data), default 0.3
	seed      uint64
	restartAt []float64 // collector restarts: a baseline with no delta
	resetAt   []float64 // counters cleared: deltas count from zero
	glitchAt  []float64 // read glitch on the error counter: held, delta 0
	symbolAt0 uint64    // symbol_error's reading before the trace (65535: pinned)
	burstAt   []float64 // a retrain: burst more errors in one reading
	burst     uint64
	// burstNoRetrain: the burst is a node gap's minutes folded into one
	// reading, not a retrain (link_error_recovery stays).
	burstNoRetrain bool
	lane           int
	// noBitsPhy: the driver does not list rx_bits_phy (upstream mlx5
	// before 2026, MLNX_OFED 5.x): the bits are the link rate x interval.
	noBitsPhy bool
	// postFECOnly: the port lists no rx_corrected_bits_phy; its errors
	// are the symbol errors FEC left (rx_symbol_err_phy), each a frame
	// dropped for a bad FCS (rx_crc_errors_phy).
	postFECOnly bool
}

func (l link) samples(id schemas.PortID) []*processor.Sample {
	rng := rand.New(rand.NewPCG(l.seed, 7))
	util := l.utilBits
	if util == 0 {
		util = 0.3
	}
	var bitsV, errV, rcvV, recV, recPrev uint64
	var lanes [4]uint64
	symV := l.symbolAt0
	errV = 123456
	bitsV = 1 << 40
	var out []*processor.Sample
	next := func(list []float64, sec float64) bool {
		for _, x := range list {
			if sec >= x && sec-l.interval < x {
				return true
			}
		}
		return false
	}
	var w float64 // the wander: an Ornstein-Uhlenbeck process
	tc := l.wanderMin
	if tc == 0 {
		tc = 20
	}
	if l.wander > 0 {
		w = l.wander * rng.NormFloat64()
	}
	for sec := 0.0; sec < l.duration; sec += l.interval {
		if l.wander > 0 {
			a := math.Exp(-l.interval / (tc * 60))
			w = a*w + l.wander*math.Sqrt(1-a*a)*rng.NormFloat64()
		}
		first := sec == 0 || next(l.restartAt, sec)
		reset := next(l.resetAt, sec)
		glitch := next(l.glitchAt, sec)
		lineBits := l.rateGbps * 1e9 * l.interval
		ber := l.ber(sec) * math.Exp(l.noise*rng.NormFloat64()+w)
		var errs uint64
		if !first || sec > 0 {
			errs = testPoisson(rng, ber*lineBits)
		}
		if sec == 0 {
			errs = 0
		} else if next(l.burstAt, sec) {
			errs += l.burst
			if !l.burstNoRetrain {
				recV++ // a retrain: link_error_recovery counts it
			}
		}
		rcv := uint64(lineBits * util / 8)
		if reset {
			bitsV, errV, rcvV, recV, symV = 0, 0, 0, 0, 0
			lanes = [4]uint64{}
		}
		bitsV += uint64(lineBits)
		errV += errs
		rcvV += rcv
		lanes[l.lane] += errs
		if symV+errs >= 65535 {
			symV = 65535
		} else {
			symV += errs
		}
		var flags schemas.Flag
		switch {
		case first:
			flags = schemas.FlagFirst
		case reset:
			flags = schemas.FlagReset
		}
		d := func(v, delta uint64) uint64 {
			if first {
				return 0
			}
			if reset {
				return v
			}
			return delta
		}
		var cs []schemas.CounterDelta
		if l.ib {
			sf := flags
			sd := d(symV, errs)
			if symV >= 65535 {
				sf |= schemas.FlagSaturated
			}
			sv := symV
			if glitch {
				sf, sd, sv = schemas.FlagHeld, 0, 0
			}
			cs = append(cs,
				schemas.CounterDelta{Name: "symbol_error", Source: schemas.SourceCounters, Value: sv, Delta: sd, Flags: sf},
				schemas.CounterDelta{Name: "link_error_recovery", Source: schemas.SourceCounters, Value: recV, Delta: d(recV, recV-recPrev), Flags: flags},
				schemas.CounterDelta{Name: "port_rcv_data", Source: schemas.SourceCounters, Value: rcvV / 4, Delta: d(rcvV, rcv), Flags: flags},
			)
		} else {
			ef, ed, ev := flags, d(errV, errs), errV
			if glitch {
				ef, ed, ev = schemas.FlagHeld, 0, 0
			}
			cs = append(cs, schemas.CounterDelta{Name: "link_down_events_phy", Source: schemas.SourceEthtool, Value: recV, Delta: d(recV, recV-recPrev), Flags: flags})
			if !l.noBitsPhy {
				cs = append(cs, schemas.CounterDelta{Name: "rx_bits_phy", Source: schemas.SourceEthtool, Value: bitsV, Delta: d(bitsV, uint64(lineBits)), Flags: flags})
			}
			if l.postFECOnly {
				cs = append(cs,
					schemas.CounterDelta{Name: "rx_symbol_err_phy", Source: schemas.SourceEthtool, Value: ev, Delta: ed, Flags: ef},
					schemas.CounterDelta{Name: "rx_crc_errors_phy", Source: schemas.SourceEthtool, Value: ev, Delta: ed, Flags: ef},
					schemas.CounterDelta{Name: "rx_packets_phy", Source: schemas.SourceEthtool, Value: rcvV / 1000, Delta: d(rcvV/1000, rcv/1000), Flags: flags},
				)
			} else {
				cs = append(cs,
					schemas.CounterDelta{Name: "rx_corrected_bits_phy", Source: schemas.SourceEthtool, Value: ev, Delta: ed, Flags: ef},
					schemas.CounterDelta{Name: "rx_pcs_symbol_err_phy", Source: schemas.SourceEthtool, Value: 0, Delta: 0, Flags: flags},
				)
				for i, v := range lanes {
					var ld uint64
					if i == l.lane {
						ld = errs
					}
					cs = append(cs, schemas.CounterDelta{Name: fmt.Sprintf("rx_err_lane_%d_phy", i), Source: schemas.SourceEthtool, Value: v, Delta: d(v, ld), Flags: flags})
				}
			}
		}
		interval := int64(l.interval * 1000)
		if first {
			interval = 0
		}
		ll, netdev, rate := "Ethernet", "ens1f0np0", fmt.Sprintf("%g Gb/sec (4X)", l.rateGbps)
		if l.ib {
			ll, netdev, rate = "InfiniBand", "", fmt.Sprintf("%g Gb/sec (4X HDR)", l.rateGbps)
		}
		recPrev = recV
		out = append(out, &processor.Sample{ID: id, Time: detecttest.At(sec), PortSample: &schemas.PortSample{
			Device: id.Device, Port: id.Port, Netdev: netdev, LinkLayer: ll, State: "ACTIVE", Rate: rate,
			TimeMs: int64(detecttest.At(sec)), IntervalMs: interval, Counters: cs,
		}})
	}
	return out
}

func testPoisson(rng *rand.Rand, mean float64) uint64 {
	if mean <= 0 {
		return 0
	}
	if mean > 50 {
		return uint64(max(0, math.Round(mean+math.Sqrt(mean)*rng.NormFloat64())))
	}
	limit, prod, n := math.Exp(-mean), rng.Float64(), uint64(0)
	for prod > limit {
		n++
		prod *= rng.Float64()
	}
	return n
}

// drift is a BER that is base until onset, then rises exponentially to
// critical in toCritical, and falls back to base at until (optic replaced;
// 0: never).
func drift(base, critical, onset, toCritical, until float64) func(float64) float64 {
	g := math.Log(critical/base) / toCritical
	return func(sec float64) float64 {
		if sec < onset || until > 0 && sec >= until {
			return base
		}
		return min(base*math.Exp(g*(sec-onset)), 100*critical)
	}
}

func stable(v float64) func(float64) float64 { return func(float64) float64 { return v } }

func TestBERDrift(t *testing.T) {
	const h, m = 3600.0, 60.0
	cases := []struct {
		name string
		link link
		want []string // states, updates folded
		// onset and critical (seconds) for the timing checks; 0 skips them.
		onset, critical, latestDetect float64
		check                         func(t *testing.T, evs []*schemas.Event)
	}{
		{
			name: "ethernet 40-min drift from 1e-8 alerts before half-way, resolves once after the optic is replaced",
			link: link{rateGbps: 200, interval: 5, duration: 3 * h, noise: 0.3, lane: 2,
				ber: drift(1e-8, 1e-6, 60*m, 40*m, 95*m)},
			want:  []string{"open", "resolved"},
			onset: 60 * m, critical: 100 * m, latestDetect: 80 * m,
			check: func(t *testing.T, evs []*schemas.Event) {
				var sawCritical bool
				for _, ev := range evs {
					sawCritical = sawCritical || ev.Severity == "critical"
				}
				if !sawCritical {
					t.Error("never critical though the level was crossed")
				}
				if evs[0].Evidence["lane"] != 2 {
					t.Errorf("lane %v", evs[0].Evidence["lane"])
				}
				// The lane's BER is over a quarter of the bits (4X):
				// four times the port's, on the one lane that errs.
				lb, _ := evs[0].Evidence["lane_ber"].([]float64)
				if len(lb) != 4 || evs[0].Evidence["lanes"] != 4 || lb[0] != 0 || lb[1] != 0 || lb[3] != 0 || lb[2] <= 0 {
					t.Fatalf("lane_ber %v lanes %v", evs[0].Evidence["lane_ber"], evs[0].Evidence["lanes"])
				}
				if ratio := lb[2] / evs[0].Evidence["recent_ber"].(float64); ratio < 2 || ratio > 8 {
					t.Errorf("lane BER %v is %.1f times the recent port BER %v, want about 4", lb[2], ratio, evs[0].Evidence["recent_ber"])
				}
				if src := evs[0].Evidence["bits_source"]; src != "rx_bits_phy" && src != "link_rate_x_interval" {
					t.Errorf("bits_source %v", src)
				}
			},
		},
		{
			name: "ethernet 2-h drift from 1e-7 (one decade) alerts before half-way",
			link: link{rateGbps: 100, interval: 10, duration: 4 * h, noise: 0.3,
				ber: drift(1e-7, 1e-6, 60*m, 2*h, 0)},
			want:  []string{"open"},
			onset: 60 * m, critical: 180 * m, latestDetect: 120 * m,
		},
		{
			name: "ethernet drift from a very clean link (1e-12, sparse corrected bits) at 1 s",
			link: link{rateGbps: 100, interval: 1, duration: 100 * m, noise: 0.2,
				ber: drift(1e-12, 1e-6, 30*m, 40*m, 0)},
			want:  []string{"open"},
			onset: 30 * m, critical: 70 * m, latestDetect: 50 * m,
		},
		{
			name: "infiniband sparse symbol errors: alerts within a few errors, before critical",
			link: link{ib: true, rateGbps: 200, interval: 5, duration: 2 * h,
				ber: drift(1e-15, 1e-12, 50*m, 40*m, 0)},
			want:  []string{"open"},
			onset: 50 * m, critical: 90 * m, latestDetect: 84 * m,
			check: func(t *testing.T, evs []*schemas.Event) {
				if n := evs[0].Evidence["errors_since_onset"].(float64); n > 15 {
					t.Errorf("%v errors before the alert", n)
				}
			},
		},
		{
			name: "stable high BER is not drift",
			link: link{rateGbps: 200, interval: 5, duration: 3 * h, noise: 0.4, ber: stable(5e-7)},
		},
		{
			name: "stable clean link is not drift",
			link: link{rateGbps: 400, interval: 2, duration: 2 * h, noise: 0.3, ber: stable(3e-11)},
		},
		{
			name: "resets, restarts and glitches on a healthy link are nothing",
			link: link{rateGbps: 200, interval: 5, duration: 2 * h, noise: 0.3, ber: stable(2e-9),
				restartAt: []float64{20 * m, 50 * m}, resetAt: []float64{35 * m, 80 * m}, glitchAt: []float64{10 * m, 61 * m, 90 * m}},
		},
		{
			name: "infiniband resets and glitches with rare symbol errors are nothing",
			link: link{ib: true, rateGbps: 100, interval: 5, duration: 2 * h, ber: stable(3e-14),
				restartAt: []float64{20 * m}, resetAt: []float64{40 * m}, glitchAt: []float64{30 * m, 70 * m}},
		},
		{
			name: "infiniband steady symbol errors (a few a minute) are not drift",
			link: link{ib: true, rateGbps: 200, interval: 5, duration: 3 * h, ber: stable(2e-13)},
		},
		{
			// A retrain (or minutes of errors folded into the reading
			// after a node gap) puts tens of symbol errors in one
			// reading of a link that shows one every few minutes; the
			// minutes after it are as before.
			name: "infiniband retrain burst on a quiet link is not drift",
			link: link{ib: true, rateGbps: 200, interval: 5, duration: 2 * h, ber: stable(3e-14),
				burstAt: []float64{70 * m}, burst: 80},
		},
		{
			// The same burst without a retrain (a node gap folds minutes
			// into one reading): the one-burst test rules it out.
			name: "infiniband folded burst on a quiet link is not drift",
			link: link{ib: true, rateGbps: 200, interval: 5, duration: 2 * h, ber: stable(3e-14),
				burstAt: []float64{70 * m}, burst: 80, burstNoRetrain: true},
		},
		{
			// Two retrains 12 minutes apart on a silent link (altgen
			// ber-ib seed 6, r01n03): each minute with a recovery leaves
			// the series, so two bursts are not a rise.
			name: "infiniband two retrains close together on a silent link are not drift",
			link: link{ib: true, rateGbps: 200, interval: 5, duration: 2 * h, ber: stable(1e-17),
				burstAt: []float64{55*m + 57, 67*m + 30}, burst: 30},
		},
		{
			// A link silent for an hour that starts showing an error a
			// minute: a significant rise above its own history after a
			// handful of errors, though the rate then holds (no growth).
			name: "infiniband step from silence to an error a minute alerts within a few errors",
			link: link{ib: true, rateGbps: 200, interval: 5, duration: 90 * m,
				ber: func(sec float64) float64 {
					if sec < 60*m {
						return 1e-17
					}
					return 1e-13
				}},
			want:  []string{"open"},
			onset: 60 * m, critical: 200 * m, latestDetect: 70 * m,
			check: func(t *testing.T, evs []*schemas.Event) {
				if n := evs[0].Evidence["errors_since_onset"].(float64); n > 12 {
					t.Errorf("%v errors before the alert", n)
				}
			},
		},
		{
			name: "infiniband two retrain bursts on a quiet link are not drift",
			link: link{ib: true, rateGbps: 100, interval: 10, duration: 2 * h, ber: stable(5e-14),
				burstAt: []float64{50 * m, 90 * m}, burst: 40},
		},
		{
			name: "idle ethernet link with a handful of errors is nothing",
			link: link{rateGbps: 0.001, interval: 5, duration: 2 * h, ber: stable(1e-9)},
		},
		{
			name: "saturated symbol_error is blindness, not a clean link and not a drift",
			link: link{ib: true, rateGbps: 200, interval: 5, duration: 2 * h, symbolAt0: 65535,
				ber: drift(1e-15, 1e-12, 30*m, 40*m, 0)},
		},
	}
	// Every Ethernet case again without rx_bits_phy: a PHY receives bits at
	// the line rate, traffic or not, so the same link is the same incident
	// over the rate (the generator's rx_bits_phy counts the line rate too).
	for _, c := range cases[:len(cases):len(cases)] {
		if c.link.ib {
			continue
		}
		c.name += " (no rx_bits_phy)"
		c.link.noBitsPhy = true
		inner := c.check
		c.check = func(t *testing.T, evs []*schemas.Event) {
			for _, ev := range evs {
				if ev.Evidence["bits_source"] != "link_rate_x_interval" || ev.Evidence["measure"] != "rx_corrected_bits_phy / (link rate x interval)" {
					t.Errorf("bits_source %v measure %v", ev.Evidence["bits_source"], ev.Evidence["measure"])
				}
			}
			if inner != nil {
				inner(t, evs)
			}
		}
		cases = append(cases, c)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.link.seed = 11
			det := New()
			hn := detecttest.NewHarness(t, det)
			for _, s := range c.link.samples(detecttest.PortA) {
				hn.Feed(s)
			}
			got := foldUpdates(hn.States())
			if !detecttest.EqualStrings(got, c.want) {
				for _, ev := range hn.Events {
					t.Logf("%s %s %s start %s: %s", ev.State, ev.Severity, ev.DetectedAt, ev.Start, ev.Summary)
				}
				t.Fatalf("states %v, want %v", got, c.want)
			}
			for _, ev := range hn.Events {
				if ev.ID != hn.Events[0].ID || ev.Type != schemas.TypeBERDrift || ev.Layer != "physical" {
					t.Errorf("event %+v", ev)
				}
				if _, err := json.Marshal(ev); err != nil {
					t.Errorf("evidence not JSON: %v", err)
				}
			}
			if c.onset > 0 {
				open := hn.Events[0]
				detected := float64(open.DetectedAt-detecttest.T0) / 1000
				start := float64(open.Start-detecttest.T0) / 1000
				t.Logf("onset %.0fs: estimated %.0fs, detected %.0fs (%.1f min after onset, %.1f min before critical), evidence %v",
					c.onset, start, detected, (detected-c.onset)/60, (c.critical-detected)/60, open.Evidence)
				if detected > c.latestDetect {
					t.Errorf("detected at %.0f s, later than %.0f s", detected, c.latestDetect)
				}
				if math.Abs(start-c.onset) > 10*m && !c.link.ib {
					t.Errorf("onset %.0f s, real %.0f s", start, c.onset)
				}
				if start < c.onset-20*m {
					t.Errorf("onset %.0f s far before the real %.0f s", start, c.onset)
				}
				for _, k := range []string{"slope_decades_per_h", "current_ber", "recent_ber_low", "recent_ber_high"} {
					if _, ok := open.Evidence[k]; !ok {
						t.Errorf("evidence lacks %s", k)
					}
				}
				// A projection, or the reason there is none.
				_, proj := open.Evidence["projected_critical_at"]
				_, mins := open.Evidence["minutes_to_critical"]
				_, why := open.Evidence["projection_withheld"]
				if proj != mins || proj == why {
					t.Errorf("projected_critical_at %v, minutes_to_critical %v, projection_withheld %v: want the first two or the third", proj, mins, why)
				}
			}
			if c.check != nil {
				c.check(t, hn.Events)
			}
		})
	}
}

// foldUpdates drops updates: the tests check the lifecycle, open once and
// resolve once.
func foldUpdates(states []string) []string {
	var out []string
	for _, s := range states {
		if s != "update" {
			out = append(out, s)
		}
	}
	return out
}

func TestBERDriftBlindWhileOpen(t *testing.T) {
	// A drift is open; then symbol_error pins at 65535. The incident must
	// stay open (no resolve: errors are invisible, not gone) and say so.
	const m = 60.0
	det := New()
	hn := detecttest.NewHarness(t, det)
	link := link{ib: true, rateGbps: 200, interval: 5, duration: 150 * m, seed: 3, symbolAt0: 60000,
		ber: drift(1e-15, 1e-12, 40*m, 30*m, 0)}
	for _, s := range link.samples(detecttest.PortA) {
		hn.Feed(s)
	}
	got := foldUpdates(hn.States())
	if !detecttest.EqualStrings(got, []string{"open"}) {
		t.Fatalf("states %v", hn.States())
	}
	last := hn.Events[len(hn.Events)-1]
	if last.Evidence["blind"] != true || last.Evidence["blind_reason"] == nil {
		t.Errorf("the last event does not say blind: %v", last.Evidence)
	}
}

func TestBERDriftPortMemory(t *testing.T) {
	det := New()
	hn := detecttest.NewHarness(t, det)
	link := link{rateGbps: 200, interval: 5, duration: 2 * 3600, ber: stable(1e-8), seed: 1}
	for _, s := range link.samples(detecttest.PortA) {
		hn.Feed(s)
	}
	st, ok := processor.LookupPortLocal[portState](hn.PortStates[detecttest.PortA], schemas.TypeBERDrift)
	if !ok {
		t.Fatal("no state")
	}
	if size := portSize(st); size > 2048 {
		t.Errorf("per-port state %d B", size)
	}
}

func portSize(st *portState) int {
	return int(unsafe.Sizeof(*st)) + len(st.rateText)
}

// BenchmarkBERDrift measures the cost per sample on a healthy fleet:
// go test ./processor -run XXX -bench BERDrift -benchmem
func BenchmarkBERDrift(b *testing.B) {
	link := link{rateGbps: 200, interval: 5, duration: 3 * 3600, noise: 0.3, ber: stable(5e-9), seed: 1}
	samples := link.samples(detecttest.PortA)
	b.ResetTimer()
	det := New()
	port := processor.NewPortState(detecttest.PortA)
	em := processor.EmitterFunc(func(*schemas.Event) {})
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		s := samples[i%len(samples)]
		if i%len(samples) == 0 {
			port = processor.NewPortState(detecttest.PortA)
		}
		det.OnSample(ctx, port, s, em)
		port.Observe(s)
	}
	runtime.KeepAlive(port)
}

// TestBERDriftRates runs many seeds of healthy and drifting links, the way
// the fleet will: it reports recall, false alarms and lead.
// go test ./processor -run BERDriftRates -v
func TestBERDriftRates(t *testing.T) {
	if testing.Short() {
		t.Skip("many seeds")
	}
	const h, m = 3600.0, 60.0
	type kind struct {
		name          string
		drift         bool
		onset, toCrit float64
		mk            func(rng *rand.Rand) link
	}
	logU := func(rng *rand.Rand, lo, hi float64) float64 { return math.Pow(10, lo+(hi-lo)*rng.Float64()) }
	intervals := []float64{1, 2, 5, 10}
	kinds := []kind{
		{name: "healthy eth", mk: func(rng *rand.Rand) link {
			return link{rateGbps: 200, interval: intervals[rng.IntN(4)], duration: 3 * h, noise: 0.3, wander: 0.1 + 0.1*rng.Float64(),
				ber: stable(logU(rng, -12, -7))}
		}},
		{name: "healthy ib", mk: func(rng *rand.Rand) link {
			return link{ib: true, rateGbps: 200, interval: intervals[rng.IntN(4)], duration: 3 * h, wander: 0.3,
				ber: stable(logU(rng, -16, -13))}
		}},
		{name: "drift eth 40m", drift: true, onset: 60 * m, toCrit: 40 * m, mk: func(rng *rand.Rand) link {
			return link{rateGbps: 200, interval: intervals[rng.IntN(4)], duration: 2 * h, noise: 0.3, wander: 0.2,
				ber: drift(logU(rng, -12, -7), 1e-6, 60*m, 40*m, 0)}
		}},
		{name: "drift eth 2h", drift: true, onset: 60 * m, toCrit: 2 * h, mk: func(rng *rand.Rand) link {
			return link{rateGbps: 100, interval: intervals[rng.IntN(4)], duration: 3*h + 10*m, noise: 0.3, wander: 0.2,
				ber: drift(logU(rng, -12, -7), 1e-6, 60*m, 2*h, 0)}
		}},
		{name: "drift ib 40m", drift: true, onset: 60 * m, toCrit: 40 * m, mk: func(rng *rand.Rand) link {
			return link{ib: true, rateGbps: 200, interval: intervals[rng.IntN(4)], duration: 2 * h,
				ber: drift(logU(rng, -16, -14.5), 1e-12, 60*m, 40*m, 0)}
		}},
	}
	// The Ethernet kinds again without rx_bits_phy (bits over the line
	// rate): the same false-alarm and recall bounds hold.
	for _, k := range kinds[:len(kinds):len(kinds)] {
		if strings.Contains(k.name, "eth") {
			mk := k.mk
			k.name += " no-bits"
			k.mk = func(rng *rand.Rand) link {
				l := mk(rng)
				l.noBitsPhy = true
				return l
			}
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		rng := rand.New(rand.NewPCG(99, 1))
		var hits, fps, late int
		var leads []float64
		runs := 20
		for i := range runs {
			l := k.mk(rng)
			l.seed = uint64(i + 1)
			hn := detecttest.NewHarness(t, New())
			for _, s := range l.samples(detecttest.PortA) {
				hn.Feed(s)
			}
			opens := 0
			for _, ev := range hn.Events {
				if ev.State != "open" {
					continue
				}
				opens++
				det := float64(ev.DetectedAt-detecttest.T0) / 1000
				if !k.drift || det < k.onset-2*l.interval || opens > 1 {
					fps++
					t.Logf("%s run %d: false alarm at %.1f min: %s %v", k.name, i, det/60, ev.Summary, ev.Evidence)
					continue
				}
				hits++
				leads = append(leads, (k.onset+k.toCrit-det)/60)
				if det > k.onset+k.toCrit/2 {
					late++
				}
			}
		}
		t.Logf("%-14s runs %d hits %d false %d late(past half-way) %d leads(min) %v", k.name, runs, hits, fps, late, leads)
		if fps > 0 {
			t.Errorf("%s: %d false alarms", k.name, fps)
		}
		if k.drift && hits < runs*19/20 {
			t.Errorf("%s: recall %d/%d", k.name, hits, runs)
		}
	}
}

// TestBERDriftRiseScalesWithDistance: on a continuous counter a 2-3x
// wander far from critical is not a drift; the rise asked for shrinks as
// the link nears critical, so a one-decade drift is still caught early.
func TestBERDriftRiseScalesWithDistance(t *testing.T) {
	d := New()
	tests := []struct {
		base, want float64
	}{
		{5e-10, 4},   // far: capped at MinRiseBusy
		{5e-9, 4},    // 2.3 decades: 200^0.35 = 6.4, capped
		{1e-7, 2.5},  // one decade: 10^0.35 = 2.24, below the floor
		{3e-8, 3.41}, // 1.5 decades: 33^0.35
		{5e-7, 2.5},  // close: the floor
	}
	for _, tc := range tests {
		got := d.busyMinRise(tc.base, schemas.CriticalPreFECBER)
		if math.Abs(got-tc.want) > 0.01 {
			t.Errorf("base %g: rise %v, want %v", tc.base, got, tc.want)
		}
	}
}

// TestBERDriftPostFECOnly: a port without rx_corrected_bits_phy (no PHY
// statistics group, or no FEC) and without rx_bits_phy still shows the
// symbol errors FEC left (rx_symbol_err_phy) and the frames dropped for
// them (rx_crc_errors_phy). The same fit judges them against the post-FEC
// critical level; a drift there loses frames already, and says so.
func TestBERDriftPostFECOnly(t *testing.T) {
	const h, m = 3600.0, 60.0
	cases := []struct {
		name         string
		link         link
		want         []string
		latestDetect float64
	}{
		{"post-FEC errors rising from silence: a drift that already loses frames",
			link{rateGbps: 200, interval: 5, duration: 2 * h, ber: drift(1e-15, 1e-12, 50*m, 40*m, 0)},
			[]string{"open"}, 84 * m},
		{"steady post-FEC errors (a few an hour) are not drift",
			link{rateGbps: 100, interval: 5, duration: 3 * h, ber: stable(3e-14)}, nil, 0},
		{"a flap's burst of post-FEC errors is not drift (link_down_events_phy)",
			link{rateGbps: 100, interval: 5, duration: 2 * h, ber: stable(3e-15), burstAt: []float64{70 * m}, burst: 80}, nil, 0},
		{"resets, restarts and glitches with rare post-FEC errors are nothing",
			link{rateGbps: 100, interval: 5, duration: 2 * h, ber: stable(3e-15),
				restartAt: []float64{20 * m}, resetAt: []float64{40 * m}, glitchAt: []float64{30 * m, 70 * m}}, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.link.seed, c.link.postFECOnly, c.link.noBitsPhy = 5, true, true
			hn := detecttest.NewHarness(t, New())
			for _, s := range c.link.samples(detecttest.PortA) {
				hn.Feed(s)
			}
			got := foldUpdates(hn.States())
			if !detecttest.EqualStrings(got, c.want) {
				for _, ev := range hn.Events {
					t.Logf("%s %s %s: %s %v", ev.State, ev.Severity, ev.DetectedAt, ev.Summary, ev.Evidence)
				}
				t.Fatalf("states %v, want %v", got, c.want)
			}
			if len(hn.Events) == 0 {
				return
			}
			open := hn.Events[0]
			t.Logf("%s %s: %s %v", open.DetectedAt, open.Severity, open.Summary, open.Evidence)
			if float64(open.DetectedAt-detecttest.T0)/1000 > c.latestDetect {
				t.Errorf("detected at %s", open.DetectedAt)
			}
			ev := open.Evidence
			if ev["post_fec_only"] != true || ev["critical_ber"] != schemas.CriticalPostFECBER || ev["bits_source"] != "link_rate_x_interval" ||
				ev["measure"] != "rx_symbol_err_phy / (link rate x interval)" || ev["rx_crc_errors_per_s"] == nil || ev["frames_lost_after_fec_share"] == nil {
				t.Errorf("evidence %v", ev)
			}
			if !strings.Contains(open.Summary, "post-FEC symbol BER") || !strings.Contains(open.Summary, "frames are being lost") {
				t.Errorf("summary %q", open.Summary)
			}
			last := hn.Events[len(hn.Events)-1]
			if last.Severity != schemas.SeverityCritical || last.Evidence["frames_lost_after_fec"] != true {
				t.Errorf("frames lost after FEC, yet %s: %v", last.Severity, last.Evidence)
			}
		})
	}
}

// TestBERDriftLineRateJobs: over the line rate the bits are the same every
// minute, busy or idle. Were a PHY to count its corrected bits only in
// frames (RS-FEC corrects idles too, so it does not), a link's BER would
// seem to follow its jobs: 5x between idle and busy blocks of 5 to 30
// minutes. That is wander, not drift: the quasi-Poisson dispersion and the
// still-rising test keep it quiet, on many seeds.
func TestBERDriftLineRateJobs(t *testing.T) {
	const h, m = 3600.0, 60.0
	for seed := uint64(1); seed <= 12; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		var edges []float64
		for at := 0.0; at < 4*h; at += (5 + 25*rng.Float64()) * m {
			edges = append(edges, at)
		}
		base := math.Pow(10, -11+3*rng.Float64())
		jobs := func(sec float64) float64 {
			busy := false
			for _, e := range edges {
				if sec >= e {
					busy = !busy
				}
			}
			if busy {
				return base
			}
			return base / 5
		}
		l := link{rateGbps: 100, interval: []float64{1, 5, 10}[seed%3], duration: 4 * h, noise: 0.3, ber: jobs, noBitsPhy: true, seed: seed}
		hn := detecttest.NewHarness(t, New())
		for _, s := range l.samples(detecttest.PortA) {
			hn.Feed(s)
		}
		for _, ev := range hn.Events {
			if ev.State == schemas.StateOpen {
				t.Errorf("seed %d base %.2g: %s %s %v", seed, base, ev.DetectedAt, ev.Summary, ev.Evidence)
			}
		}
	}
}

// accelerating is a BER that is base until onset, then rises with ln BER =
// ln base + b(e^{(t-onset)/tau} - 1) to critical in toCritical: the slope of
// ln BER grows e-fold every tau, so the doubling time shrinks as the optic
// fails (with tau = toCritical/3 it is 20 times shorter at the crossing than
// at the onset).
func accelerating(base, critical, onset, toCritical, tau float64) func(float64) float64 {
	b := math.Log(critical/base) / math.Expm1(toCritical/tau)
	return func(sec float64) float64 {
		if sec < onset {
			return base
		}
		return min(base*math.Exp(b*math.Expm1((sec-onset)/tau)), 100*critical)
	}
}

func crit(ib bool) float64 {
	if ib {
		return schemas.CriticalSymbolBER
	}
	return schemas.CriticalPreFECBER
}

// TestBERDriftProjection: at every revision at least 2 minutes before the
// true crossing, projected_critical_at is within 20 % of the time left, on
// log-linear and on accelerating ramps; once crossed it is the observed
// crossing (within 2 minutes of the true one) and never moves; the
// baseline and the onset are those of the open; errors_since_onset is a
// whole number. A projection not known to 20 % is withheld (with its
// reason); every published one is held to 20 % but the noisy accelerating
// optic's, which is measured (see below). The log sums the
// errors per family:
// go test ./processor -run BERDriftProjection -v
func TestBERDriftProjection(t *testing.T) {
	const m = 60.0
	type ramp struct {
		name          string
		ib, accel     bool
		rate          float64
		ber           func(float64) float64
		onset, toCrit float64
		noise         float64 // sigma of ln BER per reading, on top of Poisson
	}
	const onset = 60 * m
	ramps := []ramp{
		{name: "eth log-linear 1e-8, 40 min", rate: 200, ber: drift(1e-8, 1e-6, onset, 40*m, 0), toCrit: 40 * m},
		{name: "eth log-linear 1e-9, 90 min", rate: 200, ber: drift(1e-9, 1e-6, onset, 90*m, 0), toCrit: 90 * m},
		{name: "eth log-linear 1e-7, 2 h", rate: 100, ber: drift(1e-7, 1e-6, onset, 120*m, 0), toCrit: 120 * m},
		{name: "eth accelerating 5e-9, 40 min, tau 20 min", accel: true, rate: 200, ber: accelerating(5e-9, 1e-6, onset, 40*m, 20*m), toCrit: 40 * m},
		{name: "eth accelerating 5e-9, 40 min, tau 13 min", accel: true, rate: 200, ber: accelerating(5e-9, 1e-6, onset, 40*m, 40*m/3), toCrit: 40 * m},
		{name: "eth accelerating 1e-8, 90 min, tau 30 min", accel: true, rate: 100, ber: accelerating(1e-8, 1e-6, onset, 90*m, 30*m), toCrit: 90 * m},
		{name: "ib log-linear 1e-15, 40 min", ib: true, rate: 200, ber: drift(1e-15, 1e-12, onset, 40*m, 0), toCrit: 40 * m},
		{name: "ib accelerating 1e-15, 60 min, tau 20 min", ib: true, accel: true, rate: 200, ber: accelerating(1e-15, 1e-12, onset, 60*m, 20*m), toCrit: 60 * m},
	}
	// The Ethernet ramps again with a real optic's reading noise on top
	// of Poisson (ln BER sigma 0.3 per reading, as in TestBERDrift): the
	// crossing and the fixed figures are held, the projection measured.
	for _, r := range ramps[:len(ramps):len(ramps)] {
		if !r.ib {
			r.name += ", noise 0.3"
			r.noise = 0.3
			ramps = append(ramps, r)
		}
	}
	type family struct {
		n, withheld int
		sum, worst  float64
	}
	fams := map[string]*family{}
	for _, r := range ramps {
		for _, interval := range []float64{1, 5, 10} {
			for _, noBits := range []bool{false, true} {
				if r.ib && noBits {
					continue
				}
				name := fmt.Sprintf("%s at %gs", r.name, interval)
				if noBits {
					name += " (no rx_bits_phy)"
				}
				t.Run(name, func(t *testing.T) {
					l := link{ib: r.ib, rateGbps: r.rate, interval: interval, duration: onset + r.toCrit + 20*m,
						noise: r.noise, ber: r.ber, noBitsPhy: noBits, seed: 17}
					hn := detecttest.NewHarness(t, New())
					for _, s := range l.samples(detecttest.PortA) {
						hn.Feed(s)
					}
					if len(hn.Events) == 0 || hn.Events[0].State != schemas.StateOpen {
						t.Fatalf("no open: %v", hn.States())
					}
					// The generator's noise is lognormal around ber(t), so
					// the errors come at its mean, ber(t) e^{sigma^2/2}: that
					// is the BER the counters can see cross (2.3 minutes
					// before the median on the 2-hour ramp).
					lift := math.Exp(l.noise * l.noise / 2)
					lo, hi := onset, onset+r.toCrit
					for hi-lo > 0.01 {
						if mid := (lo + hi) / 2; r.ber(mid)*lift >= crit(r.ib) {
							hi = mid
						} else {
							lo = mid
						}
					}
					truth := hi
					open := hn.Events[0]
					var crossedAt string
					for _, ev := range hn.Events {
						if ev.State == schemas.StateResolved {
							continue
						}
						det := float64(ev.DetectedAt-detecttest.T0) / 1000
						fam := "log-linear"
						if r.accel {
							fam = "accelerating"
						}
						if r.ib {
							fam = "ib " + fam
						}
						if r.noise > 0 {
							fam += ", noise"
						}
						f := fams[fam]
						if f == nil {
							f = &family{}
							fams[fam] = f
						}
						pas, ok := ev.Evidence["projected_critical_at"].(string)
						if !ok {
							if crossedAt != "" || ev.Evidence["projection_withheld"] == nil {
								t.Errorf("%s at %.1f min: no projection and no reason: %v", ev.State, det/m, ev.Evidence)
							}
							if truth-det >= 2*m {
								f.withheld++
							}
							t.Logf("%s at %.1f min: withheld (%v), truth %.1f", ev.State, det/m, ev.Evidence["projection_withheld"], truth/m)
							continue
						}
						pa, err := time.Parse(time.RFC3339Nano, pas)
						if err != nil {
							t.Fatal(err)
						}
						proj := float64(schemas.MillisOf(pa)-detecttest.T0) / 1000
						left := truth - det
						crossed := ev.Evidence["critical_crossed"] == true
						t.Logf("%s at %.1f min: projected %.1f min (truth %.1f), left %.1f min, error %+.0f%%, se %v min, model %v, crossed %v, onset %v lr %v",
							ev.State, det/m, proj/m, truth/m, left/m, 100*(proj-truth)/left, ev.Evidence["minutes_to_critical_se"], ev.Evidence["projection_model"], crossed, ev.Evidence["onset_estimate"], ev.Evidence["acceleration_lr"])
						switch {
						case crossed:
							if crossedAt == "" {
								crossedAt = ev.Evidence["projected_critical_at"].(string)
								if math.Abs(proj-truth) > 2*m {
									t.Errorf("observed crossing %.1f min, truth %.1f min", proj/m, truth/m)
								}
							} else if ev.Evidence["projected_critical_at"] != crossedAt {
								t.Errorf("the crossing moved from %s to %s", crossedAt, ev.Evidence["projected_critical_at"])
							}
						case crossedAt != "":
							t.Errorf("crossed, then not: %v", ev.Evidence)
						case left >= 2*m:
							e := math.Abs(proj-truth) / left
							f.n++
							f.sum += e
							f.worst = max(f.worst, e)
							// Every published projection is held to 20 %
							// but the noisy accelerating optic's, which is
							// measured: the bend of its ramp is under the
							// per-minute noise for its first 20 minutes,
							// and a few revisions (about 1 in 12) miss.
							// InfiniBand's are withheld: its counter shows
							// a handful of errors before the crossing.
							if e > 0.2 && !(r.noise > 0 && r.accel) {
								t.Errorf("revision at %.1f min projects %.1f min, truth %.1f: off by %.0f%% of the %.1f min left",
									det/m, proj/m, truth/m, 100*e, left/m)
							}
						}
						for _, k := range []string{"baseline_ber", "onset_estimate"} {
							if ev.Evidence[k] != open.Evidence[k] {
								t.Errorf("%s moved from %v to %v", k, open.Evidence[k], ev.Evidence[k])
							}
						}
						if n, ok := ev.Evidence["errors_since_onset"].(float64); !ok || n != math.Round(n) {
							t.Errorf("errors_since_onset %v", ev.Evidence["errors_since_onset"])
						}
					}
					if crossedAt == "" {
						t.Errorf("never crossed, though the BER did at %.1f min", truth/m)
					}
				})
			}
		}
	}
	for _, name := range []string{"log-linear", "accelerating", "log-linear, noise", "accelerating, noise", "ib log-linear", "ib accelerating"} {
		if f := fams[name]; f != nil {
			t.Logf("%-19s revisions %3d with a projection: mean |error| %.1f%% of the time left, worst %.1f%%; %d withheld", name, f.n, 100*f.sum/max(1, float64(f.n)), 100*f.worst, f.withheld)
		}
	}
}

func TestSig4(t *testing.T) {
	if got, want := sig4(1.234567e-9), 1.235e-9; got != want && math.Abs(got-want) > 1e-12*want {
		t.Errorf("sig4(1.234567e-9) = %v, want %v", got, want)
	}
}
