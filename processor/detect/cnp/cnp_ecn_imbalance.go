// Package cnp is the cnp_ecn_imbalance detector (layer link_network):
// RoCE congestion control broken between the ECN marks the switches set
// and the rate cuts the senders make, per port and fabric-wide (Detector).
// It registers itself with processor.Register; processor/detect/all links
// it in.
package cnp

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func init() {
	processor.Register(schemas.TypeCNPECNImbalance, func() processor.Detector { return New() })
}

// Detector raises cnp_ecn_imbalance (layer link_network) when RoCE
// congestion control (DCQCN) is broken between the ECN marks the switches
// set and the rate cuts the senders make. Three faults, one type:
//
//   - Notification point disabled (port scope): the port receives
//     ECN-marked packets (np_ecn_marked_roce_packets) and sends no CNPs
//     (np_cnp_sent). CNPs are rate-limited (one per QP per ~50 µs), so
//     sent < marked is normal, but a port that gets hundreds of marks a
//     minute and answers almost none has ECN reaction off for the RoCE
//     priority. A trickle of marks is no evidence: the window needs
//     MinMarked marks at MinMarkedPerS before it says anything.
//   - Reaction point ignoring CNPs (port scope): rp_cnp_ignored rises. With
//     congestion control on it stays flat (NVIDIA's counter reference), so a
//     sustained rise (MinIgnored in a window, a MinIgnoredFraction of the
//     CNPs the port received, in at least 3 and a third of the readings) is
//     a misconfigured RP.
//   - CNPs lost in the network (fabric scope, subject {}): over a window,
//     the CNPs every notification point sent, Σ np_cnp_sent, should reach
//     the reaction points, Σ (rp_cnp_handled + rp_cnp_ignored). A persistent
//     gap means the CNPs are dropped or sent on a lossy priority. See
//     evalFabric for how resets, restarts, gaps and silent nodes are kept
//     from looking like loss.
//
// Every figure is a sum over clean intervals only: a baseline (FlagFirst), a
// reset (FlagReset: the delta counts from an unknown moment), a held read
// glitch (FlagHeld) or a missing key makes the interval unknown, and the next
// interval too for the counter whose delta then spans two readings. The
// counters are 32-bit and wrap; the collector already unwrapped them.
//
// A port keeps a few 10 s buckets of each figure (processor.Buckets, about
// 1 KiB), two rates and two shares: well inside the 8 KiB per-port budget.
//
// A port finding also carries the port's port_xmit_wait: the ticks in which
// it had data to send and sent nothing (no credits on InfiniBand, paused on
// Ethernet). A reaction point that ignores CNPs keeps sending into the
// congestion, and its transmit waits; a port whose notification point is
// silent gets no relief from its senders. The counter is a 32-bit
// PortCounters counter that saturates (schemas.Sat32): a pinned reading says
// nothing and is left out. What a tick lasts is the device's own (IBA
// PortSamplesControl.Tick: 1 to 256 symbol times, the time one byte takes on
// a lane, 4 ns at SDR; NVIDIA's ibdiagnet manual, "Congestion Assessment on
// InfiniBand Links", warns that the increment differs between device
// generations, and `perfquery -c` shows a device's tick), so the evidence
// gives ticks per second, and a share of the window only when XmitWaitTick
// is configured.
//
// InfiniBand ports have no notification or reaction point counters
// (InfiniBand congestion control, FECN/BECN, is counted in the switches'
// and HCAs' congestion control MADs, not in sysfs), so the detector keeps
// no state for them and raises nothing there.
//
// One incident per port, and one for the fabric: a port incident opens when
// the condition held for OpenAfter, updates when a second kind joins or the
// figures move (at most every MinUpdateInterval), and resolves after the
// port showed healthy figures for ResolveAfter, or had no congestion to
// judge by for IdleResolveAfter.
type Detector struct {
	// Window is the per-port window the conditions are judged on; default
	// 60 s (6 readings at the longest 10 s interval).
	Window time.Duration
	// MinMarked and MinMarkedPerS: the marks a window needs before a missing
	// CNP means anything; defaults 600 and 5/s.
	MinMarked     float64
	MinMarkedPerS float64
	// MaxNPRatio is the largest np_cnp_sent/np_ecn_marked ratio that still
	// means "no CNPs"; default 0.005. Healthy DCQCN answers a few percent of
	// marks at the very least, even when it coalesces hard.
	MaxNPRatio float64
	// MinIgnored, MinIgnoredPerS and MinIgnoredFraction: how much
	// rp_cnp_ignored must rise in a window; defaults 200, 2/s and 0.05.
	MinIgnored         float64
	MinIgnoredPerS     float64
	MinIgnoredFraction float64
	// OpenAfter, ResolveAfter, IdleResolveAfter, MinUpdateInterval and
	// SilentResolveAfter are the port incident policy; defaults 40 s, 2 min,
	// 30 min, 5 min, 30 min.
	OpenAfter          time.Duration
	ResolveAfter       time.Duration
	IdleResolveAfter   time.Duration
	MinUpdateInterval  time.Duration
	SilentResolveAfter time.Duration

	// Fabric enables the fabric-wide CNP balance; default true. It runs only
	// while FabricView.Complete() says the processor sees every partition.
	Fabric bool
	// FabricWindow is the balance window; default 60 s. FabricHoldback is
	// how far behind the watermark the window ends, so that every port's
	// next reading (intervals up to 10 s) has arrived; default 10 s.
	FabricWindow   time.Duration
	FabricHoldback time.Duration
	// MinGap is the smallest lost share of CNPs that opens an incident,
	// after the unknown share is subtracted; default 0.2.
	MinGap float64
	// FabricSigmas and MinFabricLost say when a window's lost CNPs are more
	// than the noise of its counts: the lost CNPs (after the unknown
	// allowance) must reach FabricSigmas·√sent and MinFabricLost, besides
	// MinGap of the sent CNPs; defaults 5 and 100. A window with fewer sent
	// CNPs than MinFabricLost shows nothing, loss or balance. A fixed count
	// would miss the loss under a light load, when a minute carries a few
	// hundred CNPs. See evalFabric.
	FabricSigmas  float64
	MinFabricLost float64
	// BalanceSigmas: a window whose CNPs differ by more than the tolerance
	// still balances if they differ by at most BalanceSigmas·√sent, the
	// noise of a light window's counts; default 2. Narrower than the loss
	// test on purpose: at a few hundred CNPs a minute, FabricSigmas·√sent is
	// a quarter of them, and the steady gap of unmonitored endpoints would
	// pass for balance there.
	BalanceSigmas float64
	// BalanceTolerance and BalancedEvaluations: before any gap counts, the
	// fabric must have shown that its CNPs balance (|gap| within the
	// tolerance, or within the noise BalanceSigmas·√sent of a light window,
	// and short of MinGap) in that many consecutive conclusive windows;
	// defaults 0.1 and 6 (a minute of sliding windows). This is what keeps a
	// fabric with unmonitored RoCE endpoints (storage targets, hosts without
	// a collector) quiet: their CNPs never balance, so no gap there is news.
	BalanceTolerance    float64
	BalancedEvaluations int
	// StepWithin: a gap opens an incident only if the fabric balanced at
	// most this long before the gap first held; default 3 min. Lost CNPs
	// start with a change (a QoS push, a starved queue) and the gap jumps
	// within a window; a gap that creeps up over many minutes is the
	// workload moving between monitored and unmonitored endpoints.
	StepWithin time.Duration
	// MaxUnknownShare: a window whose unknown CNPs (ports that were silent,
	// reset or restarted in it, at twice their usual share of the fabric's
	// CNPs) exceed this share of the sent CNPs is inconclusive: it neither
	// proves the balance nor clears an incident; default 0.1. A gap beyond
	// the unknown CNPs still counts: see evalFabric.
	MaxUnknownShare float64
	// FabricOpenAfter and FabricResolveAfter are the fabric incident
	// policy; defaults 60 s and 2 min.
	FabricOpenAfter    time.Duration
	FabricResolveAfter time.Duration
	// ForgetSilentAfter drops a silent port from the unknown share: a node
	// gone this long is taken to be out of the fabric; default 30 min.
	ForgetSilentAfter time.Duration
	// XmitWaitTick is what one port_xmit_wait tick lasts on the fleet's
	// devices (perfquery -c: Tick, in symbol times); default 0, unknown:
	// the evidence then gives ticks per second without a share of time.
	XmitWaitTick time.Duration

	ports  *processor.Tracker
	fabric *processor.Tracker
	view   processor.FabricView
	fab    fabricState
	// blind are the RoCE ports that carry traffic but show no congestion
	// counters (no hw_counters: an old kernel, a collector without
	// access): reaction points whose CNPs nobody counts. Bounded by the
	// fabric's RoCE ports; usually empty.
	blind map[schemas.PortID]*blindState
}

