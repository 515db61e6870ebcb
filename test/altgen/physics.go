package altgen

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Physics is a fabric's physical constants. The sweep should measure the
// detectors over a distribution of fabrics, not over the one altgen was
// written with, so with Config.RandomPhysics every generated fabric draws
// its own from the ranges below (physicsRanges, one table, also in the
// README); without it (the default) the historical constants hold and a
// seed's trace stays byte-identical to what it was before the physics
// could be drawn (the committed alt-* scenarios and testdata regressions).
//
// Ranges, from issue 26: out-of-sequence packets per lost packet 1 to 40
// (Go-Back-N resends what was in flight: bandwidth-delay product and message
// size decide); loss of a lossy link 1e-6 to 1e-3 of packets (a labelled
// fault never below 1e-6, the incident threshold, sustained at
// least 2 minutes on a port whose own history is quiet; an unlabelled
// 1e-7 loss elsewhere is noise); background reordering from adaptive
// routing 0 to 1e-5 per packet, scaling with traffic, on some ports.
type Physics struct {
	// Fixed: the historical constants; every other field is ignored and
	// the generator runs the code paths it always ran.
	Fixed bool
	// EthRates and IBRates are the link rates a fabric's RoCE and IB
	// ports draw from (a fabric is built of one or two generations).
	EthRates, IBRates []LinkRate
	// EthBERLo..EthBERHi: a healthy RoCE port's pre-FEC BER, log-uniform
	// per port (the fabric's decade inside 1e-9..1e-7).
	EthBERLo, EthBERHi float64
	// IBBERLo..IBBERHi: a healthy IB port's symbol BER, log-uniform per
	// port.
	IBBERLo, IBBERHi float64
	// Ramp is the shape of a BER drift (an optic failing).
	Ramp RampShape
	// OOSPerLoss is out_of_sequence per lost packet at the receiver.
	OOSPerLoss float64
	// LossLo..LossHi: a labelled lossy link's lost share, log-uniform.
	LossLo, LossHi float64
	// SubThresholdLoss is the lost share of one unlabelled lossy port
	// (noise below the incident threshold); 0: none.
	SubThresholdLoss float64
	// ReorderShare of the RoCE ports have adaptive-routing reordering, up
	// to ReorderMax per received packet (log-uniform per port from
	// ReorderMax/100), scaled by the leaf's load; the others none.
	ReorderShare, ReorderMax float64
	// Utilisation scales every port's traffic (1: the historical level).
	Utilisation float64
	// JitterSec is the sd of a reading's delay past its tick; LateProb the
	// chance a busy host reads a good share of an interval late.
	JitterSec, LateProb float64
	// NIC is the profile the hosts' driver lists (nic.go), used when
	// Config.NIC is empty.
	NIC string
}

// LinkRate is a port speed with its sysfs rate text (the lane count in it
// decides which rx_err_lane_<n>_phy count errors).
type LinkRate struct {
	Gbps  float64
	Text  string
	Lanes int
}

// RampShape is how a drifting BER rises: log-linear, doubling every
// Doubling; or accelerating, each doubling taking Shrink times the one
// before (the optic fails faster as it fails). Zero Doubling: the
// historical power-law ramp (Fault.Ramp, Fault.Shape).
type RampShape struct {
	Accelerating bool
	Doubling     time.Duration // the first doubling time
	Shrink       float64       // accelerating: factor per doubling (<1)
}

