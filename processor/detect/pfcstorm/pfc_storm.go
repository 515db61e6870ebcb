// Package pfcstorm is the pfc_storm detector (layer link_network): a port
// that keeps its switch paused, with the victims the pauses spread to
// (Detector). It registers itself with processor.Register;
// processor/detect/all links it in.
package pfcstorm

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/detect/pause"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func init() {
	processor.Register(schemas.TypePFCStorm, func() processor.Detector { return New() })
}

// Detector raises pfc_storm when a port keeps its switch paused: a NIC whose
// host stopped draining its receive queues (hung process, stalled CQ polling,
// a hung kernel) sends PFC pause frames back to back, the leaf's buffers fill
// behind it, and the leaf pauses the other ports that send into it, then the
// spines pause the other leaves. One stuck host halts a priority on a whole
// pod; the victims see only pauses and lost throughput, the origin is the
// one port that transmits pauses while it receives none.
//
// Figures per sample and direction (the deltas of ethtool
// {tx,rx}_prio<N>_pause and _pause_duration, µs; the busiest priority):
// pause fraction = paused µs / interval, pause frames per second. A fabric
// on IEEE 802.3x flow control counts {tx,rx}_global_pause[_duration] (mlx5)
// or {tx,rx}_pause[_duration] (mlx4_en) instead: a global pause stops every
// priority, and is read as one more priority (evidence priority -1,
// flow_control "global_pause"); origins, victims and the spread are the
// same. A RoCE LAG's sample sums its members' pause counters: its figures
// are the mean member link's (pause.Read says why the mean and not the
// busiest link; evidence lag_members).
//
// Origin with its own samples (decided in OnSample, at that sample's time):
//   - at once when one interval is paused at least OpenFraction, the port
//     receives almost no pauses itself, and either the NIC's storm watchdog
//     fired (tx_pause_storm_*_events), or the receive path is stalled (it
//     receives under StalledUtilisation of its line rate: a storm origin
//     drains nothing), or there is no congestion-control activity (ECN marks,
//     CNPs) that would make it an overloaded receiver instead;
//   - else when SustainFraction holds for 2 consecutive intervals (3 when
//     ECN/CNP activity says it may be an incast receiver): incast congestion
//     pauses in short bursts that congestion control ends within
//     milliseconds; a storm does not end.
//
// Victims are ports that receive pauses (VictimFraction of an interval, 2
// intervals in a row) while not pausing much themselves; they are indexed by
// leaf, so each watermark tick looks only at the paused ports, never at the
// fleet. A victim joins the nearest open storm (topology hops: 2 on the same
// leaf, 4 through a spine) if its pauses began after that storm's onset.
//
// Silent origin (decided in OnWatermark): victims under one leaf and, on that
// leaf, a host port whose samples stopped around the time the pauses began
// (the watermark says it is overdue, so it is not just late): that port is the
// origin, origin.silent is true. A processor that does not see every
// partition never treats an unseen port as silent.
//
// Files: pfc_storm.go holds the per-sample decisions and the lifecycle,
// processor/detect/pause reads the counters, pfc_spread.go joins victims to storms
// through the topology, pfc_silent.go infers silent origins.
//
// Lifecycle: one incident per origin; it resolves after ResolveAfterSamples
// clear observations in a row, so a storm that dips for an interval stays
// one incident. Resets, collector restarts (baselines) and held read
// glitches neither hold nor clear: their deltas say nothing about this
// interval.
type Detector struct {
	OpenFraction        float64       // default 0.5
	SustainFraction     float64       // default 0.4
	HoldFraction        float64       // an open storm holds while the origin pauses this much; default 0.25
	VictimFraction      float64       // default 0.2
	StalledUtilisation  float64       // default 0.05
	IncastEventsPerS    float64       // ECN marks or CNPs per second that make a pausing port look like an incast receiver; default 1000
	ResolveAfterSamples int           // default 3
	MinUpdateInterval   time.Duration // default 1 min
	SilentResolveAfter  time.Duration // a silent origin without victims resolves after this; default 10 min

	tracker *processor.Tracker
	fabric  processor.FabricView
	now     schemas.Millis // newest sample time seen: the processor's data clock
	storms  map[schemas.PortID]*incident
	// victims indexes the ports in a victim streak by leaf ("" without a
	// topology).
	victims map[string]map[schemas.PortID]*portState
}

// New returns the detector with its defaults.
func New() *Detector {
	return &Detector{
		OpenFraction:        0.5,
		SustainFraction:     0.4,
		HoldFraction:        0.25,
		VictimFraction:      0.2,
		StalledUtilisation:  0.05,
		IncastEventsPerS:    1000,
		ResolveAfterSamples: 3,
		MinUpdateInterval:   time.Minute,
		SilentResolveAfter:  10 * time.Minute,
	}
}