// New returns the detector with its defaults; change the
// fields before the first sample.
func New() *Detector {
	return &Detector{
		Window:              60 * time.Second,
		MinMarked:           600,
		MinMarkedPerS:       5,
		MaxNPRatio:          0.005,
		MinIgnored:          200,
		MinIgnoredPerS:      2,
		MinIgnoredFraction:  0.05,
		OpenAfter:           40 * time.Second,
		ResolveAfter:        2 * time.Minute,
		IdleResolveAfter:    30 * time.Minute,
		MinUpdateInterval:   5 * time.Minute,
		SilentResolveAfter:  30 * time.Minute,
		Fabric:              true,
		FabricWindow:        60 * time.Second,
		FabricHoldback:      10 * time.Second,
		MinGap:              0.2,
		FabricSigmas:        5,
		MinFabricLost:       100,
		BalanceSigmas:       2,
		BalanceTolerance:    0.1,
		BalancedEvaluations: 6,
		StepWithin:          3 * time.Minute,
		MaxUnknownShare:     0.1,
		FabricOpenAfter:     60 * time.Second,
		FabricResolveAfter:  2 * time.Minute,
		ForgetSilentAfter:   30 * time.Minute,
	}
}

// Name implements processor.Detector.
func (d *Detector) Name() string { return schemas.TypeCNPECNImbalance }

// Init implements processor.Initializer: the topology names the switch port to check.
func (d *Detector) Init(fabric processor.FabricView) error {
	d.view = fabric
	return nil
}

func (d *Detector) trackers() (*processor.Tracker, *processor.Tracker) {
	if d.ports == nil {
		d.ports = processor.NewTracker(schemas.TypeCNPECNImbalance, processor.Policy{
			OpenAfter:          d.OpenAfter,
			ResolveAfter:       d.ResolveAfter,
			MinUpdateInterval:  d.MinUpdateInterval,
			SilentResolveAfter: d.SilentResolveAfter,
		})
		d.fabric = processor.NewTracker(schemas.TypeCNPECNImbalance, processor.Policy{
			OpenAfter:         d.FabricOpenAfter,
			ResolveAfter:      d.FabricResolveAfter,
			MinUpdateInterval: d.MinUpdateInterval,
		})
	}
	return d.ports, d.fabric
}

// bucketWidth is the bucket width of every per-port window: fine enough
// to align windows of readings taken 1 s to 10 s apart, coarse enough that
// 18 buckets hold three minutes.
const (
	bucketWidth = 10 * time.Second
	buckets     = 18
)

// Thresholds tied to the counters' behaviour rather than to a fleet (the
// fleet-dependent ones are CNPECNImbalance's fields).
const (
	// minIgnoringReadings and ignoringReadingsDivisor: rp_cnp_ignored
	// must rise in at least 3 readings and a third of the window's: one
	// burst of ignored CNPs is not a disabled reaction point.
	minIgnoringReadings = 3
	// maxSamplingMs: longer intervals between a port's readings are
	// gaps, not its sampling interval.
	maxSamplingMs           = 60_000
	ignoringReadingsDivisor = 3
	// healthyNPFactor: a notification point answering more than twice
	// MaxNPRatio of its marks is healthy (it ends a run, it clears); the
	// band between keeps a port near the ratio from flapping.
	healthyNPFactor = 2
	// clearMarksDivisor, clearRPDivisor: clearing needs a third of
	// MinMarked marks (NP) or half of MinIgnored handled CNPs with under half
	// of MinIgnoredFraction ignored (RP): enough traffic to see it healthy,
	// less than opening needs, so the incident does not outlive the fault.
	clearMarksDivisor = 3
	clearRPDivisor    = 2
	// averageSeconds: the usual rates and shares are exponential
	// averages over about 5 min.
	averageSeconds = 300
	// coverageSlackDivisor: a port whose clean time falls short of the
	// window by more than a hundredth of a bucket was unknown for part of it
	// (less is the rounding of prorated intervals).
	coverageSlackDivisor = 100
	// unknownFactor: an unknown port may have sent and received twice
	// its usual share or rate (see MaxUnknownShare).
	unknownFactor = 2
	// clearGapDivisor: the fabric incident clears, and the onset run of
	// buckets ends, below half of MinGap: hysteresis against a gap near it.
	clearGapDivisor = 2
	// criticalGap: half the CNPs lost (after the unknown allowance)
	// leaves DCQCN mostly blind: critical.
	criticalGap = 0.5
)

