package pfcstorm

// This file follows a storm's spread through the topology: which paused
// ports are the victims of which storm (see PFCStorm).

import (
	"sort"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// remoteSpreadWithin bounds how long after a storm's onset a port on another
// leaf may start being paused and still count as its victim.
const remoteSpreadWithin = 30 * time.Second

// Topology distances of the spread: two hops host-leaf-host on one leaf,
// four through a spine. A storm's pause does not reach further before the
// spines' own PFC watchdog or another storm explains it.
const (
	sameLeafHops  = 2
	maxVictimHops = 4
	// remoteSpreadIntervals: with slow scrapes, remoteSpreadWithin is at
	// least three of the victim's intervals (its pause shows one reading
	// late at most twice over).
	remoteSpreadIntervals = 3
)

// collectAffected adds the sustained victims nearest to st and refreshes the
// pause fractions of the known ones; it returns how many of its victims are
// paused now (a known victim's latest reading is enough: one clean interval
// of a victim must not end a storm).
func (d *Detector) collectAffected(st *incident) int {
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
	for _, leaf := range sortedLeaves(d.victims) {
		if leaf == "" {
			continue
		}
		for _, v := range sortedVictims(d.victims[leaf]) {
			if v.id.Node == st.origin.Node {
				continue
			}
			_, known := st.byPort[v.id]
			fresh := max(wm, v.victimLast)-v.victimLast <= freshIntervals*schemas.Millis(max(v.intervalMs, minIntervalMs))
			if !fresh || !known && !d.sustainedVictim(v, max(wm, v.victimLast)) {
				continue
			}
			hops, ok := topo.Hops(st.origin, v.id)
			if !ok || hops > maxVictimHops || d.nearer(v.id, st, hops, topo) {
				continue
			}
			// A port paused in bursts while congestion control slows it
			// (CNPs handled) is an incast sender: that pause is not ours.
			// But CNPs do not tell the two apart on their own: a storm's
			// victims send through the queues the storm fills, so their
			// flows are ECN-marked and they handle CNPs too. What tells
			// them apart is how much of the time the port is paused:
			// congestion control ends an incast's pauses within
			// milliseconds, so an incast sender is paused a small part of
			// an interval, while a victim of a storm is paused as long as
			// the storm lasts. And under the storm's own leaf, whose
			// buffers the origin fills, every port paused since the onset
			// is the storm's (the leaf pauses whatever sends into it).
			if !known && v.cnpHandPerS >= d.IncastEventsPerS && hops > sameLeafHops && v.rxFraction < strongVictimFraction {
				continue
			}
			// Pauses that began well before the storm are someone else's.
			slack := freshIntervals * schemas.Millis(max(v.intervalMs, minIntervalMs))
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
			late := !known && hops > sameLeafHops && v.victimSince > st.onset+max(millis(remoteSpreadWithin), remoteSpreadIntervals*schemas.Millis(v.intervalMs))
			if late && (!(st.holding || st.silent) || d.leafPauses(v.leaf, wm)) {
				continue
			}
			paused++
			st.lastVictim = max(st.lastVictim, v.victimLast)
			st.victimIntervalMs = max(st.victimIntervalMs, v.intervalMs)
			if i, ok := st.byPort[v.id]; ok {
				st.affected[i].PauseFraction = round2(v.rxFraction)
				continue
			}
			st.addAffected(schemas.Affected{Node: v.id.Node, Device: v.id.Device, Port: v.id.Port,
				FirstSeen: v.victimFirst, Hops: hops, PauseFraction: round2(v.rxFraction)})
		}
	}
	return paused
}

// addAffected adds a victim to the storm, keeping affected ordered (first
// seen, then nearest, then by name) and byPort pointing into it.
func (st *incident) addAffected(v schemas.Affected) {
	if st.byPort == nil {
		st.byPort = make(map[schemas.PortID]int)
	}
	st.affected = append(st.affected, v)
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

// leafPauses reports whether a port under leaf sends pauses itself now
// (a tx pause streak in its latest readings): a storm of its own there, or
// the start of one, explains its leaf's victims better than a remote storm.
func (d *Detector) leafPauses(leaf string, wm schemas.Millis) bool {
	if d.fabric == nil || leaf == "" {
		return true
	}
	found := false
	d.fabric.Ports(func(p *processor.PortState) bool {
		st, ok := processor.LookupPortLocal[portState](p, schemas.TypePFCStorm)
		if ok && st.leaf == leaf && st.txStreak > 0 && wm-st.prevTime <= freshIntervals*schemas.Millis(max(st.prevIntvlMs, minIntervalMs)) {
			found = true
		}
		return !found
	})
	return found
}

// nearer reports whether another active storm is closer to port v than st
// (or as close and earlier): a victim belongs to one storm.
func (d *Detector) nearer(v schemas.PortID, st *incident, hops int, topo *schemas.Topology) bool {
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

func sortedStorms(m map[schemas.PortID]*incident) []schemas.PortID {
	ids := make([]schemas.PortID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return subjectLess(ids[i].Subject(), ids[j].Subject()) })
	return ids
}

func sortedLeaves(m map[string]map[schemas.PortID]*portState) []string {
	out := make([]string, 0, len(m))
	for l := range m {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

func sortedVictims(m map[schemas.PortID]*portState) []*portState {
	out := make([]*portState, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return subjectLess(out[i].id.Subject(), out[j].id.Subject()) })
	return out
}

func millis(d time.Duration) schemas.Millis { return schemas.Millis(d / time.Millisecond) }

func subjectLess(a, b schemas.Subject) bool {
	if a.Node != b.Node {
		return a.Node < b.Node
	}
	if a.Device != b.Device {
		return a.Device < b.Device
	}
	return a.Port < b.Port
}