// physicsRanges is the one table of ranges a drawn Physics respects
// (README, "Randomised physics"); TestDrawPhysics checks it.
var physicsRanges = struct {
	EthRates, IBRates          []LinkRate
	EthBER, IBBER              [2]float64 // per-port baseline, log-uniform
	EthBERDecade               float64    // a fabric's ports span one decade
	IBBERDecades               float64
	DoublingMin, DoublingMax   time.Duration
	ShrinkMin, ShrinkMax       float64
	AcceleratingShare          float64
	OOSPerLoss                 [2]float64
	Loss                       [2]float64 // labelled lossy link, log-uniform
	SubThresholdLoss           float64
	ReorderShare, ReorderMax   [2]float64
	Utilisation                [2]float64
	JitterSec, LateProb        [2]float64
	LabelledLossMin            float64
	LabelledLossMinDur         time.Duration
	CriticalEth, CriticalIB    float64
	BERCeilingOverCritical     float64
	RoomAfterCritical          time.Duration
	SubThresholdMin, SubThrMax time.Duration
}{
	EthRates: []LinkRate{
		{25, "25 Gb/sec (1X EDR)", 1}, {50, "50 Gb/sec (2X EDR)", 2}, {50, "50 Gb/sec (1X HDR)", 1},
		{100, "100 Gb/sec (4X EDR)", 4}, {100, "100 Gb/sec (2X HDR)", 2}, {200, "200 Gb/sec (4X HDR)", 4},
		{400, "400 Gb/sec (4X NDR)", 4},
	},
	IBRates: []LinkRate{
		{100, "100 Gb/sec (4X EDR)", 4}, {100, "100 Gb/sec (2X HDR)", 2}, {200, "200 Gb/sec (4X HDR)", 4},
		{400, "400 Gb/sec (4X NDR)", 4},
	},
	EthBER: [2]float64{1e-9, 1e-7}, EthBERDecade: 10,
	IBBER: [2]float64{1e-18, 1e-15}, IBBERDecades: 100,
	DoublingMin: 3 * time.Minute, DoublingMax: 30 * time.Minute,
	ShrinkMin: 0.6, ShrinkMax: 0.95, AcceleratingShare: 0.5,
	OOSPerLoss:       [2]float64{1, 40},
	Loss:             [2]float64{1e-6, 1e-3},
	SubThresholdLoss: 1e-7,
	ReorderShare:     [2]float64{0, 0.6}, ReorderMax: [2]float64{1e-7, 1e-5},
	Utilisation: [2]float64{0.3, 1.6},
	JitterSec:   [2]float64{0.005, 0.2}, LateProb: [2]float64{0, 0.05},
	LabelledLossMin: 1e-6, LabelledLossMinDur: 2 * time.Minute,
	CriticalEth: 1e-6, CriticalIB: 1e-12, BERCeilingOverCritical: 1e3,
	RoomAfterCritical: 5 * time.Minute,
	SubThresholdMin:   5 * time.Minute, SubThrMax: 15 * time.Minute,
}

// FixedPhysics is the historical model.
func FixedPhysics() Physics { return Physics{Fixed: true} }

// DrawPhysics draws a fabric's physics from the ranges of physicsRanges,
// from seed and the fabric's name (a preset's fabric is "alt-<preset>", so
// the sweep gets one physics per preset and seed). Its own random source:
// the draw disturbs nothing else of the trace.
func DrawPhysics(seed uint64, fabric string) Physics {
	h := fnv.New64a()
	h.Write([]byte(fabric))
	r := rand.New(rand.NewPCG(seed^0x7068797369637321, h.Sum64()))
	R := physicsRanges
	logU := func(lo, hi float64) float64 { return math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo))) }
	uni := func(lo, hi float64) float64 { return lo + r.Float64()*(hi-lo) }
	rates := func(all []LinkRate) []LinkRate {
		// One generation, sometimes a second one next to it.
		i := r.IntN(len(all))
		out := []LinkRate{all[i]}
		if r.Float64() < 0.3 && i+1 < len(all) {
			out = append(out, all[i+1])
		}
		return out
	}
	ph := Physics{}
	ph.EthRates = rates(R.EthRates)
	ph.IBRates = rates(R.IBRates)
	ph.EthBERLo = logU(R.EthBER[0], R.EthBER[1]/R.EthBERDecade)
	ph.EthBERHi = ph.EthBERLo * R.EthBERDecade
	ph.IBBERLo = logU(R.IBBER[0], R.IBBER[1]/R.IBBERDecades)
	ph.IBBERHi = ph.IBBERLo * R.IBBERDecades
	ph.Ramp.Doubling = time.Duration(logU(R.DoublingMin.Seconds(), R.DoublingMax.Seconds()) * float64(time.Second)).Round(time.Second)
	if r.Float64() < R.AcceleratingShare {
		ph.Ramp.Accelerating = true
		ph.Ramp.Shrink = uni(R.ShrinkMin, R.ShrinkMax)
	}
	ph.OOSPerLoss = uni(R.OOSPerLoss[0], R.OOSPerLoss[1])
	ph.LossLo, ph.LossHi = R.Loss[0], R.Loss[1]
	ph.SubThresholdLoss = R.SubThresholdLoss
	ph.ReorderShare = uni(R.ReorderShare[0], R.ReorderShare[1])
	ph.ReorderMax = logU(R.ReorderMax[0], R.ReorderMax[1])
	ph.Utilisation = logU(R.Utilisation[0], R.Utilisation[1])
	ph.JitterSec = logU(R.JitterSec[0], R.JitterSec[1])
	ph.LateProb = uni(R.LateProb[0], R.LateProb[1])
	ph.NIC = NICs[r.IntN(len(NICs))]
	return ph
}