// The congestion counters, in the order of portState.prevOK bits.
const (
	npMarked = iota
	npSent
	rpHandled
	rpIgnored
	counters
)

var counterNames = [counters]string{"np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored"}

// portState is the per-port state, made only for ports that expose the
// congestion counters (RoCE).
type portState struct {
	// sums holds one Buckets per counter, prorated over each clean interval;
	// covered holds the clean milliseconds.
	sums    [counters]*processor.Buckets
	covered *processor.Buckets
	// readings and ignoring count the clean readings, and those in which
	// rp_cnp_ignored rose: one burst of ignored CNPs is not a disabled RP.
	readings, ignoring *processor.Buckets
	// tx is what the port transmits (bytes), for the share of the CNPs a
	// blind port may receive (see blindState).
	tx *processor.Buckets
	// wait holds the port_xmit_wait ticks and waitCovered the milliseconds
	// with a usable reading of it; waitPinned: the latest reading was
	// pinned at the counter's maximum.
	wait, waitCovered *processor.Buckets
	waitPinned        bool
	// has: counters the port ever exposed; prevOK: read with a real value
	// in the previous reading, so this reading's delta spans one interval.
	has, prevOK uint8
	// sentPerS and recvPerS are the port's usual CNP rates (an average over
	// about 5 min of clean intervals): what an unknown interval may hide.
	sentPerS, recvPerS float32
	rated              bool
	// sentShare and recvShare are the port's usual shares of the fabric's
	// CNPs: what it sends and receives per CNP the fabric's notification
	// points send, an average over about 5 min of balanced fabric windows
	// in which the port was known throughout. shared: learned at least once.
	sentShare, recvShare float32
	shared               bool
	// npRun and rpRun are where the current run of readings consistent with
	// the fault started (0: none): the incident's onset.
	npRun, rpRun schemas.Millis
	// npSeen, rpSeen: the kinds the open incident has shown; lastHold its
	// last holding reading; lastCongested the last window with enough marks
	// or CNPs to judge by.
	npSeen, rpSeen bool
	lastHold       schemas.Millis
	lastCongested  schemas.Millis
}

func newCNPPort() *portState {
	// Every window of the port is updated on every sample: one group.
	g := processor.NewBucketsGroup(counters+6, buckets, bucketWidth)
	st := &portState{covered: &g[counters], readings: &g[counters+1], ignoring: &g[counters+2], tx: &g[counters+3],
		wait: &g[counters+4], waitCovered: &g[counters+5]}
	for i := range st.sums {
		st.sums[i] = &g[i]
	}
	return st
}

// blindState is a RoCE port without congestion counters: what it transmits
// (bytes, prorated over its intervals), the bound of the CNPs it may get.
type blindState struct {
	tx   *processor.Buckets
	last schemas.Millis
}

// window is one port's figures over a window.
type window struct {
	c         [counters]float64
	coveredMs float64
	// waitTicks over waitMs: the port's port_xmit_wait where it was usable.
	waitTicks, waitMs float64
	waitPinned        bool
	// readings and ignoring: clean readings, and those with ignored CNPs.
	readings, ignoring float64
}

func (w *window) seconds() float64 { return w.coveredMs / 1000 }

func (w *window) perS(i int) float64 {
	if w.coveredMs <= 0 {
		return 0
	}
	return w.c[i] / w.seconds()
}

func (st *portState) window(from, to schemas.Millis) window {
	var w window
	for i := range st.sums {
		w.c[i] = st.sums[i].Sum(from, to)
	}
	w.coveredMs = st.covered.Sum(from, to)
	w.readings = st.readings.Sum(from, to)
	w.ignoring = st.ignoring.Sum(from, to)
	w.waitTicks = st.wait.Sum(from, to)
	w.waitMs = st.waitCovered.Sum(from, to)
	w.waitPinned = st.waitPinned
	return w
}

// spread adds v over [from, to) to b, each bucket getting its share of the
// time: readings are not aligned with buckets or with each other, and
// windows must compare the same stretch of time on every port.
func spread(b *processor.Buckets, from, to schemas.Millis, v float64) {
	if to <= from {
		return
	}
	width := schemas.Millis(bucketWidth.Milliseconds())
	total := float64(to - from)
	for t := from; t < to; {
		next := t - t%width + width
		if next > to {
			next = to
		}
		b.Add(t, v*float64(next-t)/total)
		t = next
	}
}

// OnSample implements processor.PortDetector.
func (d *Detector) OnSample(_ context.Context, port *processor.PortState, s *processor.Sample, em processor.Emitter) {
	d.fab.noteInterval(schemas.Millis(s.IntervalMs), s.Time)
	var deltas [counters]uint64
	var present, usable uint8
	for i, id := range idCNP {
		c, ok := s.CounterByID(id)
		if !ok {
			continue
		}
		if c.Flags&schemas.FlagHeld == 0 {
			present |= 1 << i
		}
		if c.Flags&(schemas.FlagFirst|schemas.FlagReset|schemas.FlagHeld) == 0 {
			usable |= 1 << i
			deltas[i] = c.Delta
		}
	}
	st, ok := processor.LookupPortLocal[portState](port, schemas.TypeCNPECNImbalance)
	if !ok {
		// Only ports with the notification-point counters take state:
		// InfiniBand ports and RoCE ports without them cost nothing,
		// but for what a blind RoCE port transmits.
		if present&(1<<npMarked|1<<npSent) != 1<<npMarked|1<<npSent {
			if present == 0 {
				d.observeBlind(s)
			}
			return
		}
		st = processor.PortLocal[portState](port, schemas.TypeCNPECNImbalance)
		*st = *newCNPPort()
	}
	st.has |= present
	observeXmitWait(st, s)
	// Clean: every counter the port exposes gave a delta over exactly this
	// interval (read now and at the previous reading).
	clean := s.IntervalMs > 0 && usable&st.prevOK == st.has && present == st.has
	st.prevOK = present
	if !clean {
		return
	}
	from, to := s.Since(), s.Time
	for i := range deltas {
		spread(st.sums[i], from, to, float64(deltas[i]))
	}
	spread(st.covered, from, to, float64(to-from))
	if tx, ok := txBytes(s); ok {
		spread(st.tx, from, to, tx)
	}
	st.readings.Add(to, 1)
	if deltas[rpIgnored] > 0 {
		st.ignoring.Add(to, 1)
	}
	d.learnRates(st, deltas, float64(to-from)/1000)
	d.trackRuns(st, s, deltas)
	d.judgePort(st, port, s, em)
}