// Name implements processor.Detector.
func (d *Detector) Name() string { return schemas.TypePFCStorm }

// Init implements processor.Initializer.
func (d *Detector) Init(fabric processor.FabricView) error {
	d.fabric = fabric
	return nil
}

func (d *Detector) track() *processor.Tracker {
	if d.tracker == nil {
		d.tracker = processor.NewTracker(schemas.TypePFCStorm, processor.Policy{
			ResolveAfterSamples: d.ResolveAfterSamples,
			MinUpdateInterval:   d.MinUpdateInterval,
		})
		d.storms = make(map[schemas.PortID]*incident)
		d.victims = make(map[string]map[schemas.PortID]*portState)
	}
	return d.tracker
}

// Thresholds tied to how pauses and samples behave rather than to a fleet
// (the fleet-dependent ones are PFCStorm's fields).
const (
	// quietFraction: a port pausing and paused less than this is
	// healthy and keeps no state (the common case, kept cheap).
	quietFraction = 0.02
	// pausedItselfFraction: a port paused this much of an interval is a
	// victim or a link in a cascade, never the origin (an origin drains
	// nothing, so nothing pauses it).
	pausedItselfFraction = 0.2
	// pausingFraction: a reading paused this much already took part in
	// the storm (the onset estimate, a silent origin's last reading).
	pausingFraction = 0.05
	// criticalFraction: an origin pausing this much halts its priority.
	criticalFraction = 0.8
	// stalledGbps: without a known line rate, receiving under 1 Gb/s is
	// a stalled receive path.
	stalledGbps = 1
	// sustainReadings, incastSustainReadings: readings in a row at
	// SustainFraction that make an origin; one more when ECN/CNP activity
	// says it may be an incast receiver (congestion control ends those).
	sustainReadings       = 2
	incastSustainReadings = 3
	// victimReadings: readings in a row at VictimFraction that make a
	// sustained victim.
	victimReadings = 2
	// freshIntervals: a victim's latest reading is current for two of
	// its intervals (one may be late).
	freshIntervals = 2
	// minIntervalMs: intervals are taken as at least a second in the
	// freshness and gap rules, so a sub-second scraper is not judged on
	// read-time jitter.
	minIntervalMs = 1000
	// gapHalfIntervals: a sample whose interval is over five half (2.5) usual
	// intervals (plus minIntervalMs) spans a gap.
	gapHalfIntervals = 5
)

// portState is the per-port state, created on the first sample with pauses
// worth remembering; healthy ports keep none.
type portState struct {
	id          schemas.PortID
	leaf        string
	leafKnown   bool
	prevTime    schemas.Millis // previous valid reading
	prevTx      float64
	prevIntvlMs int64
	txStreak    int // consecutive readings at SustainFraction
	// Victim streak: consecutive readings receiving VictimFraction.
	victimStreak int
	victimFirst  schemas.Millis // time of the streak's first reading
	victimSure   schemas.Millis // time of its second: the victim is sustained from then on
	victimSince  schemas.Millis // that reading's Since(): when pauses may have begun
	victimLast   schemas.Millis
	rxFraction   float64
	cnpHandPerS  float64
	intervalMs   int64
}

// incident is an active (pending or open) incident.
type incident struct {
	origin   schemas.PortID
	netdev   string
	leaf     string
	onset    schemas.Millis
	silent   bool
	holding  bool // the latest observation of the origin held
	reading  pause.Reading
	warn     uint64 // watchdog events during the storm
	errs     uint64
	affected []schemas.Affected
	byPort   map[schemas.PortID]int // index into affected
	// lastVictim is the newest data time a victim of this storm was seen
	// paused: a silent origin's storm lasts while its victims are paused.
	lastVictim       schemas.Millis
	victimIntervalMs int64
	clearAt          schemas.Millis // last clear observation from the victims
	silentAt         schemas.Millis // last sample of a silent origin
	// ambiguous: the origin is a silent node with more than one port on the
	// paused leaf and nothing in the counters says which one is stuck. The
	// incident is then about the node (scope node), not a guessed port.
	ambiguous bool
	ties      int // the silent node's ports that could be the origin
}

// subject is what the incident is about: the origin port, or its node when
// which of a silent node's ports pauses cannot be told.
func (st *incident) subject() schemas.Subject {
	if st.ambiguous {
		return schemas.Subject{Node: st.origin.Node}
	}
	return st.origin.Subject()
}