// physics returns the trace's physics and its per-port random source
// (nil under fixed physics: the historical draws are g.r's).
func (g *gen) physicsSource() *rand.Rand {
	if g.rPhys == nil {
		g.rPhys = rand.New(rand.NewPCG(g.cfg.Seed^0x70687973, 0x706f7274))
	}
	return g.rPhys
}

// drawn reports whether the trace runs drawn physics.
func (g *gen) drawn() bool { return !g.ph.Fixed }

// portBER draws a healthy port's baseline BER from the fabric's range.
func (g *gen) portBER(ib bool) float64 {
	r := g.physicsSource()
	lo, hi := g.ph.EthBERLo, g.ph.EthBERHi
	if ib {
		lo, hi = g.ph.IBBERLo, g.ph.IBBERHi
	}
	return math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo)))
}

// driftRamp is a drawn drift's ramp on a port whose BER is base at the
// onset: the ramp and its time to critical. The time to critical follows
// from the shape and the doublings from base to critical; when it would
// fall later than room (the trace's end less RoomAfterCritical, so the
// crossing and what follows it are in the trace), the first doubling time
// shrinks to fit, down to DoublingMin, and then the ramp accelerates as
// much as it takes (Shrink down to ShrinkMin): an optic that fails within
// the trace fails fast.
func driftRamp(rs RampShape, base, crit float64, room time.Duration) (RampShape, time.Duration) {
	R := physicsRanges
	n := math.Log2(crit / base)
	if n < 1 {
		n = 1
	}
	toCrit := func(rs RampShape) time.Duration {
		if !rs.Accelerating {
			return time.Duration(n * float64(rs.Doubling))
		}
		return time.Duration(float64(rs.Doubling) * (1 - math.Pow(rs.Shrink, n)) / (1 - rs.Shrink))
	}
	if room > 0 && toCrit(rs) > room {
		rs.Doubling = max(R.DoublingMin, time.Duration(float64(rs.Doubling)*float64(room)/float64(toCrit(rs))))
		if toCrit(rs) > room {
			if !rs.Accelerating {
				rs.Accelerating, rs.Shrink = true, R.ShrinkMax
			}
			for rs.Shrink > R.ShrinkMin && toCrit(rs) > room {
				rs.Shrink = math.Max(R.ShrinkMin, rs.Shrink-0.01)
			}
		}
	}
	return rs, toCrit(rs).Round(time.Second)
}

// doublings is how many times a drawn drift has doubled the BER after
// elapsed seconds.
func doublings(rs RampShape, elapsed float64) float64 {
	td := rs.Doubling.Seconds()
	if !rs.Accelerating {
		return elapsed / td
	}
	// T(n) = td (1 - k^n) / (1 - k), so n(t) = ln(1 - t(1-k)/td) / ln k,
	// without end as t reaches td/(1-k): the BER ceiling takes over.
	k := rs.Shrink
	x := 1 - elapsed*(1-k)/td
	if x <= 1e-9 {
		return 1e9
	}
	return math.Log(x) / math.Log(k)
}

// driftLnBER is ln BER of a drawn drift at t seconds (from the trace
// start): from the port's baseline, doubling as its shape says, up to
// BERCeilingOverCritical times critical (the link is all but down).
func driftLnBER(d *Fault, base, crit, t float64) float64 {
	ln := math.Log(base) + doublings(d.Drawn, t-d.At.Seconds())*math.Ln2
	return math.Min(ln, math.Log(crit*physicsRanges.BERCeilingOverCritical))
}