// blindFactor: a blind port may receive this multiple of its share of
// the window's transmitted bytes in CNPs. Its share is measured over the
// same window (not a past share, as for an unknown port), so the margin is
// for the senders that cross the marked queues more than others.
const blindFactor = 1.5

var idPortXmitData = schemas.MustCounterID(schemas.SourceCounters, "port_xmit_data")

// observeXmitWait keeps the port's port_xmit_wait ticks over the intervals
// whose delta is usable: not a baseline, a reset or a held glitch, and not
// pinned at the counter's maximum (the delta of a saturated interval counts
// up to the top and no further).
func observeXmitWait(st *portState, s *processor.Sample) {
	c, ok := s.CounterByID(idPortXmitWait)
	if !ok {
		return
	}
	st.waitPinned = c.Flags&schemas.FlagSaturated != 0
	if s.IntervalMs <= 0 || c.Flags&(schemas.FlagFirst|schemas.FlagReset|schemas.FlagHeld|schemas.FlagSaturated) != 0 {
		return
	}
	from, to := s.Since(), s.Time
	spread(st.wait, from, to, float64(c.Delta))
	spread(st.waitCovered, from, to, float64(to-from))
}

// txBytes is the sample's port_xmit_data delta in bytes (the delta
// engine already turned the counter's 4-byte words into bytes), if it has a
// usable one: a 32-bit counter pinned at its top counts nothing any more.
func txBytes(s *processor.Sample) (float64, bool) {
	c, ok := s.CounterByID(idPortXmitData)
	if !ok || s.IntervalMs <= 0 || c.Flags&(schemas.FlagFirst|schemas.FlagReset|schemas.FlagHeld|schemas.FlagSaturated) != 0 {
		return 0, false
	}
	return float64(c.Delta), true
}

// observeBlind keeps what a RoCE port without congestion counters
// transmits.
func (d *Detector) observeBlind(s *processor.Sample) {
	if s.PortSample == nil || s.LinkLayer != "Ethernet" {
		return
	}
	tx, ok := txBytes(s)
	if !ok {
		return
	}
	if d.blind == nil {
		d.blind = make(map[schemas.PortID]*blindState)
	}
	b := d.blind[s.ID]
	if b == nil {
		b = &blindState{tx: processor.NewBuckets(buckets, bucketWidth)}
		d.blind[s.ID] = b
	}
	spread(b.tx, s.Since(), s.Time, tx)
	b.last = max(b.last, s.Time)
}

// learnRates keeps the port's usual CNP rates, an exponential average with a
// time constant of about 5 min.
func (d *Detector) learnRates(st *portState, deltas [counters]uint64, seconds float64) {
	if seconds <= 0 {
		return
	}
	sent := float32(float64(deltas[npSent]) / seconds)
	recv := float32(float64(deltas[rpHandled]+deltas[rpIgnored]) / seconds)
	if !st.rated {
		st.sentPerS, st.recvPerS, st.rated = sent, recv, true
		return
	}
	a := float32(min(1, seconds/averageSeconds))
	st.sentPerS += a * (sent - st.sentPerS)
	st.recvPerS += a * (recv - st.recvPerS)
}

// trackRuns follows the runs of readings consistent with each fault, for
// the onset: a reading that shows healthy behaviour ends a run, an idle one
// does not.
func (d *Detector) trackRuns(st *portState, s *processor.Sample, deltas [counters]uint64) {
	marked, sent := float64(deltas[npMarked]), float64(deltas[npSent])
	switch {
	case marked > 0 && sent <= d.MaxNPRatio*marked:
		if st.npRun == 0 {
			st.npRun = s.Since()
		}
	case sent > 0 && sent > healthyNPFactor*d.MaxNPRatio*marked:
		st.npRun = 0
	}
	switch {
	case deltas[rpIgnored] > 0:
		if st.rpRun == 0 {
			st.rpRun = s.Since()
		}
	case deltas[rpHandled] > 0:
		st.rpRun = 0
	}
}

func (d *Detector) judgePort(st *portState, port *processor.PortState, s *processor.Sample, em processor.Emitter) {
	t, _ := d.trackers()
	subject := s.ID.Subject()
	// The window holds at least minIgnoringReadings readings: at 30 s
	// sampling a 60 s window holds two, and a reaction point ignoring
	// three quarters of its CNPs for minutes was never found.
	span := max(schemas.Millis(d.Window.Milliseconds()), minIgnoringReadings*schemas.Millis(s.IntervalMs))
	w := st.window(s.Time-span, s.Time+1)
	secs := w.seconds()
	if secs <= 0 {
		return
	}
	marked, sent := w.c[npMarked], w.c[npSent]
	handled, ignored := w.c[rpHandled], w.c[rpIgnored]
	enoughMarks := marked >= d.MinMarked && marked/secs >= d.MinMarkedPerS
	np := enoughMarks && sent <= d.MaxNPRatio*marked
	rp := ignored >= d.MinIgnored && ignored/secs >= d.MinIgnoredPerS && ignored >= d.MinIgnoredFraction*(handled+ignored) &&
		w.ignoring >= max(minIgnoringReadings, w.readings/ignoringReadingsDivisor)
	if enoughMarks || handled+ignored >= d.MinIgnored {
		st.lastCongested = s.Time
	}
	if np || rp {
		if !t.IsOpen(subject) && !d.pending(t, subject) {
			st.npSeen, st.rpSeen = false, false
		}
		st.npSeen = st.npSeen || np
		st.rpSeen = st.rpSeen || rp
		st.lastHold = s.Time
		t.Hold(s.Time, d.portFinding(st, port, s, &w, np, rp), em)
		return
	}
	if t.Active() == 0 {
		return
	}
	// Clearing needs the port to show healthy figures for each kind the
	// incident showed; with no congestion at all it can neither confirm nor
	// clear, and resolves only after IdleResolveAfter.
	npOK := !st.npSeen || (marked >= d.MinMarked/clearMarksDivisor && sent > healthyNPFactor*d.MaxNPRatio*marked)
	rpOK := !st.rpSeen || (handled >= d.MinIgnored/clearRPDivisor && ignored < d.MinIgnoredFraction/clearRPDivisor*(handled+ignored))
	idle := s.Time-max(st.lastCongested, st.lastHold) >= schemas.Millis(d.IdleResolveAfter.Milliseconds())
	if npOK && rpOK {
		t.Clear(s.Time, subject, fmt.Sprintf("CNPs have matched the ECN marks again for %s", d.ResolveAfter), d.portEvidence(&w), em)
	} else if idle {
		t.Clear(s.Time, subject, fmt.Sprintf("the port has had no congestion to judge by for %s", d.IdleResolveAfter), nil, em)
	}
	if !t.IsOpen(subject) && !d.pending(t, subject) {
		st.npSeen, st.rpSeen = false, false
	}
}