// OnSample implements processor.PortDetector.
func (d *Detector) OnSample(_ context.Context, port *processor.PortState, s *processor.Sample, em processor.Emitter) {
	t := d.track()
	d.now = max(d.now, s.Time)
	r := pause.Read(s.PortSample)
	st, _ := processor.LookupPortLocal[portState](port, schemas.TypePFCStorm)
	active := d.storms[s.ID]
	if !r.Valid {
		return
	}
	if st == nil {
		if r.TxFraction < quietFraction && r.RxFraction < quietFraction && active == nil {
			return // the common case: a healthy port
		}
		st = processor.PortLocal[portState](port, schemas.TypePFCStorm)
		st.id = s.ID
	}
	st.intervalMs = s.IntervalMs
	if !st.leafKnown {
		st.leafKnown = true
		if d.fabric != nil {
			if topo := d.fabric.Topology(); topo != nil {
				st.leaf, _, _ = topo.AttachedSwitch(s.ID)
			}
		}
	}

	rxQuiet := r.RxFraction < pausedItselfFraction
	if r.TxFraction >= d.SustainFraction && rxQuiet {
		st.txStreak++
	} else {
		st.txStreak = 0
	}
	d.observeVictim(st, s, &r)

	switch {
	case active != nil:
		active.silent = false
		if r.TxFraction >= d.HoldFraction {
			active.holding = true
			active.reading = r
			active.netdev = s.Netdev
			active.warn += r.StormWarn
			active.errs += r.StormErr
			d.collectAffected(active)
			t.Hold(s.Time, d.finding(active), em)
		} else {
			active.holding = false
			active.reading = r
			d.clear(active, s.Time, fmt.Sprintf("the port pauses %.0f%% of the time", 100*r.TxFraction), em)
		}
	case !spansGap(port, s) && d.originNow(st, &r):
		nw := &incident{origin: s.ID, netdev: s.Netdev, leaf: st.leaf, onset: d.onset(st, s, &r), holding: true,
			reading: r, warn: r.StormWarn, errs: r.StormErr}
		d.storms[s.ID] = nw
		d.collectAffected(nw)
		t.Hold(s.Time, d.finding(nw), em)
	}
	st.prevTime, st.prevTx, st.prevIntvlMs = s.Time, r.TxFraction, s.IntervalMs
}

// spansGap reports whether the sample's deltas cover a gap (the port or
// its node was silent for more than a couple of its intervals): the pause
// fraction is then an average over minutes in which anything may have
// happened, often a storm that was already inferred from the victims while
// the host was silent and resolved since. Such a reading holds or clears an
// active storm but never opens one; if the port still pauses, its next
// reading, one interval later, says so.
func spansGap(port *processor.PortState, s *processor.Sample) bool {
	usual := port.LastIntervalMs
	return usual > 0 && s.IntervalMs > usual*gapHalfIntervals/2+minIntervalMs
}

// originNow decides whether the port's latest reading makes it a storm
// origin.
func (d *Detector) originNow(st *portState, r *pause.Reading) bool {
	if r.RxFraction >= pausedItselfFraction {
		return false // paused itself: a victim, or a link in a cascade
	}
	watchdog := r.StormWarn > 0 || r.StormErr > 0
	stalled := r.Utilisation >= 0 && r.Utilisation < d.StalledUtilisation ||
		r.Utilisation < 0 && r.RcvKnown && r.RcvGbps < stalledGbps
	incast := r.ECNPerS >= d.IncastEventsPerS || r.CNPSentPerS >= d.IncastEventsPerS
	if r.TxFraction >= d.OpenFraction && (watchdog || stalled || !incast) {
		return true
	}
	need := sustainReadings
	if incast && !watchdog {
		need = incastSustainReadings
	}
	return st.txStreak >= need
}

// onset estimates when the origin started pausing: if the previous reading
// already paused a part of its interval, the storm began that part before
// it ended, else at the start of this reading's interval.
func (d *Detector) onset(st *portState, s *processor.Sample, r *pause.Reading) schemas.Millis {
	if st.prevTime > 0 && st.prevTx >= pausingFraction && s.Since() <= st.prevTime+schemas.Millis(st.prevIntvlMs)/2 && r.TxFraction > 0 {
		share := min(1, st.prevTx/r.TxFraction)
		return st.prevTime - schemas.Millis(share*float64(st.prevIntvlMs))
	}
	return s.Since()
}

