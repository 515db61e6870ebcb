package collector

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Engine turns raw cumulative readings into deltas with the hardware's
// semantics. Every source (sysfs, ethtool, trace, simulator) goes through it,
// so the rules live in one place:
//
//   - the first reading of a port, or of a counter, is a baseline: no delta;
//   - saturating 16/8/4-bit error counters stop at their maximum and are flagged;
//   - 32-bit hw_counters wrap;
//   - a fall toward zero of one counter is a reset (counters cleared), and
//     the delta counts from zero;
//   - a reading that shows the whole port restarted (driver reload, device
//     reset: its netdev was re-created, or its counters fell in a way no
//     wrap, glitch or single clear explains) is a new baseline for every
//     counter of the port, those that grew included: after a reload a
//     counter kept by the firmware can stand anywhere relative to the old
//     reading, and a delta across the reload would be fiction (issue 25:
//     rx_discards_phy +382,471,778,169 in 10 s);
//   - a single counter reading 0 out of the blue is a read glitch until the
//     next reading says otherwise (rdmamap returns 0 for a file it cannot
//     read): the old value stays the baseline, so no reset and no huge delta;
//   - every counter of a port reading 0 at once is a port that could not be
//     read, not a clear: each keeps its baseline (held) for as long as the
//     port reads all zero, and the next real reading counts from there (a
//     real clear shows as values below the baseline, a reset then);
//   - a counter missing from a reading is unknown: its baseline is kept, and
//     a port reading without any counter is no sample at all (its interval
//     goes on from the last real one);
//   - a sample not newer than the port's last one (redelivery, out of order)
//     is dropped;
//   - port_xmit_data and port_rcv_data count 4-byte words and become bytes;
//   - settings such as hw_counters/lifespan are passed on as gauges.
//
// An Engine is not safe for concurrent use.
type Engine struct {
	bootID func(node string, restarts int) string
	nodes  map[string]*nodeState
	stats  EngineStats
}

// EngineStats counts what the engine dropped or repaired.
type EngineStats struct {
	Samples    uint64 // port samples accepted
	Duplicates uint64 // port samples dropped as not newer than the last
	Empty      uint64 // port readings without a counter, dropped
	Glitches   uint64 // counters held back as read glitches
	Resets     uint64 // counters that reset
	// PortRestarts counts port readings taken for a restarted port (every
	// counter a new baseline).
	PortRestarts uint64
	Wraps        uint64 // counters that wrapped
	Restarts     uint64 // collector restarts seen
}

type nodeState struct {
	bootID   string
	restarts int
	seq      uint64
	ports    map[portKey]*portState
}

type portKey struct {
	device string
	port   int
}

type counterKey struct {
	src  schemas.Source
	name string
}

type counterState struct {
	value uint64
	// held is set when the last reading was a suspected glitch (0): value
	// still holds the reading before it.
	held bool
}

type portState struct {
	last     time.Time
	counters map[counterKey]*counterState
	// ifindex and lower identify the netdev (and a bond's members) the
	// port was last read with; 0 and nil: unknown.
	ifindex int
	lower   []int
}

// NewEngine returns an engine. bootID names a node's collector run; it is
// called again after each restart (restarts counts them from 0), so replay
// can use a deterministic id and a live collector a random one.
func NewEngine(bootID func(node string, restarts int) string) *Engine {
	if bootID == nil {
		bootID = func(node string, restarts int) string { return fmt.Sprintf("boot-%d", restarts) }
	}
	return &Engine{bootID: bootID, nodes: make(map[string]*nodeState)}
}

// Stats returns the counts so far.
func (e *Engine) Stats() EngineStats { return e.stats }

func (e *Engine) node(name string) *nodeState {
	n := e.nodes[name]
	if n == nil {
		n = &nodeState{bootID: e.bootID(name, 0), ports: make(map[portKey]*portState)}
		e.nodes[name] = n
	}
	return n
}