// pending reports whether the tracker has a pending (not yet open) incident
// for subject.
func (d *Detector) pending(t *processor.Tracker, subject schemas.Subject) bool {
	return t.Pending(subject)
}

func round3(v float64) float64 { return processor.RoundTo(v, 3) }

// xmitWait adds the window's port_xmit_wait to evidence: ticks per second,
// and the share of the time the port waited when the tick is known.
func (d *Detector) xmitWait(w *window, ev map[string]any) {
	if w.waitPinned {
		ev["xmit_wait_pinned"] = true
	}
	if w.waitMs <= 0 {
		return
	}
	ev["xmit_wait_ticks_per_s"] = round3(w.waitTicks / (w.waitMs / 1000))
	if share, ok := d.xmitWaitShare(w); ok {
		ev["xmit_wait_share"] = round3(share)
	}
}

// xmitWaitShare is the share of the window's usable time the port waited
// to transmit, when the tick is configured.
func (d *Detector) xmitWaitShare(w *window) (float64, bool) {
	if d.XmitWaitTick <= 0 || w.waitMs <= 0 {
		return 0, false
	}
	return min(1, w.waitTicks*float64(d.XmitWaitTick)/float64(time.Millisecond)/w.waitMs), true
}

func (d *Detector) portEvidence(w *window) map[string]any {
	ratio := 0.0
	if w.c[npMarked] > 0 {
		ratio = w.c[npSent] / w.c[npMarked]
	}
	recv := w.c[rpHandled] + w.c[rpIgnored]
	ignoredFraction := 0.0
	if recv > 0 {
		ignoredFraction = w.c[rpIgnored] / recv
	}
	ev := map[string]any{
		"marked_per_s":      round3(w.perS(npMarked)),
		"cnp_sent_per_s":    round3(w.perS(npSent)),
		"cnp_handled_per_s": round3(w.perS(rpHandled)),
		"cnp_ignored_per_s": round3(w.perS(rpIgnored)),
		"ratio":             round3(ratio),
		"ignored_fraction":  round3(ignoredFraction),
		"window_s":          round3(w.seconds()),
	}
	d.xmitWait(w, ev)
	return ev
}

func (d *Detector) portFinding(st *portState, port *processor.PortState, s *processor.Sample, w *window, np, rp bool) processor.Finding {
	onset := s.Since()
	var what []string
	var keys []string
	severity := schemas.SeverityWarning
	if st.npSeen {
		if np && st.npRun != 0 {
			onset = min(onset, st.npRun)
		}
		// No CNPs means no rate cut for any flow into this port: the
		// fabric falls back on PFC alone.
		severity = schemas.SeverityCritical
		what = append(what, fmt.Sprintf("receives %.0f ECN-marked packets/s and sends %.1f CNPs/s (notification point disabled?)",
			w.perS(npMarked), w.perS(npSent)))
		keys = append(keys, "np_disabled")
	}
	if st.rpSeen {
		if rp && st.rpRun != 0 {
			onset = min(onset, st.rpRun)
		}
		what = append(what, fmt.Sprintf("ignores %.1f CNPs/s of %.1f received (reaction point disabled?)",
			w.perS(rpIgnored), w.perS(rpHandled)+w.perS(rpIgnored)))
		keys = append(keys, "rp_ignoring")
	}
	where := processor.PortName(s.ID, port.Netdev)
	if port.Netdev == "" {
		where = processor.PortName(s.ID, s.Netdev)
	}
	netdev := processor.NetdevOf(s.ID, s.Netdev)
	var checks []schemas.Check
	if st.npSeen {
		checks = append(checks,
			processor.OnHost(s.ID.Node, fmt.Sprintf("grep . /sys/class/net/%s/ecn/roce_np/enable/*", netdev), "the notification point: 1 on the RoCE priority"),
			processor.OnHost(s.ID.Node, fmt.Sprintf("mlxconfig -d %s q | grep -i ROCE_CC", s.ID.Device), "congestion control enabled in the firmware"))
	}
	if st.rpSeen {
		checks = append(checks,
			processor.OnHost(s.ID.Node, fmt.Sprintf("grep . /sys/class/net/%s/ecn/roce_rp/enable/*", netdev), "the reaction point: 1 on the RoCE priority"))
	}
	checks = append(checks,
		processor.OnHost(s.ID.Node, "mlnx_qos -i "+netdev, "trust mode (dscp/pcp), PFC priority and the RoCE traffic class"),
		processor.InRdmawatch("query cnp_balance --node "+s.ID.Node, "rp_cnp_handled on the peers that send to "+where+", np_cnp_sent on the peers it sends to"),
		processor.OnSwitch(d.view, s.ID, "ECN/WRED marking thresholds against the PFC Xoff threshold"))
	return processor.Finding{
		Subject:  s.ID.Subject(),
		Onset:    onset,
		Severity: severity,
		Layer:    schemas.LayerLinkNetwork,
		Summary:  fmt.Sprintf("%s %s over the last %.0f s", where, strings.Join(what, " and "), w.seconds()),
		Evidence: d.portEvidence(w),
		Checks:   checks,
		Keys:     keys,
		Progress: true,
	}
}