// observeVictim keeps the port's victim streak and the leaf index.
func (d *Detector) observeVictim(st *portState, s *processor.Sample, r *pause.Reading) {
	st.rxFraction, st.cnpHandPerS = r.RxFraction, r.CNPHandledPerS
	if r.RxFraction >= d.VictimFraction && r.TxFraction < d.SustainFraction {
		if st.victimStreak == 0 {
			st.victimFirst, st.victimSince = s.Time, s.Since()
		}
		st.victimStreak++
		if st.victimStreak == victimReadings {
			st.victimSure = s.Time
		}
		st.victimLast = s.Time
		idx := d.victims[st.leaf]
		if idx == nil {
			idx = make(map[schemas.PortID]*portState)
			d.victims[st.leaf] = idx
		}
		idx[st.id] = st
		return
	}
	if st.victimStreak > 0 {
		st.victimStreak = 0
		delete(d.victims[st.leaf], st.id)
		if len(d.victims[st.leaf]) == 0 {
			delete(d.victims, st.leaf)
		}
	}
}

// sustainedVictim reports whether a port in the index is paused now: two
// readings in a row, the latest not older than two of its intervals.
func (d *Detector) sustainedVictim(v *portState, wm schemas.Millis) bool {
	if v.victimStreak < victimReadings {
		return false
	}
	return wm-v.victimLast <= freshIntervals*schemas.Millis(max(v.intervalMs, minIntervalMs))
}

func (d *Detector) clear(st *incident, now schemas.Millis, why string, em processor.Emitter) {
	t := d.track()
	subject := st.subject()
	t.Clear(now, subject, why, map[string]any{"tx_pause_fraction": round2(st.reading.TxFraction)}, em)
	if !t.Tracks(subject) {
		delete(d.storms, st.origin)
	}
}

// OnWatermark implements processor.FabricDetector: victims join storms, silent origins
// are inferred, storms of silent origins hold or clear on their victims.
func (d *Detector) OnWatermark(_ context.Context, fabric processor.FabricView, wm schemas.Millis, em processor.Emitter) {
	t := d.track()
	now := max(d.now, wm)
	for _, id := range sortedStorms(d.storms) {
		st := d.storms[id]
		p, seen := fabric.Port(id)
		silent := !seen || overdue(p, wm)
		before := len(st.affected)
		victims := d.collectAffected(st)
		switch {
		case !silent:
			if st.holding && len(st.affected) > before {
				t.Hold(now, d.finding(st), em)
			}
		case victims > 0:
			if !st.silent && seen {
				st.silentAt = p.LastTime
			}
			st.silent = true
			st.holding = true
			t.Hold(now, d.finding(st), em)
		case st.lastVictim > 0:
			// The victims are no longer paused: the storm is over, or the
			// watchdog stopped the origin's pauses. Clear observations are
			// counted once per victim interval, not per tick, so that
			// ResolveAfterSamples means intervals here too and a dip of one
			// interval does not resolve the storm.
			st.silent = true
			if now-st.clearAt >= schemas.Millis(max(st.victimIntervalMs, minIntervalMs)) {
				st.clearAt = now
				d.clear(st, now, "its victims are no longer paused", em)
			}
		case now-max(st.lastVictim, st.silentAt, st.onset) >= millis(d.SilentResolveAfter):
			// A silent origin without victims can neither confirm nor
			// clear the storm; it must not stay open forever.
			st.silent = true
			d.resolveSilent(st, now, em)
		}
	}
	d.inferSilentOrigins(fabric, wm, now, em)
}

// resolveSilent resolves a storm whose origin has been silent, without
// victims, for SilentResolveAfter.
func (d *Detector) resolveSilent(st *incident, now schemas.Millis, em processor.Emitter) {
	for range max(1, d.ResolveAfterSamples) {
		d.clear(st, now, "the origin has been silent and nothing is paused", em)
		if d.storms[st.origin] == nil {
			return
		}
	}
}