// Apply folds one reading into the engine's state and returns the batch to
// publish, or nil when the reading yields nothing (only duplicates, or a
// restart marker without ports).
func (e *Engine) Apply(r *Reading) *schemas.CounterBatch {
	n := e.node(r.Node)
	if r.Restart {
		e.stats.Restarts++
		n.restarts++
		n.bootID = e.bootID(r.Node, n.restarts)
		n.seq = 0
		n.ports = make(map[portKey]*portState)
	}
	var out []schemas.PortSample
	for i := range r.Ports {
		pr := &r.Ports[i]
		t := pr.Time
		if t.IsZero() {
			t = r.Time
		}
		key := portKey{pr.Device, pr.Port}
		ps := n.ports[key]
		if ps != nil && !t.After(ps.last) {
			e.stats.Duplicates++
			continue
		}
		if !hasCounters(pr) {
			// Nothing was readable: an unknown, not a sample. The port's
			// baseline and last time stay, so the next reading's delta and
			// interval both span the gap.
			e.stats.Empty++
			continue
		}
		if ps == nil {
			ps = &portState{counters: make(map[counterKey]*counterState)}
			n.ports[key] = ps
		}
		out = append(out, e.portSample(ps, pr, t))
		e.stats.Samples++
	}
	if len(out) == 0 {
		return nil
	}
	n.seq++
	b := &schemas.CounterBatch{
		Version: schemas.Version,
		Node:    r.Node,
		BootID:  n.bootID,
		Seq:     n.seq,
		TimeMs:  r.Time.UnixMilli(),
		Ports:   out,
	}
	for _, p := range out {
		if p.TimeMs > b.TimeMs {
			b.TimeMs = p.TimeMs
		}
	}
	return b
}

// hasCounters says the reading carries at least one counter (gauges such as
// lifespan alone say nothing about traffic or errors).
func hasCounters(pr *PortReading) bool {
	for _, src := range [...]struct {
		src schemas.Source
		m   map[string]uint64
	}{{schemas.SourceCounters, pr.Counters}, {schemas.SourceHWCounters, pr.HWCounters}, {schemas.SourceEthtool, pr.Ethtool}} {
		for name := range src.m {
			if schemas.KindOf(src.src, name) != schemas.Gauge {
				return true
			}
		}
	}
	return false
}

type rawCounter struct {
	key   counterKey
	kind  schemas.Kind
	value uint64
}

func (e *Engine) portSample(ps *portState, pr *PortReading, t time.Time) schemas.PortSample {
	s := schemas.PortSample{
		Device:    pr.Device,
		Port:      pr.Port,
		Netdev:    pr.Netdev,
		LinkLayer: pr.LinkLayer,
		State:     pr.State,
		Rate:      pr.Rate,
		TimeMs:    t.UnixMilli(),
	}
	baseline := ps.last.IsZero()
	if !baseline {
		s.IntervalMs = t.Sub(ps.last).Milliseconds()
	}
	ps.last = t

	var raws []rawCounter
	raws, s.Gauges = splitReading(pr)
	restart, portZero := readingRestart(ps, pr, raws, baseline)
	s.Counters = make([]schemas.CounterDelta, 0, len(raws))
	if restart == restartPort {
		e.stats.PortRestarts++
		for _, rc := range raws {
			s.Counters = append(s.Counters, e.restartDelta(ps, rc))
		}
		return s
	}
	lim := deltaLimits{intervalSec: uint64(s.IntervalMs+999) / 1000}
	if !baseline {
		lim.packets, lim.packetsKnown = packetDelta(ps, raws)
	}
	if restart == restartPMA {
		e.stats.PortRestarts++
	}
	for _, rc := range raws {
		if restart == restartPMA && rc.key.src == schemas.SourceCounters {
			s.Counters = append(s.Counters, e.restartDelta(ps, rc))
			continue
		}
		if portZero {
			if cd, ok := e.heldUnreadable(ps, rc); ok {
				s.Counters = append(s.Counters, cd)
			}
			continue
		}
		s.Counters = append(s.Counters, e.counterDelta(ps, rc, lim))
	}
	return s
}

// splitReading splits a port's reading into its counters, sorted by source
// and name, and its gauges (nil when it has none).
func splitReading(pr *PortReading) (raws []rawCounter, gauges map[string]uint64) {
	raws = make([]rawCounter, 0, len(pr.Counters)+len(pr.HWCounters)+len(pr.Ethtool))
	for _, src := range [...]struct {
		src schemas.Source
		m   map[string]uint64
	}{{schemas.SourceCounters, pr.Counters}, {schemas.SourceHWCounters, pr.HWCounters}, {schemas.SourceEthtool, pr.Ethtool}} {
		for name, v := range src.m {
			kind := schemas.KindOf(src.src, name)
			if kind == schemas.Gauge {
				if gauges == nil {
					gauges = make(map[string]uint64)
				}
				gauges[name] = v
				continue
			}
			raws = append(raws, rawCounter{counterKey{src.src, name}, kind, v})
		}
	}
	// Map order is random; sorted counters make batches, and so replay,
	// byte-for-byte repeatable.
	sort.Slice(raws, func(i, j int) bool {
		if raws[i].key.src != raws[j].key.src {
			return raws[i].key.src < raws[j].key.src
		}
		return raws[i].key.name < raws[j].key.name
	})
	return raws, gauges
}