// fabricState is the detector's fabric-wide state.
type fabricState struct {
	lastEval schemas.Millis // end of the latest evaluated window
	balanced int            // consecutive conclusive balanced windows
	proven   bool           // the fabric's CNPs have been seen to balance
	// lastBalanced is the end of the latest window with enough CNPs whose
	// CNPs balanced, conclusive or not.
	lastBalanced schemas.Millis
	// lastShared is the end of the latest window the shares were learned
	// from.
	lastShared schemas.Millis
	// blindShare is the blind ports' usual share of the fabric's RoCE
	// transmit bytes over balanced windows (see allowBlind).
	blindShare float64
	blindKnown bool
	// slowestMs is the longest sampling interval of the fabric's ports,
	// seen last at slowestAt: the fabric window waits for it (see
	// OnWatermark).
	slowestMs, slowestAt schemas.Millis
}

// noteInterval keeps the slowest sampling interval seen within
// slowestHold of data time. Held, not decayed per sample: a decay per
// sample would let a fleet of fast ports wash out the slow ones' interval
// between two of their readings.
func (f *fabricState) noteInterval(iv, t schemas.Millis) {
	if iv <= 0 || iv > maxSamplingMs {
		return // not a sampling interval: a gap of a port silent for minutes
	}
	if iv >= f.slowestMs || t-f.slowestAt > schemas.Millis(slowestHold.Milliseconds()) {
		f.slowestMs, f.slowestAt = iv, t
	}
}

// slowestHold: a sampling interval no port has shown for this long (data
// time) is no longer the fabric's slowest.
const slowestHold = 10 * time.Minute

// fabricWindow is the fabric's sums over one window, with per-bucket sums
// for the onset.
type fabricWindow struct {
	from, to           schemas.Millis
	sent, handled, ign float64
	unknownRecv        float64 // CNPs the unknown ports may have received
	unknownSent        float64
	// blindRecv is what the blind ports may have received beyond their
	// usual share: it lowers the lost CNPs, but unlike unknownRecv it does
	// not make a window inconclusive (their usual share is learned from
	// the balanced windows it would otherwise hide).
	blindRecv        float64
	ports, uncovered int
	bucketSent       [buckets]float64
	bucketRecv       [buckets]float64
	buckets          int
}

// OnWatermark implements processor.FabricDetector: the fabric balance, and the sweep
// of silent ports' incidents.
func (d *Detector) OnWatermark(_ context.Context, fabric processor.FabricView, wm schemas.Millis, em processor.Emitter) {
	t, _ := d.trackers()
	t.Sweep(wm, func(s schemas.Subject) (schemas.Millis, bool) {
		p, ok := fabric.Port(schemas.PortID{Node: s.Node, Device: s.Device, Port: s.Port})
		if !ok {
			return 0, false
		}
		return p.LastTime, true
	}, em)
	if !d.Fabric || !fabric.Complete() {
		// A partial view sums part of the senders against part of the
		// receivers: no gap there means anything.
		return
	}
	width := schemas.Millis(bucketWidth.Milliseconds())
	// A port's CNPs of an interval are known only when its next sample
	// arrives: with 30 s sampling the newest 30 s of a window ending near
	// the watermark are missing for some ports, and the senders' and the
	// receivers' phases differ, which reads as CNPs lost. The window ends
	// one and a half of the slowest intervals behind the watermark.
	end := wm - max(schemas.Millis(d.FabricHoldback.Milliseconds()), d.fab.slowestMs*3/2)
	end -= ((end % width) + width) % width
	if end <= d.fab.lastEval {
		return
	}
	d.fab.lastEval = end
	d.evalFabric(fabric, end, em)
}

// evalFabric compares Σ np_cnp_sent with Σ (rp_cnp_handled + rp_cnp_ignored)
// over [end-FabricWindow, end).
//
// A CNP sent by a port whose interval is unknown is missing on the sent side
// (the gap shrinks: harmless); one received by such a port is missing on the
// received side, and looks like loss. Which port sends CNPs to which is not
// in the counters, so the received CNPs an unknown port may have missed are
// bounded by twice its usual share of the fabric's CNPs (see portState
// recvShare) times the CNPs sent while it was unknown, or twice its usual
// rate before any share is known. A share, not a rate: the fabric's CNP rate
// follows the load (day and night, jobs starting and ending) by a factor of
// ten or more, and the rate a node showed before it fell silent ten minutes
// ago would bound nothing once the load has dropped; the port's part of
// whatever the fabric sends moves far less. The gap counts only beyond that
// bound (gapLow, a lower bound of the loss), so a window with a large
// unknown share can still show loss; but a window where the bound is more
// than MaxUnknownShare of the CNPs neither proves the balance nor clears. A
// port silent for ForgetSilentAfter no longer counts: it has left the
// fabric.
//
// How many CNPs a window carries follows the load, and a light load is no
// reason to stop looking: instead of a fixed count, a gap is loss only when
// the lost CNPs beyond the unknown ones stand out of the noise of the
// counts (FabricSigmas standard deviations of a Poisson count, √sent, and
// at least MinFabricLost CNPs) besides being MinGap of the sent CNPs; a
// window balances when its CNPs differ by no more than the tolerance or
// BalanceSigmas·√sent. A window with fewer than MinFabricLost sent CNPs
// says nothing.
//
// A gap must also persist (FabricOpenAfter of windows evaluated every 10 s),
// the fabric must have balanced before (see BalanceTolerance), and the gap
// must have appeared as a step (see StepWithin). For the step, a window with
// enough CNPs whose observed CNPs balance (|gap| within the tolerance)
// counts as "no gap yet" even when its unknown share is too large to prove
// anything: a node silent for minutes would otherwise blind the step test
// for as long, and the loss that starts while it is away (or just as it
// returns) would look like a gap that crept up unseen.
func (d *Detector) evalFabric(fabric processor.FabricView, end schemas.Millis, em processor.Emitter) {
	_, t := d.trackers()
	w := d.newFabricWindow(end)
	forget := schemas.Millis(d.ForgetSilentAfter.Milliseconds())
	spanMs := float64(w.to - w.from)
	wp := w.sumPorts(fabric, forget, spanMs)
	w.allowUnknown(wp.unknown, wp.unknownMs, spanMs)
	blindShare := d.allowBlind(&w, wp.monitoredTx, end-forget)
	if w.sent <= 0 || w.sent < d.MinFabricLost {
		// Even losing every CNP would prove nothing: the window shows
		// neither loss nor balance.
		return
	}
	b := d.balanceOf(&w)
	if b.balanced {
		// The CNPs seen balance: no gap yet, for the step test.
		d.fab.lastBalanced = end
	}
	if b.conclusive {
		if b.balanced {
			d.fab.balanced++
			if d.fab.balanced >= d.BalancedEvaluations {
				d.fab.proven = true
			}
			d.learnBlind(blindShare, float64(end-d.fab.lastShared)/1000)
			d.learnShares(wp.covered, w.sent, float64(end-d.fab.lastShared)/1000)
			d.fab.lastShared = end
		} else {
			d.fab.balanced = 0
		}
	}
	subject := schemas.Subject{}
	switch {
	case d.fab.proven && b.lossy &&
		(t.Active() > 0 || end-d.fab.lastBalanced <= schemas.Millis(d.StepWithin.Milliseconds())):
		t.Hold(end, d.fabricFinding(&w, b.gap, b.gapLow, end), em)
	case b.conclusive && b.gap < d.MinGap/clearGapDivisor:
		t.Clear(end, subject, fmt.Sprintf("the reaction points have received the CNPs sent for %s", d.FabricResolveAfter), d.fabricEvidence(&w, b.gap, b.gapLow), em)
	}
}