func (d *Detector) finding(st *incident) processor.Finding {
	r := st.reading
	severity := schemas.SeverityWarning
	if st.warn+st.errs > 0 || len(st.affected) > 0 || r.TxFraction >= criticalFraction || st.silent {
		severity = schemas.SeverityCritical
	}
	origin := st.origin
	where := processor.PortName(origin, st.netdev)
	if st.ambiguous {
		where = origin.Node + " (one of its ports on the paused leaf; the counters cannot tell which)"
	}
	leaf := st.leaf
	if leaf == "" {
		leaf = "its switch"
	}
	var summary string
	if st.silent {
		summary = fmt.Sprintf("%s has stopped reporting and %s is pausing the ports under it: the silent host is the likely storm origin", where, leaf)
	} else {
		summary = fmt.Sprintf("%s is pausing %s %.0f%% of the time while receiving almost nothing", where, leaf, 100*r.TxFraction)
		if r.Links > 1 {
			// A LAG's figure is its members' mean (pause.Read): say so,
			// since one member may pause more than that.
			summary += fmt.Sprintf(" (the mean of its %d LAG member links)", r.Links)
		}
		if r.Prio == pause.GlobalPrio {
			summary += " (IEEE 802.3x global pause: every priority stops)"
		}
	}
	if n := len(st.affected); n > 0 {
		nodes := map[string]bool{}
		nearest := st.affected[0].Hops
		for _, a := range st.affected {
			nodes[a.Node] = true
			nearest = min(nearest, a.Hops)
		}
		summary += fmt.Sprintf("; the pause has reached %d port(s) on %d node(s), nearest %d hop(s) away", n, len(nodes), nearest)
	}
	evidence := d.evidence(st)
	netdev := processor.NetdevOf(origin, st.netdev)
	checks := []schemas.Check{
		processor.OnHost(origin.Node, fmt.Sprintf("ethtool -S %s | grep -E 'pause|storm'", netdev), "pause frames sent per priority and the storm watchdog's count"),
	}
	if st.silent {
		checks = append(checks, schemas.Check{Command: "ping -c 3 " + processor.ShellQuote(origin.Node), Note: origin.Node + " stopped reporting: is the host hung (console, BMC)? a stalled receive path (CQ polling, hung process) keeps the NIC pausing"})
	} else {
		checks = append(checks, processor.OnHost(origin.Node, "top -b -n 1 -o %CPU | head -20", "is the host's receive path stalled (CQ polling, hung process)?"))
	}
	if !st.silent && r.Prio == pause.GlobalPrio {
		checks = append(checks, processor.OnHost(origin.Node, "ethtool -a "+netdev, "link-level (802.3x) flow control is on: the port pauses every priority"))
	}
	checks = append(checks,
		processor.OnHost(origin.Node, "mlnx_qos -i "+netdev, "PFC watchdog / pfc-prevention-tout"),
		processor.OnSwitch(d.fabric, origin, "PFC watchdog and pause counters"))
	scope, originRef := schemas.ScopePort, &schemas.Origin{Node: origin.Node, Device: origin.Device, Port: origin.Port, Silent: st.silent}
	if st.ambiguous {
		scope, originRef = schemas.ScopeNode, &schemas.Origin{Node: origin.Node, Silent: st.silent}
		evidence["origin_candidate_ports"] = st.ties
	}
	return processor.Finding{
		Scope:    scope,
		Subject:  st.subject(),
		Onset:    st.onset,
		Severity: severity,
		Layer:    schemas.LayerLinkNetwork,
		Summary:  summary,
		Evidence: evidence,
		Checks:   checks,
		Origin:   originRef,
		Affected: append([]schemas.Affected(nil), st.affected...),
		Keys:     []string{"silent:" + strconv.FormatBool(st.silent)},
		Progress: true,
	}
}

// evidence is the storm's figures: the origin's own, or, for a silent
// origin, what its victims show.
func (d *Detector) evidence(st *incident) map[string]any {
	r := st.reading
	evidence := map[string]any{
		"tx_pause_fraction":             round2(r.TxFraction),
		"tx_pause_frames_per_s":         math.Round(processor.Finite(r.TxFramesPerS)),
		"rx_pause_fraction":             round2(r.RxFraction),
		"rcv_gbps":                      round2(r.RcvGbps),
		"priority":                      r.Prio,
		"flow_control":                  pause.FlowControl(r.Prio),
		"tx_pause_storm_warning_events": st.warn,
		"tx_pause_storm_error_events":   st.errs,
		"affected_ports":                len(st.affected),
	}
	if r.Links > 1 {
		// The pause figures are per member link of a RoCE LAG, the mean
		// of the summed counters over this many links.
		evidence["lag_members"] = r.Links
	}
	if st.silent {
		// The origin's own figures are unknown: what the victims show is
		// the evidence.
		var sum float64
		for _, a := range st.affected {
			sum += a.PauseFraction
		}
		if len(st.affected) > 0 {
			evidence["victim_pause_fraction_mean"] = round2(sum / float64(len(st.affected)))
		}
		evidence["origin_silent_s"] = math.Max(0, float64(d.now-st.silentAt)/1000)
		delete(evidence, "tx_pause_frames_per_s")
		delete(evidence, "rx_pause_fraction")
		delete(evidence, "rcv_gbps")
		delete(evidence, "flow_control")
	}
	return evidence
}

func round2(x float64) float64 { return processor.RoundTo(x, 2) }
