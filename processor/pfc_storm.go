package processor

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func init() {
	Register(schemas.TypePFCStorm, func() Detector { return NewPFCStorm() })
}

// PFCStorm raises pfc_storm when a port keeps its switch paused: a NIC whose
// host stopped draining its receive queues (hung process, stalled CQ polling,
// a hung kernel) sends PFC pause frames back to back, the leaf's buffers fill
// behind it, and the leaf pauses the other ports that send into it, then the
// spines pause the other leaves. One stuck host halts a priority on a whole
// pod; the victims see only pauses and lost throughput, the origin is the
// one port that transmits pauses while it receives none.
//
// Figures per sample and direction (the deltas of ethtool
// {tx,rx}_prio<N>_pause and _pause_duration, µs; the busiest priority):
// pause fraction = paused µs / interval, pause frames per second.
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
// Lifecycle: one incident per origin; it resolves after ResolveAfterSamples
// clear observations in a row, so a storm that dips for an interval stays
// one incident. Resets, collector restarts (baselines) and held read
// glitches neither hold nor clear: their deltas say nothing about this
// interval.
type PFCStorm struct {
	OpenFraction        float64       // default 0.5
	SustainFraction     float64       // default 0.4
	HoldFraction        float64       // an open storm holds while the origin pauses this much; default 0.25
	VictimFraction      float64       // default 0.2
	StalledUtilisation  float64       // default 0.05
	IncastEventsPerS    float64       // ECN marks or CNPs per second that make a pausing port look like an incast receiver; default 1000
	ResolveAfterSamples int           // default 3
	MinUpdateInterval   time.Duration // default 1 min
	SilentResolveAfter  time.Duration // a silent origin without victims resolves after this; default 10 min

	tracker *Tracker
	fabric  FabricView
	now     schemas.Millis // newest sample time seen: the processor's data clock
	storms  map[schemas.PortID]*pfcIncident
	// victims indexes the ports in a victim streak by leaf ("" without a
	// topology).
	victims map[string]map[schemas.PortID]*pfcPort
}