// newFabricWindow is the empty window of whole buckets that ends at end:
// FabricWindow long, but at least four of the slowest intervals (a window
// of two 30 s readings is mostly their edges), at most what the buckets
// hold.
func (d *Detector) newFabricWindow(end schemas.Millis) fabricWindow {
	width := schemas.Millis(bucketWidth.Milliseconds())
	span := schemas.Millis(d.FabricWindow.Milliseconds())
	span = min(max(span, 4*d.fab.slowestMs), schemas.Millis(buckets-2)*width)
	span = max(width, span-span%width)
	w := fabricWindow{from: end - span, to: end, buckets: min(buckets-2, int(span/width))}
	w.from = end - schemas.Millis(w.buckets)*width
	return w
}

// windowPorts are the window's ports sorted for the balance: those whose
// samples cover the window (covered, with their CNPs) and those whose
// interval is partly unknown (unknown, with how long), and the monitored
// ports' transmitted bytes.
type windowPorts struct {
	covered     []known
	unknown     []*portState
	unknownMs   []float64
	monitoredTx float64
}

// sumPorts adds every port's CNPs of the window, in all and per bucket,
// to w; a port silent for forget before the window no longer counts.
func (w *fabricWindow) sumPorts(fabric processor.FabricView, forget schemas.Millis, spanMs float64) windowPorts {
	width := schemas.Millis(bucketWidth.Milliseconds())
	var wp windowPorts
	fabric.Ports(func(p *processor.PortState) bool {
		st, ok := processor.LookupPortLocal[portState](p, schemas.TypeCNPECNImbalance)
		if !ok || (p.LastTime < w.from-forget) {
			return true
		}
		w.ports++
		wp.monitoredTx += st.tx.Sum(w.from, w.to)
		pw := st.window(w.from, w.to)
		w.sent += pw.c[npSent]
		w.handled += pw.c[rpHandled]
		w.ign += pw.c[rpIgnored]
		for b := 0; b < w.buckets; b++ {
			bf := w.from + schemas.Millis(b)*width
			w.bucketSent[b] += st.sums[npSent].Sum(bf, bf+width)
			w.bucketRecv[b] += st.sums[rpHandled].Sum(bf, bf+width) + st.sums[rpIgnored].Sum(bf, bf+width)
		}
		if ms := spanMs - pw.coveredMs; ms > float64(width)/coverageSlackDivisor {
			w.uncovered++
			wp.unknown = append(wp.unknown, st)
			wp.unknownMs = append(wp.unknownMs, ms)
		} else {
			wp.covered = append(wp.covered, known{st, pw.c[npSent], pw.c[rpHandled] + pw.c[rpIgnored]})
		}
		return true
	})
	return wp
}

// fabricBalance is what a window's CNPs say: the gap between sent and
// received as a share of sent, and its lower bound beyond the CNPs the
// unknown and blind ports may have received (gapLow); whether the unknown
// ports leave it conclusive, and whether it is lossy or balanced.
type fabricBalance struct {
	gap, gapLow                 float64
	conclusive, lossy, balanced bool
}

// balanceOf weighs the window's gap against the noise of its counts (see
// evalFabric).
func (d *Detector) balanceOf(w *fabricWindow) fabricBalance {
	// The noise of the window's counts, as for a Poisson count.
	sigma := math.Sqrt(w.sent)
	recv := w.handled + w.ign
	conclusive := w.unknownRecv <= d.MaxUnknownShare*w.sent
	gap := (w.sent - recv) / w.sent
	lostLow := w.sent - recv - w.unknownRecv - w.blindRecv
	gapLow := lostLow / w.sent
	lossy := gapLow >= d.MinGap && lostLow >= max(d.MinFabricLost, d.FabricSigmas*sigma)
	balanced := math.Abs(w.sent-recv) <= max(d.BalanceTolerance*w.sent, d.BalanceSigmas*sigma) && gap < d.MinGap
	return fabricBalance{gap: gap, gapLow: gapLow, conclusive: conclusive, lossy: lossy, balanced: balanced}
}

// allowBlind adds what the blind RoCE ports may have received beyond
// their usual share, and returns their share of the window's transmitted
// bytes. Blind ports send CNPs nobody counts and receive CNPs nobody counts;
// while their traffic keeps its usual share, what that does to the balance
// is in the balance the fabric proved. CNPs go to the senders whose traffic
// crosses the marked queues, so when a blind port's share of the
// transmitted bytes grows (a job starts there), it may take up to
// blindFactor times the growth of the CNPs: without that allowance the
// job reads as CNPs lost in the network. A share that shrinks allows
// nothing: lost CNPs still show.
func (d *Detector) allowBlind(w *fabricWindow, monitoredTx float64, forgetBefore schemas.Millis) float64 {
	var blindTx float64
	for id, b := range d.blind {
		if b.last < forgetBefore {
			delete(d.blind, id)
			continue
		}
		blindTx += b.tx.Sum(w.from, w.to)
	}
	if blindTx <= 0 {
		return 0
	}
	share := blindTx / (blindTx + monitoredTx)
	grown := share
	if d.fab.blindKnown {
		grown = max(0, share-d.fab.blindShare)
	}
	w.blindRecv = blindFactor * grown * w.sent
	return share
}