// readingRestart says whether the port started over since its last reading
// (a replaced netdev, or counters that look it) and whether the reading
// looks unreadable, all zeros; neither on a baseline reading. It records
// the reading's netdev identity in ps.
func readingRestart(ps *portState, pr *PortReading, raws []rawCounter, baseline bool) (restart restartKind, portZero bool) {
	replaced := netdevReplaced(ps, pr)
	portZero = !baseline && looksUnreadable(ps, raws)
	restart = restartNone
	if !baseline && !portZero {
		if replaced {
			restart = restartPort
		} else {
			restart = looksLikePortRestart(ps, raws)
		}
	}
	return restart, portZero
}

// netdevReplaced records the netdev identity pr was read with and says
// whether it differs from the last known one. An ifindex is never reused
// while the netdev exists and a reload re-creates the netdev with a new
// one, so a changed ifindex means every counter behind it started over;
// for a bond, whose own netdev survives a reload of its members, a
// changed member list (a member re-created, added or removed) means its
// summed statistics did. Unknown (0, nil: a trace) says nothing.
func netdevReplaced(ps *portState, pr *PortReading) bool {
	replaced := false
	if pr.Ifindex > 0 {
		replaced = ps.ifindex > 0 && ps.ifindex != pr.Ifindex
		ps.ifindex = pr.Ifindex
	}
	if len(pr.LowerIfindex) > 0 {
		replaced = replaced || (len(ps.lower) > 0 && !slices.Equal(ps.lower, pr.LowerIfindex))
		ps.lower = slices.Clone(pr.LowerIfindex)
	}
	return replaced
}

// restartDelta makes rc a new baseline of a restarted port: flagged reset,
// delta 0, so no detector reads the interval and no sum counts it.
func (e *Engine) restartDelta(ps *portState, rc rawCounter) schemas.CounterDelta {
	cd, cs := startDelta(ps, rc)
	if cs == nil {
		return cd
	}
	cs.value, cs.held = rc.value, false
	cd.Flags |= schemas.FlagReset
	e.stats.Resets++
	return cd
}

// deltaLimits bound what one reading of a port can plausibly count.
type deltaLimits struct {
	intervalSec uint64
	// packets is how many packets the port received and sent since its last
	// reading (port_rcv_packets + port_xmit_packets), when both are known.
	packets      uint64
	packetsKnown bool
}

// packetEventSlack is how far a q-counter may run ahead of the port's packet
// counters before its 0 baseline is taken for a misreading: every q-counter
// counts events of packets that crossed the port (marked, NAKed, dropped for
// lack of buffers, CNPs sent), so it cannot outrun them; the slack allows for
// the two files being read a moment apart.
const packetEventSlack = 2

// packetDelta is the port's packet count since its last reading, known only
// when both packet counters moved forward from a non-zero baseline.
func packetDelta(ps *portState, raws []rawCounter) (uint64, bool) {
	var sum uint64
	seen := 0
	for _, rc := range raws {
		if rc.key.src != schemas.SourceCounters || (rc.key.name != "port_rcv_packets" && rc.key.name != "port_xmit_packets") {
			continue
		}
		cs := ps.counters[rc.key]
		if cs == nil || cs.value == 0 || cs.held || rc.value < cs.value {
			return 0, false
		}
		sum += rc.value - cs.value
		seen++
	}
	return sum, seen == 2
}

// looksUnreadable tells a port whose files could not be read (a reader that
// reports such a file as 0, as rdmamap does) from a counter clear: every
// counter reads exactly 0 at once, though some had a value. A clear on an
// ACTIVE port is followed by traffic, so a port that reads all zero is not
// believed until its counters move; what it counted in between is kept by
// the baseline, never lost, and never published again as a new delta.
func looksUnreadable(ps *portState, raws []rawCounter) bool {
	nonzeroBefore := 0
	for _, rc := range raws {
		if rc.value != 0 {
			return false
		}
		if cs := ps.counters[rc.key]; cs != nil && cs.value != 0 {
			nonzeroBefore++
		}
	}
	return nonzeroBefore >= 2
}

