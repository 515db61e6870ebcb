package pfcstorm

// This file infers a storm origin that stopped reporting from its victims
// under one leaf (see PFCStorm).

import (
	"sort"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Rules of the silent-origin inference.
const (
	// defaultIntervalMs: the interval assumed for a port that has not
	// shown one yet (the collector's default).
	defaultIntervalMs = 10_000
	// jitterPercent: a sample is overdue when later than its interval
	// plus 30% of it (read-time jitter).
	jitterPercent = 30
	// silentQuorum: sustained victims under one leaf that prove a storm
	// there; one is enough when it is paused strongVictimFraction.
	silentQuorum         = 2
	strongVictimFraction = 0.4
	// silentMaxAge: a port silent for longer before the victims' onset
	// is dead, not pausing anyone.
	silentMaxAge = 30 * time.Minute
)

// overdue reports whether a port's next sample is late beyond read-time
// jitter (30% of an interval) at watermark wm: every sample up to wm has
// arrived, so the port is silent.
func overdue(p *processor.PortState, wm schemas.Millis) bool {
	return wm-p.LastTime > silentAfter(p)
}

func silentAfter(p *processor.PortState) schemas.Millis {
	interval := p.LastIntervalMs
	if interval <= 0 {
		interval = defaultIntervalMs
	}
	return schemas.Millis(interval + interval*jitterPercent/100)
}

// inferSilentOrigins looks for leaves whose victims no active storm explains
// and a host port on the leaf that stopped reporting as the pauses began.
func (d *Detector) inferSilentOrigins(fabric processor.FabricView, wm, now schemas.Millis, em processor.Emitter) {
	topo := fabric.Topology()
	if topo == nil {
		return
	}
	for _, leaf := range sortedLeaves(d.victims) {
		// A port of the leaf that reports and sends pauses now is the
		// likelier origin (its storm opens when its streak is long
		// enough): a host that merely has a gap in its samples at that
		// moment is not to be blamed for its pauses.
		if leaf == "" || d.leafExplained(leaf) || d.leafPausesReporting(fabric, leaf, wm) {
			continue
		}
		var victims []*portState
		strong := false
		for _, v := range sortedVictims(d.victims[leaf]) {
			// A sender paused in bursts while congestion control is
			// busy (CNPs handled) is an incast sender, not a victim; a
			// victim an active storm elsewhere already claimed (a remote
			// victim through the spine) is explained, no evidence of a
			// storm on its own leaf.
			if d.sustainedVictim(v, wm) && v.cnpHandPerS < d.IncastEventsPerS && !d.claimed(v.id) {
				victims = append(victims, v)
				strong = strong || v.rxFraction >= strongVictimFraction
			}
		}
		if len(victims) < silentQuorum && !(len(victims) == 1 && strong) {
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
			decided = max(decided, p.LastTime+silentAfter(p)+(now-wm))
		}
		decided = min(max(decided, wm), now)
		onset := max(firstSince, last)
		st := &incident{origin: origin, leaf: leaf, onset: onset, silent: true, holding: true, silentAt: last, ambiguous: ties > 1, ties: ties}
		if p, seen := fabric.Port(origin); seen {
			st.netdev = p.Netdev
			if prev, ok := processor.LookupPortLocal[portState](p, schemas.TypePFCStorm); ok {
				st.reading.TxFraction = prev.prevTx
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
func (d *Detector) leafLagging(fabric processor.FabricView, topo *schemas.Topology, leaf string, firstSeen, wm schemas.Millis) bool {
	for _, q := range topo.HostPorts(leaf) {
		p, seen := fabric.Port(q)
		if !seen || p.Samples == 0 || overdue(p, wm) {
			continue
		}
		if p.LastTime < firstSeen {
			return true
		}
	}
	return false
}

// claimed reports whether an active storm counts the port among its
// affected.
func (d *Detector) claimed(id schemas.PortID) bool {
	for _, st := range d.storms {
		if _, ok := st.byPort[id]; ok {
			return true
		}
	}
	return false
}

// leafPausesReporting reports whether a host port under leaf that is not
// silent (not overdue at wm) is in a tx pause streak in its latest, fresh
// reading.
func (d *Detector) leafPausesReporting(fabric processor.FabricView, leaf string, wm schemas.Millis) bool {
	found := false
	fabric.Ports(func(p *processor.PortState) bool {
		st, ok := processor.LookupPortLocal[portState](p, schemas.TypePFCStorm)
		if ok && st.leaf == leaf && st.txStreak > 0 && !overdue(p, wm) &&
			wm-st.prevTime <= freshIntervals*schemas.Millis(max(st.prevIntvlMs, minIntervalMs)) {
			found = true
		}
		return !found
	})
	return found
}

// leafExplained reports whether an active storm's origin is on the leaf.
func (d *Detector) leafExplained(leaf string) bool {
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
func (d *Detector) silentPortOn(fabric processor.FabricView, topo *schemas.Topology, leaf string, victims []*portState,
	firstSeen, wm schemas.Millis) (id schemas.PortID, last schemas.Millis, ties int, ok bool) {
	cands := d.silentCandidates(fabric, topo, leaf, victims, firstSeen, wm)
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
			interval := schemas.Millis(minIntervalMs)
			if p, ok := fabric.Port(c.id); ok {
				interval = schemas.Millis(max(p.LastIntervalMs, minIntervalMs))
			}
			c.gap = int64((firstSeen - nodeLast[c.id.Node] + interval/2) / interval)
		}
		if best == nil || c.better(best) {
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

// candidate is a host port that may be a silent origin.
type candidate struct {
	id      schemas.PortID
	last    schemas.Millis
	pausing bool
	gap     int64 // intervals between the silence and the victims' onset
	unseen  bool
}

// better is the preference of silentPortOn.
func (a *candidate) better(b *candidate) bool {
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

// silentCandidates lists the leaf's host ports that may be the silent
// origin (gap not yet set).
func (d *Detector) silentCandidates(fabric processor.FabricView, topo *schemas.Topology, leaf string, victims []*portState,
	firstSeen, wm schemas.Millis) []candidate {
	isVictim := make(map[schemas.PortID]bool, len(victims))
	for _, v := range victims {
		isVictim[v.id] = true
	}
	var cands []candidate
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
			if !overdue(p, wm) {
				continue
			}
			interval := schemas.Millis(max(p.LastIntervalMs, minIntervalMs))
			if p.LastTime > firstSeen+interval || p.LastTime < firstSeen-millis(silentMaxAge) {
				continue
			}
			c.last = p.LastTime
			if st, ok := processor.LookupPortLocal[portState](p, schemas.TypePFCStorm); ok {
				c.pausing = st.prevTx >= pausingFraction && st.prevTime == p.LastTime
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
	return cands
}