// learnBlind keeps the blind ports' usual share (an average over about
// 5 min of balanced windows).
func (d *Detector) learnBlind(share, seconds float64) {
	if !d.fab.blindKnown {
		d.fab.blindShare, d.fab.blindKnown = share, true
		return
	}
	a := min(1, max(0, seconds)/averageSeconds)
	d.fab.blindShare += a * (share - d.fab.blindShare)
}

// allowUnknown adds what the unknown ports may have sent and received:
// twice their usual share of the CNPs sent while they were unknown (the
// window's sent CNPs prorated), or twice their usual rate if no share is
// known yet.
func (w *fabricWindow) allowUnknown(unknown []*portState, unknownMs []float64, spanMs float64) {
	for i, st := range unknown {
		switch {
		case st.shared:
			sentThen := w.sent * unknownMs[i] / spanMs
			w.unknownRecv += unknownFactor * float64(st.recvShare) * sentThen
			w.unknownSent += unknownFactor * float64(st.sentShare) * sentThen
		case st.rated:
			w.unknownRecv += unknownFactor * float64(st.recvPerS) * unknownMs[i] / 1000
			w.unknownSent += unknownFactor * float64(st.sentPerS) * unknownMs[i] / 1000
		default:
			// Nothing known about this port yet: its share is unbounded.
			w.unknownRecv = math.Inf(1)
		}
	}
}

// learnShares updates the usual CNP shares of the ports known throughout a
// conclusive balanced window that carried sent CNPs; seconds is the time
// since the previous such window (an average over about 5 min).
func (d *Detector) learnShares(covered []known, sent, seconds float64) {
	if sent <= 0 || seconds <= 0 {
		return
	}
	a := float32(min(1, seconds/averageSeconds))
	for _, k := range covered {
		ss, rs := float32(k.sent/sent), float32(k.recv/sent)
		if !k.st.shared {
			k.st.sentShare, k.st.recvShare, k.st.shared = ss, rs, true
			continue
		}
		k.st.sentShare += a * (ss - k.st.sentShare)
		k.st.recvShare += a * (rs - k.st.recvShare)
	}
}

// known is a port known throughout a fabric window, with its CNPs.
type known struct {
	st         *portState
	sent, recv float64
}

// fabricOnset is the start of the run of buckets at the end of the window in
// which the gap shows; the window's start if the gap covers all of it.
func (d *Detector) fabricOnset(w *fabricWindow) schemas.Millis {
	width := schemas.Millis(bucketWidth.Milliseconds())
	onset := w.to - width
	for b := w.buckets - 1; b >= 0; b-- {
		s := w.bucketSent[b]
		if s <= 0 || (s-w.bucketRecv[b])/s < d.MinGap/clearGapDivisor {
			break
		}
		onset = w.from + schemas.Millis(b)*width
	}
	return onset
}

func (d *Detector) fabricEvidence(w *fabricWindow, gap, gapLow float64) map[string]any {
	secs := float64(w.to-w.from) / 1000
	unknown := 0.0
	if w.sent > 0 {
		unknown = w.unknownRecv / w.sent
	}
	return map[string]any{
		"fabric_cnp_sent":    round3(w.sent),
		"fabric_cnp_handled": round3(w.handled),
		"fabric_cnp_ignored": round3(w.ign),
		"cnp_sent_per_s":     round3(w.sent / secs),
		"cnp_handled_per_s":  round3(w.handled / secs),
		"cnp_ignored_per_s":  round3(w.ign / secs),
		"gap_fraction":       round3(gap),
		"gap_fraction_low":   round3(gapLow),
		"unknown_fraction":   round3(unknown),
		"window_s":           round3(secs),
		"ports":              w.ports,
		"ports_unknown":      w.uncovered,
	}
}

func (d *Detector) fabricFinding(w *fabricWindow, gap, gapLow float64, now schemas.Millis) processor.Finding {
	severity := schemas.SeverityWarning
	if gapLow >= criticalGap {
		severity = schemas.SeverityCritical
	}
	secs := float64(w.to-w.from) / 1000
	return processor.Finding{
		Scope:    schemas.ScopeFabric,
		Subject:  schemas.Subject{},
		Onset:    d.fabricOnset(w),
		Severity: severity,
		Layer:    schemas.LayerLinkNetwork,
		Summary: fmt.Sprintf("%.0f%% of the CNPs sent in the fabric over the last %.0f s never reached a reaction point (%.0f sent/s, %.0f handled+ignored/s over %d ports): CNPs are lost or on a lossy priority",
			100*gap, secs, w.sent/secs, (w.handled+w.ign)/secs, w.ports),
		Evidence: d.fabricEvidence(w, gap, gapLow),
		Checks: []schemas.Check{
			processor.InRdmawatch("query cnp_balance", "np_cnp_sent against rp_cnp_handled per leaf: the switch or link where the CNPs disappear"),
			{Command: "nv show qos egress-queue-mapping", Note: "on the leaves and spines: the CNP traffic class and its DSCP/priority (CNPs usually go out on DSCP 48, a strict-priority queue); drops on that queue"},
			{Command: "grep . /sys/class/net/*/ecn/roce_np/cnp_dscp /sys/class/net/*/ecn/roce_np/cnp_802p_prio", Note: "on the hosts: the same CNP priority everywhere"},
			{Command: "for i in $(ibdev2netdev | awk '{print $5}'); do mlnx_qos -i $i; done", Note: "on the hosts: trust mode and the priority-to-TC map carry CNPs on a lossless or strict class"},
			{Command: "grep . /sys/kernel/config/rdma_cm/*/ports/*/default_roce_tos", Note: "on the hosts: the RoCE traffic class the applications use (cma_roce_tos sets it)"},
		},
		Keys:     []string{"fabric"},
		Progress: true,
	}
}