// heldUnreadable is counterDelta for a port that reads all zero: a counter
// with a baseline keeps it (held, delta 0); one without a baseline is left
// out, since a 0 from an unreadable port is no baseline to count from.
func (e *Engine) heldUnreadable(ps *portState, rc rawCounter) (schemas.CounterDelta, bool) {
	cs := ps.counters[rc.key]
	if cs == nil {
		return schemas.CounterDelta{}, false
	}
	cd := schemas.CounterDelta{Name: rc.key.name, Source: rc.key.src, Value: rc.value}
	if cs.value != 0 {
		cs.held = true
		cd.Flags |= schemas.FlagHeld
		e.stats.Glitches++
	}
	return cd, true
}

// looksLikePortRestart tells a driver reload or a counter clear, which
// drops the port's counters together, from a single unreadable file, a
// wrap or one counter cleared on its own. What cannot happen without one:
//
//   - a 64-bit counter (or a data counter that is 64-bit where it is not
//     pinned) falling to a non-zero value: it neither wraps in a lifetime
//     nor reads as a glitch (a misread file reads 0 or nothing);
//   - an ethtool statistic falling to a non-zero value: the ioctl returns
//     every statistic or an error. One falling to exactly 0 while the
//     others hold is read as a misread like a sysfs file's (held, see
//     counterDelta): traces from other collectors and simulators carry
//     such single zeros, and taking one for a restart would turn the
//     statistic's next reading into a fresh count (a link_down_events_phy
//     of 2 read as two new link downs);
//   - several counters falling at once: a misread is one file, a wrap is a
//     32-bit counter past half its range (not counted here), and a
//     hand-cleared IB error counter is one too. Two falling may still be
//     two independent misreads, so two count only when they are at least
//     half the port's counters; three is a restart whatever the share
//     (a driver reload of 52 counters: 11 fell, 41 grew past their old
//     value).
//
// A clear of the port's PMA counters alone (`perfquery -R`, which clears
// the counters/ directory and nothing else) is told from a restart: when
// the evidence is all in counters/ and, outside it, at most one statistic
// fell (to exactly 0: a misread that happened at the same reading), only
// counters/ starts over (restartPMA); hw_counters and ethtool keep their
// baselines, so a link_down_events_phy misread as 0 at that reading stays
// a held misread instead of becoming a fresh count of link downs.
func looksLikePortRestart(ps *portState, raws []rawCounter) restartKind {
	var fell, nonzeroBefore [2]int // [0] counters/ (PMA), [1] the others
	hard := [2]bool{}              // a fall no misread or wrap explains
	otherNonzeroFall := false      // outside counters/, a fall to more than 0
	for _, rc := range raws {
		cs := ps.counters[rc.key]
		if cs == nil || cs.value == 0 {
			continue
		}
		i := 1
		if rc.key.src == schemas.SourceCounters {
			i = 0
		}
		nonzeroBefore[i]++
		if rc.value >= cs.value {
			continue
		}
		if i == 1 && rc.value > 0 {
			otherNonzeroFall = true
		}
		if (rc.key.src == schemas.SourceEthtool || rc.kind == schemas.Counter64 || rc.kind == schemas.Ext64Sat32) && rc.value > 0 {
			hard[i] = true
			continue
		}
		if rc.kind == schemas.Wrap32 && cs.value > rc.kind.Max()/2 && rc.value > 0 {
			continue // a wrap
		}
		fell[i]++
	}
	together := func(f, nz int) bool { return f >= 3 || (f >= 2 && f*2 >= nz) }
	all, allNZ := fell[0]+fell[1], nonzeroBefore[0]+nonzeroBefore[1]
	if !hard[0] && !hard[1] && !together(all, allNZ) {
		return restartNone
	}
	if !otherNonzeroFall && fell[1] <= 1 && (hard[0] || together(fell[0], nonzeroBefore[0])) {
		return restartPMA
	}
	return restartPort
}

// restartKind is what looksLikePortRestart found.
type restartKind int

const (
	restartNone restartKind = iota
	restartPMA              // counters/ alone was cleared
	restartPort             // every counter of the port started over
)