// drawRamp gives a BER drift on p its drawn ramp (nothing under fixed
// physics): from p's baseline BER, as the fabric's ramp shape says; f.Ramp
// becomes the time to critical it implies, so the label's critical_at is
// when the drawn physics crosses critical.
func (g *gen) drawRamp(p *port, f *Fault) {
	if !g.drawn() {
		return
	}
	crit := physicsRanges.CriticalEth
	if p.ib {
		crit = physicsRanges.CriticalIB
	}
	room := g.cfg.Duration - f.At - physicsRanges.RoomAfterCritical
	f.Drawn, f.Ramp = driftRamp(g.ph.Ramp, p.baseBER, crit, room)
	p.driftBase = p.baseBER
}

// oosPerLoss is out_of_sequence per lost packet.
func (g *gen) oosPerLoss() float64 {
	if g.drawn() {
		return g.ph.OOSPerLoss
	}
	return 30
}

// lossyBusy is the utilisation a lossy link carries under drawn physics:
// a share of received packets lost only shows when packets are received,
// and the incident is a share of them, so the link's job keeps it
// busy while it loses.
const lossyBusy = 0.3

// planSubThreshold is drawn physics' noise below the incident threshold:
// one RoCE port without a fault loses SubThresholdLoss of what it receives
// for 5 to 15 minutes, with the out-of-sequence packets and NAKs that go
// with it, and no label. Its own random source.
func (g *gen) planSubThreshold(usedNodes map[string]bool, used map[*port]bool) {
	if !g.drawn() || g.ph.SubThresholdLoss <= 0 {
		return
	}
	r := g.physicsSource()
	var c []*port
	for _, p := range g.ports {
		if !p.ib && p.hwOK && p.ethOK && !used[p] && !usedNodes[p.node] {
			c = append(c, p)
		}
	}
	if len(c) == 0 {
		return
	}
	p := c[r.IntN(len(c))]
	used[p], usedNodes[p.node] = true, true
	var peers []*port
	for _, q := range g.ports {
		if q != p && !q.ib && q.hwOK && q.node != p.node {
			peers = append(peers, q)
		}
	}
	r.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
	p.app.lossPeers = peers[:min(2+r.IntN(3), len(peers))]
	R := physicsRanges
	dur := g.cfg.Duration.Seconds()
	d := R.SubThresholdMin.Seconds() + r.Float64()*(R.SubThrMax-R.SubThresholdMin).Seconds()
	at := 120 + r.Float64()*math.Max(0, dur-d-240)
	g.at(at, "loss", p, nil, g.ph.SubThresholdLoss)
	g.at(at+d, "loss", p, nil, 0)
}

// PhysicsOf is the physics a Config generates with and the NIC profile its
// hosts list ("" is full).
func PhysicsOf(cfg Config) (Physics, string) { return cfg.physics() }

// String is a one-line summary for sweep logs.
func (ph Physics) String() string {
	if ph.Fixed {
		return "fixed"
	}
	rates := func(rs []LinkRate) string {
		var s []string
		for _, r := range rs {
			s = append(s, fmt.Sprintf("%gG/%dx", r.Gbps, r.Lanes))
		}
		return strings.Join(s, "+")
	}
	ramp := fmt.Sprintf("log-linear Td %s", ph.Ramp.Doubling)
	if ph.Ramp.Accelerating {
		ramp = fmt.Sprintf("accelerating Td0 %s x%.2f", ph.Ramp.Doubling, ph.Ramp.Shrink)
	}
	return fmt.Sprintf("eth %s ib %s, BER %.1e..%.1e, IB sym %.1e..%.1e, %s, oos/loss %.1f, reorder %.0f%% up to %.1e, util x%.2f, jitter %.3fs late %.1f%%, nic %s",
		rates(ph.EthRates), rates(ph.IBRates), ph.EthBERLo, ph.EthBERHi, ph.IBBERLo, ph.IBBERHi, ramp, ph.OOSPerLoss,
		100*ph.ReorderShare, ph.ReorderMax, ph.Utilisation, ph.JitterSec, 100*ph.LateProb, ph.NIC)
}