// NewPFCStorm returns the detector with its defaults.
func NewPFCStorm() *PFCStorm {
	return &PFCStorm{
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

// Name implements Detector.
func (d *PFCStorm) Name() string { return schemas.TypePFCStorm }

// Init implements Initializer.
func (d *PFCStorm) Init(fabric FabricView) error {
	d.fabric = fabric
	return nil
}

func (d *PFCStorm) track() *Tracker {
	if d.tracker == nil {
		d.tracker = NewTracker(schemas.TypePFCStorm, Policy{
			ResolveAfterSamples: d.ResolveAfterSamples,
			MinUpdateInterval:   d.MinUpdateInterval,
		})
		d.storms = make(map[schemas.PortID]*pfcIncident)
		d.victims = make(map[string]map[schemas.PortID]*pfcPort)
	}
	return d.tracker
}

// remoteSpreadWithin bounds how long after a storm's onset a port on another
// leaf may start being paused and still count as its victim.
const remoteSpreadWithin = 30 * time.Second

// pfcReading is what one sample says about pauses and traffic.
type pfcReading struct {
	valid        bool // the tx pause duration of some priority has a real delta
	prio         int  // busiest tx priority
	txFraction   float64
	txFramesPerS float64
	rxFraction   float64
	rxFramesPerS float64
	rcvGbps      float64
	rcvKnown     bool
	utilisation  float64 // receive Gb/s over the line rate; -1 unknown
	ecnPerS      float64
	cnpSentPerS  float64
	cnpHandPerS  float64
	stormWarn    uint64 // watchdog deltas
	stormErr     uint64
}

// pfcPort is the per-port state, created on the first sample with pauses
// worth remembering; healthy ports keep none.
type pfcPort struct {
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

// pfcIncident is an active (pending or open) incident.
type pfcIncident struct {
	origin   schemas.PortID
	netdev   string
	leaf     string
	onset    schemas.Millis
	silent   bool
	holding  bool // the latest observation of the origin held
	reading  pfcReading
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
func (st *pfcIncident) subject() schemas.Subject {
	if st.ambiguous {
		return schemas.Subject{Node: st.origin.Node}
	}
	return st.origin.Subject()
}

// OnSample implements PortDetector.
func (d *PFCStorm) OnSample(_ context.Context, port *PortState, s *Sample, em Emitter) {
	t := d.track()
	d.now = max(d.now, s.Time)
	r := pfcReadPauses(s)
	st, _ := LookupPortLocal[pfcPort](port, schemas.TypePFCStorm)
	active := d.storms[s.ID]
	if !r.valid {
		return
	}
	if st == nil {
		if r.txFraction < 0.02 && r.rxFraction < 0.02 && active == nil {
			return // the common case: a healthy port
		}
		st = PortLocal[pfcPort](port, schemas.TypePFCStorm)
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

	rxQuiet := r.rxFraction < 0.2
	if r.txFraction >= d.SustainFraction && rxQuiet {
		st.txStreak++
	} else {
		st.txStreak = 0
	}
	d.observeVictim(st, s, &r)

	switch {
	case active != nil:
		active.silent = false
		if r.txFraction >= d.HoldFraction {
			active.holding = true
			active.reading = r
			active.netdev = s.Netdev
			active.warn += r.stormWarn
			active.errs += r.stormErr
			d.collectAffected(active)
			t.Hold(s.Time, d.finding(active), em)
		} else {
			active.holding = false
			active.reading = r
			d.clear(active, s.Time, fmt.Sprintf("the port pauses %.0f%% of the time", 100*r.txFraction), em)
		}
	case !pfcSpansGap(port, s) && d.originNow(st, &r):
		nw := &pfcIncident{origin: s.ID, netdev: s.Netdev, leaf: st.leaf, onset: d.onset(st, s, &r), holding: true,
			reading: r, warn: r.stormWarn, errs: r.stormErr}
		d.storms[s.ID] = nw
		d.collectAffected(nw)
		t.Hold(s.Time, d.finding(nw), em)
	}
	st.prevTime, st.prevTx, st.prevIntvlMs = s.Time, r.txFraction, s.IntervalMs
}

// pfcSpansGap reports whether the sample's deltas cover a gap (the port or
// its node was silent for more than a couple of its intervals): the pause
// fraction is then an average over minutes in which anything may have
// happened, often a storm that was already inferred from the victims while
// the host was silent and resolved since. Such a reading holds or clears an
// active storm but never opens one; if the port still pauses, its next
// reading, one interval later, says so.
func pfcSpansGap(port *PortState, s *Sample) bool {
	usual := port.LastIntervalMs
	return usual > 0 && s.IntervalMs > usual*5/2+1000
}

// originNow decides whether the port's latest reading makes it a storm
// origin.
func (d *PFCStorm) originNow(st *pfcPort, r *pfcReading) bool {
	if r.rxFraction >= 0.2 {
		return false // paused itself: a victim, or a link in a cascade
	}
	watchdog := r.stormWarn > 0 || r.stormErr > 0
	stalled := r.utilisation >= 0 && r.utilisation < d.StalledUtilisation ||
		r.utilisation < 0 && r.rcvKnown && r.rcvGbps < 1
	incast := r.ecnPerS >= d.IncastEventsPerS || r.cnpSentPerS >= d.IncastEventsPerS
	if r.txFraction >= d.OpenFraction && (watchdog || stalled || !incast) {
		return true
	}
	need := 2
	if incast && !watchdog {
		need = 3
	}
	return st.txStreak >= need
}

// onset estimates when the origin started pausing: if the previous reading
// already paused a part of its interval, the storm began that part before
// it ended, else at the start of this reading's interval.
func (d *PFCStorm) onset(st *pfcPort, s *Sample, r *pfcReading) schemas.Millis {
	if st.prevTime > 0 && st.prevTx >= 0.05 && s.Since() <= st.prevTime+schemas.Millis(st.prevIntvlMs)/2 && r.txFraction > 0 {
		share := min(1, st.prevTx/r.txFraction)
		return st.prevTime - schemas.Millis(share*float64(st.prevIntvlMs))
	}
	return s.Since()
}

// observeVictim keeps the port's victim streak and the leaf index.
func (d *PFCStorm) observeVictim(st *pfcPort, s *Sample, r *pfcReading) {
	st.rxFraction, st.cnpHandPerS = r.rxFraction, r.cnpHandPerS
	if r.rxFraction >= d.VictimFraction && r.txFraction < d.SustainFraction {
		if st.victimStreak == 0 {
			st.victimFirst, st.victimSince = s.Time, s.Since()
		}
		st.victimStreak++
		if st.victimStreak == 2 {
			st.victimSure = s.Time
		}
		st.victimLast = s.Time
		idx := d.victims[st.leaf]
		if idx == nil {
			idx = make(map[schemas.PortID]*pfcPort)
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
func (d *PFCStorm) sustainedVictim(v *pfcPort, wm schemas.Millis) bool {
	if v.victimStreak < 2 {
		return false
	}
	return wm-v.victimLast <= 2*schemas.Millis(max(v.intervalMs, 1000))
}

func (d *PFCStorm) clear(st *pfcIncident, now schemas.Millis, why string, em Emitter) {
	t := d.track()
	subject := st.subject()
	t.Clear(now, subject, why, map[string]any{"tx_pause_fraction": pfcRound2(st.reading.txFraction)}, em)
	if _, still := t.active[subject]; !still {
		delete(d.storms, st.origin)
	}
}

// OnWatermark implements FabricDetector: victims join storms, silent origins
// are inferred, storms of silent origins hold or clear on their victims.
func (d *PFCStorm) OnWatermark(_ context.Context, fabric FabricView, wm schemas.Millis, em Emitter) {
	t := d.track()
	now := max(d.now, wm)
	for _, id := range pfcSortedStorms(d.storms) {
		st := d.storms[id]
		p, seen := fabric.Port(id)
		silent := !seen || pfcOverdue(p, wm)
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
			if now-st.clearAt >= schemas.Millis(max(st.victimIntervalMs, 1000)) {
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
func (d *PFCStorm) resolveSilent(st *pfcIncident, now schemas.Millis, em Emitter) {
	for range max(1, d.ResolveAfterSamples) {
		d.clear(st, now, "the origin has been silent and nothing is paused", em)
		if d.storms[st.origin] == nil {
			return
		}
	}
}

// pfcOverdue reports whether a port's next sample is late beyond read-time
// jitter (30% of an interval) at watermark wm: every sample up to wm has
// arrived, so the port is silent.
func pfcOverdue(p *PortState, wm schemas.Millis) bool {
	return wm-p.LastTime > pfcSilentAfter(p)
}

func pfcSilentAfter(p *PortState) schemas.Millis {
	interval := p.LastIntervalMs
	if interval <= 0 {
		interval = 10_000
	}
	return schemas.Millis(interval + interval*3/10)
}

// collectAffected adds the sustained victims nearest to st and refreshes the
// pause fractions of the known ones; it returns how many of its victims are
// paused now (a known victim's latest reading is enough: one clean interval
// of a victim must not end a storm).
func (d *PFCStorm) collectAffected(st *pfcIncident) int {
	var topo *schemas.Topology
	if d.fabric != nil {
		topo = d.fabric.Topology()
	}
	if topo == nil {
		return 0
	}
	wm := d.now
	if d.fabric != nil {
		wm = max(d.fabric.Watermark(), 0)
	}
	paused := 0
	for _, leaf := range pfcSortedLeaves(d.victims) {
		if leaf == "" {
			continue
		}
		for _, v := range pfcSortedVictims(d.victims[leaf]) {
			if v.id.Node == st.origin.Node {
				continue
			}
			_, known := st.byPort[v.id]
			fresh := max(wm, v.victimLast)-v.victimLast <= 2*schemas.Millis(max(v.intervalMs, 1000))
			if !fresh || !known && !d.sustainedVictim(v, max(wm, v.victimLast)) {
				continue
			}
			// A port paused in bursts while congestion control slows it
			// (CNPs handled) is an incast sender: that pause is not ours.
			if !known && v.cnpHandPerS >= d.IncastEventsPerS {
				continue
			}
			hops, ok := topo.Hops(st.origin, v.id)
			if !ok || hops > 4 || d.nearer(v.id, st, hops, topo) {
				continue
			}
			// Pauses that began well before the storm are someone else's.
			slack := 2 * schemas.Millis(max(v.intervalMs, 1000))
			if v.victimSince < st.onset-slack {
				continue
			}
			// Through the spines the pause spreads within seconds of the
			// onset (buffers fill in milliseconds); a port on another leaf
			// paused long after is paused by something else, such as a
			// second storm there.
			//
			// Unless the storm still lasts and nothing on the victim's
			// leaf pauses its own links: then the late victim is ours,
			// reached when its flows came to cross the storm's leaf (a
			// job shifting traffic tens of seconds after the onset).
			late := !known && hops > 2 && v.victimSince > st.onset+max(millis(remoteSpreadWithin), 3*schemas.Millis(v.intervalMs))
			if late && (!(st.holding || st.silent) || d.leafPauses(v.leaf, wm)) {
				continue
			}
			paused++
			st.lastVictim = max(st.lastVictim, v.victimLast)
			st.victimIntervalMs = max(st.victimIntervalMs, v.intervalMs)
			if i, ok := st.byPort[v.id]; ok {
				st.affected[i].PauseFraction = pfcRound2(v.rxFraction)
				continue
			}
			if st.byPort == nil {
				st.byPort = make(map[schemas.PortID]int)
			}
			st.affected = append(st.affected, schemas.Affected{Node: v.id.Node, Device: v.id.Device, Port: v.id.Port,
				FirstSeen: v.victimFirst, Hops: hops, PauseFraction: pfcRound2(v.rxFraction)})
			sort.SliceStable(st.affected, func(i, j int) bool {
				a, b := st.affected[i], st.affected[j]
				if a.FirstSeen != b.FirstSeen {
					return a.FirstSeen < b.FirstSeen
				}
				if a.Hops != b.Hops {
					return a.Hops < b.Hops
				}
				return subjectLess(schemas.Subject{Node: a.Node, Device: a.Device, Port: a.Port},
					schemas.Subject{Node: b.Node, Device: b.Device, Port: b.Port})
			})
			for i, a := range st.affected {
				st.byPort[schemas.PortID{Node: a.Node, Device: a.Device, Port: a.Port}] = i
			}
		}
	}
	return paused
}

// leafPauses reports whether a port under leaf sends pauses itself now
// (a tx pause streak in its latest readings): a storm of its own there, or
// the start of one, explains its leaf's victims better than a remote storm.
func (d *PFCStorm) leafPauses(leaf string, wm schemas.Millis) bool {
	if d.fabric == nil || leaf == "" {
		return true
	}
	found := false
	d.fabric.Ports(func(p *PortState) bool {
		st, ok := LookupPortLocal[pfcPort](p, schemas.TypePFCStorm)
		if ok && st.leaf == leaf && st.txStreak > 0 && wm-st.prevTime <= 2*schemas.Millis(max(st.prevIntvlMs, 1000)) {
			found = true
		}
		return !found
	})
	return found
}

// nearer reports whether another active storm is closer to port v than st
// (or as close and earlier): a victim belongs to one storm.
func (d *PFCStorm) nearer(v schemas.PortID, st *pfcIncident, hops int, topo *schemas.Topology) bool {
	for id, other := range d.storms {
		if other == st || id.Node == v.Node {
			continue
		}
		h, ok := topo.Hops(id, v)
		if !ok {
			continue
		}
		if h < hops || h == hops && (other.onset < st.onset || other.onset == st.onset && subjectLess(id.Subject(), st.origin.Subject())) {
			return true
		}
	}
	return false
}

// inferSilentOrigins looks for leaves whose victims no active storm explains
// and a host port on the leaf that stopped reporting as the pauses began.
func (d *PFCStorm) inferSilentOrigins(fabric FabricView, wm, now schemas.Millis, em Emitter) {
	topo := fabric.Topology()
	if topo == nil {
		return
	}
	for _, leaf := range pfcSortedLeaves(d.victims) {
		if leaf == "" || d.leafExplained(leaf) {
			continue
		}
		var victims []*pfcPort
		strong := false
		for _, v := range pfcSortedVictims(d.victims[leaf]) {
			// A sender paused in bursts while congestion control is
			// busy (CNPs handled) is an incast sender, not a victim.
			if d.sustainedVictim(v, wm) && v.cnpHandPerS < d.IncastEventsPerS {
				victims = append(victims, v)
				strong = strong || v.rxFraction >= 0.4
			}
		}
		if len(victims) < 2 && !(len(victims) == 1 && strong) {
			continue
		}
		firstSince, firstSeen := victims[0].victimSince, victims[0].victimFirst
		for _, v := range victims[1:] {
			firstSince, firstSeen = min(firstSince, v.victimSince), min(firstSeen, v.victimFirst)
		}
		// The evidence must be complete: every host port of the leaf that
		// reports must have reported past the victims' onset. Lines of
		// different nodes arrive up to an interval out of order, so a port
		// that is merely late may be the real (not silent) origin whose
		// storm opens when its sample arrives.
		if d.leafLagging(fabric, topo, leaf, firstSeen, wm) {
			continue
		}
		origin, last, ties, ok := d.silentPortOn(fabric, topo, leaf, victims, firstSeen, wm)
		if !ok {
			continue
		}
		// The decision's data time is when its evidence was complete: the
		// victims' quorum sustained, and the origin's silence provable
		// (overdue by the watermark's rule, plus the lateness the
		// watermark keeps). A processor fed in bursts (a replayed trace
		// delivers a node's scrape when its next one starts) ticks later
		// than that; the decision does not depend on when it ticked.
		sure := make([]schemas.Millis, len(victims))
		for i, v := range victims {
			sure[i] = v.victimSure
		}
		sort.Slice(sure, func(i, j int) bool { return sure[i] < sure[j] })
		decided := sure[min(1, len(sure)-1)]
		if p, seen := fabric.Port(origin); seen && p.Samples > 0 {
			decided = max(decided, p.LastTime+pfcSilentAfter(p)+(now-wm))
		}
		decided = min(max(decided, wm), now)
		onset := max(firstSince, last)
		st := &pfcIncident{origin: origin, leaf: leaf, onset: onset, silent: true, holding: true, silentAt: last, ambiguous: ties > 1, ties: ties}
		if p, seen := fabric.Port(origin); seen {
			st.netdev = p.Netdev
			if prev, ok := LookupPortLocal[pfcPort](p, schemas.TypePFCStorm); ok {
				st.reading.txFraction = prev.prevTx
			}
		}
		d.storms[origin] = st
		d.collectAffected(st)
		d.track().Hold(decided, d.finding(st), em)
	}
}

// leafLagging reports whether a host port of the leaf that is not overdue
// (so not silent) has not yet delivered a reading past firstSeen: its
// reading for the victims' onset may still be on its way.
func (d *PFCStorm) leafLagging(fabric FabricView, topo *schemas.Topology, leaf string, firstSeen, wm schemas.Millis) bool {
	for _, q := range topo.HostPorts(leaf) {
		p, seen := fabric.Port(q)
		if !seen || p.Samples == 0 || pfcOverdue(p, wm) {
			continue
		}
		if p.LastTime < firstSeen {
			return true
		}
	}
	return false
}

// leafExplained reports whether an active storm's origin is on the leaf.
func (d *PFCStorm) leafExplained(leaf string) bool {
	for _, st := range d.storms {
		if st.leaf == leaf {
			return true
		}
	}
	return false
}

// silentPortOn picks the silent origin on a leaf: a host port, not a victim,
// overdue at the watermark, whose silence began no later than an interval
// after the first victim reading (and not long before: a port dead for an
// hour is not pausing anyone). Preference: its last reading already paused,
// then the silence nearest the victims' onset in whole intervals, then name
// order. Its last sample time is returned, and how many ports of its node
// tie with it on everything but their names (1: it alone).
func (d *PFCStorm) silentPortOn(fabric FabricView, topo *schemas.Topology, leaf string, victims []*pfcPort,
	firstSeen, wm schemas.Millis) (id schemas.PortID, last schemas.Millis, ties int, ok bool) {
	isVictim := make(map[schemas.PortID]bool, len(victims))
	for _, v := range victims {
		isVictim[v.id] = true
	}
	type candidate struct {
		id      schemas.PortID
		last    schemas.Millis
		pausing bool
		gap     int64 // intervals between the silence and the victims' onset
		unseen  bool
	}
	var cands []candidate
	better := func(a, b *candidate) bool {
		if a.unseen != b.unseen {
			return !a.unseen
		}
		if a.pausing != b.pausing {
			return a.pausing
		}
		if a.gap != b.gap {
			return a.gap < b.gap
		}
		return subjectLess(a.id.Subject(), b.id.Subject())
	}
	for _, q := range topo.HostPorts(leaf) {
		if isVictim[q] {
			continue
		}
		if _, active := d.storms[q]; active {
			continue
		}
		c := candidate{id: q}
		p, seen := fabric.Port(q)
		switch {
		case seen && p.Samples > 0:
			if !pfcOverdue(p, wm) {
				continue
			}
			interval := schemas.Millis(max(p.LastIntervalMs, 1000))
			if p.LastTime > firstSeen+interval || p.LastTime < firstSeen-millis(30*time.Minute) {
				continue
			}
			c.last = p.LastTime
			if st, ok := LookupPortLocal[pfcPort](p, schemas.TypePFCStorm); ok {
				c.pausing = st.prevTx >= 0.05 && st.prevTime == p.LastTime
			}
		case fabric.Complete():
			// Never reported since the processor started, and this
			// processor sees every node: its collector is down.
			c.unseen, c.last = true, firstSeen
		default:
			continue
		}
		cands = append(cands, c)
	}
	// A hung host silences all its ports at once: the node's silence is
	// what is compared with the victims' onset, so its ports tie on it
	// (and then name order decides between them, for nothing in the
	// counters says which of a silent node's ports is stuck).
	nodeLast := map[string]schemas.Millis{}
	for _, c := range cands {
		nodeLast[c.id.Node] = max(nodeLast[c.id.Node], c.last)
	}
	var best *candidate
	for i := range cands {
		c := &cands[i]
		if !c.unseen {
			interval := schemas.Millis(1000)
			if p, ok := fabric.Port(c.id); ok {
				interval = schemas.Millis(max(p.LastIntervalMs, 1000))
			}
			c.gap = int64((firstSeen - nodeLast[c.id.Node] + interval/2) / interval)
		}
		if best == nil || better(c, best) {
			best = c
		}
	}
	if best == nil {
		return schemas.PortID{}, 0, 0, false
	}
	for i := range cands {
		c := &cands[i]
		if c.id.Node == best.id.Node && c.unseen == best.unseen && c.pausing == best.pausing && c.gap == best.gap {
			ties++
		}
	}
	return best.id, best.last, ties, true
}

func pfcSortedStorms(m map[schemas.PortID]*pfcIncident) []schemas.PortID {
	ids := make([]schemas.PortID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return subjectLess(ids[i].Subject(), ids[j].Subject()) })
	return ids
}

func pfcSortedLeaves(m map[string]map[schemas.PortID]*pfcPort) []string {
	out := make([]string, 0, len(m))
	for l := range m {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

func pfcSortedVictims(m map[schemas.PortID]*pfcPort) []*pfcPort {
	out := make([]*pfcPort, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return subjectLess(out[i].id.Subject(), out[j].id.Subject()) })
	return out
}

// pfcReadPauses reads the sample's pause, traffic and congestion figures. A
// counter that is a baseline, was reset or held says nothing about this
// interval; a reading without one usable tx pause duration is not valid.
func pfcReadPauses(s *Sample) pfcReading {
	var r pfcReading
	if s.IntervalMs <= 0 {
		return r
	}
	sec := float64(s.IntervalMs) / 1000
	var txDur, txFrames, rxDur, rxFrames [8]float64
	var txOK [8]bool
	const unusable = schemas.FlagFirst | schemas.FlagReset | schemas.FlagHeld
	// The pause counters: one of them that says nothing about this
	// interval makes the whole reading invalid.
	for p := range 8 {
		for k, id := range [4]schemas.CounterID{idTxPauseDuration[p], idTxPause[p], idRxPauseDuration[p], idRxPause[p]} {
			c, ok := s.CounterByID(id)
			if !ok {
				continue
			}
			if c.Flags&unusable != 0 {
				return pfcReading{}
			}
			v := float64(c.Delta)
			switch k {
			case 0:
				txDur[p], txOK[p] = v, true
			case 1:
				txFrames[p] = v
			case 2:
				rxDur[p] = v
			default:
				rxFrames[p] = v
			}
		}
	}
	if c, ok := s.CounterByID(idStormWarning); ok && c.Flags&unusable == 0 {
		r.stormWarn = c.Delta
	}
	if c, ok := s.CounterByID(idStormError); ok && c.Flags&unusable == 0 {
		r.stormErr = c.Delta
	}
	if c, ok := s.CounterByID(idPortRcvData); ok && c.Flags&unusable == 0 {
		r.rcvGbps = float64(c.Delta) * 8 / sec / 1e9
		r.rcvKnown = true
	}
	if c, ok := s.CounterByID(idCNP[cnpMarked]); ok && c.Flags&unusable == 0 {
		r.ecnPerS = float64(c.Delta) / sec
	}
	if c, ok := s.CounterByID(idCNP[cnpSent]); ok && c.Flags&unusable == 0 {
		r.cnpSentPerS = float64(c.Delta) / sec
	}
	if c, ok := s.CounterByID(idCNP[cnpHandled]); ok && c.Flags&unusable == 0 {
		r.cnpHandPerS = float64(c.Delta) / sec
	}
	micros := float64(s.IntervalMs) * 1000
	for p := range 8 {
		if !txOK[p] {
			continue
		}
		if f := min(1, txDur[p]/micros); !r.valid || f > r.txFraction {
			r.valid, r.prio, r.txFraction, r.txFramesPerS = true, p, f, txFrames[p]/sec
		}
		if f := min(1, rxDur[p]/micros); f > r.rxFraction {
			r.rxFraction, r.rxFramesPerS = f, rxFrames[p]/sec
		}
	}
	r.utilisation = -1
	if gbps := pfcRateGbps(s.Rate); gbps > 0 && r.rcvKnown {
		r.utilisation = r.rcvGbps / gbps
	}
	return r
}

// pfcPauseCounter parses {tx,rx}_prio<N>_pause[_duration].
func pfcPauseCounter(name string) (dir byte, prio int, duration, ok bool) {
	if len(name) < len("tx_prio0_pause") || name[1] != 'x' || name[2:7] != "_prio" {
		return 0, 0, false, false
	}
	dir = name[0]
	if dir != 't' && dir != 'r' || name[7] < '0' || name[7] > '7' {
		return 0, 0, false, false
	}
	switch name[8:] {
	case "_pause":
		return dir, int(name[7] - '0'), false, true
	case "_pause_duration":
		return dir, int(name[7] - '0'), true, true
	}
	return 0, 0, false, false
}

// pfcRateGbps reads the sysfs rate text ("200 Gb/sec (4X HDR)").
func pfcRateGbps(rate string) float64 {
	f, _, ok := strings.Cut(strings.TrimSpace(rate), " ")
	if !ok {
		return 0
	}
	v, err := strconv.ParseFloat(f, 64)
	if err != nil || v <= 0 {
		return 0
	}
	return v
}

func pfcRound2(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return math.Round(x*100) / 100
}

func (d *PFCStorm) finding(st *pfcIncident) Finding {
	r := st.reading
	severity := schemas.SeverityWarning
	if st.warn+st.errs > 0 || len(st.affected) > 0 || r.txFraction >= 0.8 || st.silent {
		severity = schemas.SeverityCritical
	}
	origin := st.origin
	where := portName(origin, st.netdev)
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
		summary = fmt.Sprintf("%s is pausing %s %.0f%% of the time while receiving almost nothing", where, leaf, 100*r.txFraction)
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
	evidence := map[string]any{
		"tx_pause_fraction":             pfcRound2(r.txFraction),
		"tx_pause_frames_per_s":         math.Round(pfcFinite(r.txFramesPerS)),
		"rx_pause_fraction":             pfcRound2(r.rxFraction),
		"rcv_gbps":                      pfcRound2(r.rcvGbps),
		"priority":                      r.prio,
		"tx_pause_storm_warning_events": st.warn,
		"tx_pause_storm_error_events":   st.errs,
		"affected_ports":                len(st.affected),
	}
	if st.silent {
		// The origin's own figures are unknown: what the victims show is
		// the evidence.
		var sum float64
		for _, a := range st.affected {
			sum += a.PauseFraction
		}
		if len(st.affected) > 0 {
			evidence["victim_pause_fraction_mean"] = pfcRound2(sum / float64(len(st.affected)))
		}
		evidence["origin_silent_s"] = math.Max(0, float64(d.now-st.silentAt)/1000)
		delete(evidence, "tx_pause_frames_per_s")
		delete(evidence, "rx_pause_fraction")
		delete(evidence, "rcv_gbps")
	}
	netdev := netdevOf(origin, st.netdev)
	checks := []schemas.Check{
		onHost(origin.Node, fmt.Sprintf("ethtool -S %s | grep -E 'pause|storm'", netdev), "pause frames sent per priority and the storm watchdog's count"),
	}
	if st.silent {
		checks = append(checks, schemas.Check{Command: "ping -c 3 " + shellQuote(origin.Node), Note: origin.Node + " stopped reporting: is the host hung (console, BMC)? a stalled receive path (CQ polling, hung process) keeps the NIC pausing"})
	} else {
		checks = append(checks, onHost(origin.Node, "top -b -n 1 -o %CPU | head -20", "is the host's receive path stalled (CQ polling, hung process)?"))
	}
	checks = append(checks,
		onHost(origin.Node, "mlnx_qos -i "+netdev, "PFC watchdog / pfc-prevention-tout"),
		onSwitch(d.fabric, origin, "PFC watchdog and pause counters"))
	scope, originRef := schemas.ScopePort, &schemas.Origin{Node: origin.Node, Device: origin.Device, Port: origin.Port, Silent: st.silent}
	if st.ambiguous {
		scope, originRef = schemas.ScopeNode, &schemas.Origin{Node: origin.Node, Silent: st.silent}
		evidence["origin_candidate_ports"] = st.ties
	}
	return Finding{
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

func pfcFinite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