// maxQCounterRate bounds a 32-bit q-counter's events per second (packets
// marked, CNPs, retransmissions, requests): a 400 Gb/s port full of 512-byte
// RoCE packets carries about 1e8 a second, so more after a zero baseline is
// a misreading, not traffic.
const maxQCounterRate = 1e8

// startDelta begins rc's delta: its raw value and whether it is pinned. A
// counter the port has no state for is a baseline (flagged first, state
// made, nil returned); else its state is returned.
func startDelta(ps *portState, rc rawCounter) (schemas.CounterDelta, *counterState) {
	cd := schemas.CounterDelta{Name: rc.key.name, Source: rc.key.src, Value: rc.value}
	if rc.kind.Pinned(rc.value) {
		cd.Flags |= schemas.FlagSaturated
	}
	cs := ps.counters[rc.key]
	if cs == nil {
		ps.counters[rc.key] = &counterState{value: rc.value}
		cd.Flags |= schemas.FlagFirst
	}
	return cd, cs
}

func (e *Engine) counterDelta(ps *portState, rc rawCounter, lim deltaLimits) schemas.CounterDelta {
	cd, cs := startDelta(ps, rc)
	if cs == nil {
		return cd
	}
	prev := cs.value
	var delta uint64
	switch {
	case prev == 0 && (rc.key.src == schemas.SourceHWCounters && rc.value > maxQCounterRate*max(lim.intervalSec, 1) ||
		rc.key.src == schemas.SourceHWCounters && lim.packetsKnown && rc.value > packetEventSlack*lim.packets+maxQCounterRate/1000):
		// A q-counter read as 0 and then far beyond any rate a port can
		// produce, or beyond the packets that crossed the port meanwhile:
		// the 0 was rdmamap's answer for a file it could not read, taken as
		// the baseline (at a collector start nothing earlier tells it from
		// a real 0). Start over from this reading.
		cs.value, cs.held = rc.value, false
		cd.Flags |= schemas.FlagFirst
		e.stats.Glitches++
		return cd
	case rc.value >= prev:
		delta = rc.value - prev
	case rc.value == 0 && !cs.held:
		// One file read as 0: hold the old baseline until the next reading
		// tells a glitch (back near prev) from a clear (still low).
		cs.held = true
		cd.Flags |= schemas.FlagHeld
		e.stats.Glitches++
		return cd
	case cs.held:
		// Low twice in a row: the counter was cleared, not misread.
		delta = rc.value
		cd.Flags |= schemas.FlagReset
		e.stats.Resets++
	case rc.kind == schemas.Wrap32 && prev > rc.kind.Max()/2:
		delta = rc.value + (rc.kind.Max() - prev) + 1
		cd.Flags |= schemas.FlagWrapped
		e.stats.Wraps++
	default:
		delta = rc.value
		cd.Flags |= schemas.FlagReset
		e.stats.Resets++
	}
	cs.value = rc.value
	cs.held = false
	if schemas.WordsToBytes(rc.key.src, rc.key.name) {
		delta *= 4
	}
	cd.Delta = delta
	return cd
}

// Split cuts b, the batch Apply just returned, into batches that each pass
// fits (halving the ports until they do), so a reading too large for one
// message is sent as several instead of failing. The first keeps b's Seq,
// the others take the node's next ones, so each has its own Nats-Msg-Id and
// a re-sent part is still dropped as a duplicate. A single port that does
// not fit is returned alone; the publisher refuses it.
func (e *Engine) Split(b *schemas.CounterBatch, fits func(*schemas.CounterBatch) bool) []*schemas.CounterBatch {
	if len(b.Ports) <= 1 || fits(b) {
		return []*schemas.CounterBatch{b}
	}
	var parts [][]schemas.PortSample
	var cut func(ports []schemas.PortSample)
	cut = func(ports []schemas.PortSample) {
		part := *b
		part.Ports = ports
		if len(ports) <= 1 || fits(&part) {
			parts = append(parts, ports)
			return
		}
		cut(ports[:len(ports)/2])
		cut(ports[len(ports)/2:])
	}
	cut(b.Ports)
	n := e.node(b.Node)
	out := make([]*schemas.CounterBatch, len(parts))
	for i, ports := range parts {
		part := *b
		part.Ports = ports
		if i > 0 {
			n.seq++
			part.Seq = n.seq
		}
		out[i] = &part
	}
	return out
}
