package sim

import (
	"fmt"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// PFCStorm is a host that stops draining its receive queue and pauses its
// leaf almost all the time (tx_prio3_pause on the origin); the leaf's buffers
// fill and it pauses the other hosts on the leaf in turn (rx_prio3_pause
// there), a hop later. The NIC's storm watchdog raises
// tx_pause_storm_warning_events and, if it lasts, tx_pause_storm_error_events.
//
// With Silent the host is hung: its collector stops with it (the node's
// lines end at its last reading before From and do not come back), while
// its NIC keeps pausing. Remote ports on other leaves are paused too, later
// and less (the spines pause the leaves' uplinks). A dip stops the origin's
// pauses for a while within one storm (one label).
type PFCStorm struct {
	Port PortRef
	From time.Time
	// Duration of the storm; 0 means until the trace ends.
	Duration time.Duration
	// Spread is the delay before the leaf pauses the other hosts; 0 means
	// 3 s. A leaf's buffers fill within milliseconds of its egress being
	// paused, so real spreads are far shorter; scenarios set it.
	Spread time.Duration
	// MaxAffected bounds how many other ports on the leaf are paused; 0 means all.
	MaxAffected int
	// Silent: the origin's node stops reporting at the storm's onset.
	Silent bool
	// Remote is how many Ethernet ports on other leaves are paused, from
	// Spread + RemoteSpread (0 means 1 s) on.
	Remote       int
	RemoteSpread time.Duration
	// DipAt (after From) and DipFor: a pause in the storm; zero means none.
	DipAt, DipFor time.Duration
}

// Start implements Fault.
func (f PFCStorm) Start(l *Layout) (Effect, error) {
	info, ok := l.Port(f.Port)
	if !ok {
		return nil, fmt.Errorf("pfc_storm: no port %s", f.Port)
	}
	if info.LinkLayer != LinkLayerEthernet || !info.RDMA() {
		return nil, fmt.Errorf("pfc_storm: %s is not a RoCE port", f.Port)
	}
	if f.Duration < 0 || f.Spread < 0 || f.MaxAffected < 0 || f.Remote < 0 || f.RemoteSpread < 0 || f.DipAt < 0 || f.DipFor < 0 {
		return nil, fmt.Errorf("pfc_storm: negative duration, spread or count")
	}
	if f.Spread == 0 {
		f.Spread = 3 * time.Second
	}
	if f.RemoteSpread == 0 {
		f.RemoteSpread = time.Second
	}
	f.From = f.From.UTC().Truncate(time.Millisecond)
	if err := checkWindow(l, "pfc_storm from", f.From); err != nil {
		return nil, err
	}
	e := &pfcStorm{spec: f, origin: f.Port, firstSeen: map[PortRef]time.Time{}, layout: l, remote: map[PortRef]bool{}}
	e.until = l.End.Add(time.Hour) // never ends within the trace
	if f.Duration > 0 {
		e.until = f.From.Add(f.Duration)
	}
	for _, p := range l.OnLeaf(info.Leaf) {
		if p.PortRef != f.Port && p.Node != f.Port.Node && p.LinkLayer == LinkLayerEthernet {
			if f.MaxAffected > 0 && len(e.affected) == f.MaxAffected {
				break
			}
			e.affected = append(e.affected, p.PortRef)
		}
	}
	for _, p := range l.Ports {
		if len(e.remoteList) == f.Remote {
			break
		}
		if p.Leaf != info.Leaf && p.LinkLayer == LinkLayerEthernet && p.RDMA() {
			e.remoteList = append(e.remoteList, p.PortRef)
			e.remote[p.PortRef] = true
		}
	}
	e.affected = append(e.affected, e.remoteList...)
	return e, nil
}

type pfcStorm struct {
	spec      PFCStorm
	origin    PortRef
	affected  []PortRef
	until     time.Time
	firstSeen map[PortRef]time.Time
	warned    bool
	errored   bool
	// layout is the running fleet's: a silent origin's node is dropped from
	// it (see silence).
	layout     *Layout
	silenced   bool
	remote     map[PortRef]bool
	remoteList []PortRef
}

// silence stops the origin's node from reporting. The fleet reads
// Layout.nodePorts every round, so a node without ports writes no lines; its
// NIC state no longer matters, nobody reads it.
func (e *pfcStorm) silence() {
	if e.silenced {
		return
	}
	e.silenced = true
	for i, n := range e.layout.Nodes {
		if n == e.origin.Node {
			e.layout.nodePorts[i] = nil
		}
	}
}

// on is the part of the tick's window inside the storm from start on,
// without the dip.
func (e *pfcStorm) on(t *Tick, start time.Time) float64 {
	on := t.Overlap(start, e.until)
	if e.spec.DipFor > 0 {
		dip := e.spec.From.Add(e.spec.DipAt)
		from := dip
		if start.After(from) {
			from = start
		}
		on -= t.Overlap(from, dip.Add(e.spec.DipFor))
	}
	return max(0, on)
}

func (e *pfcStorm) Ports() []PortRef { return append([]PortRef{e.origin}, e.affected...) }

// pauseFraction is the share of time a port is paused while the storm is on.
const (
	originPauseFraction   = 0.95
	affectedPauseFraction = 0.5
	remotePauseFraction   = 0.35
)

func (e *pfcStorm) Apply(t *Tick) {
	p := t.Port
	dt := t.Seconds()
	if dt <= 0 {
		return
	}
	if p.Info.PortRef == e.origin {
		// The hung host's collector dies with it: its last line is the
		// reading before the onset. The next reading is at least half an
		// interval away (jitter is at most half of one), so a reading
		// within half an interval of the onset is the last one.
		if e.spec.Silent && (t.Now.Before(e.spec.From) && e.spec.From.Sub(t.Now) <= e.layout.Interval/2 || !t.Now.Before(e.spec.From)) {
			e.silence()
		}
		on := e.on(t, e.spec.From)
		if on == 0 {
			return
		}
		// A pausing NIC re-sends a pause frame every few µs to keep the
		// link stopped; 7 µs a frame, as in docs/formats.md's example trace.
		pausedMicros := on * originPauseFraction * 1e6
		p.Add(schemas.SourceEthtool, "tx_prio3_pause_duration", uint64(pausedMicros))
		p.Add(schemas.SourceEthtool, "tx_prio3_pause", uint64(pausedMicros/7))
		// The host does not drain its queues: almost nothing is received.
		t.UtilScale *= 1 - 0.97*on/dt
		p.Add(schemas.SourceHWCounters, "out_of_buffer", poisson(t.Rand, 2000*on))
		if !e.warned && t.Now.Sub(e.spec.From) >= 2*time.Second && t.Now.Before(e.until) {
			e.warned = true
			p.Add(schemas.SourceEthtool, "tx_pause_storm_warning_events", 1)
		}
		if !e.errored && t.Now.Sub(e.spec.From) >= 8*time.Second && t.Now.Before(e.until) {
			e.errored = true
			p.Add(schemas.SourceEthtool, "tx_pause_storm_error_events", 1)
		}
		return
	}
	start, fraction := e.spec.From.Add(e.spec.Spread), affectedPauseFraction
	if e.remote[p.Info.PortRef] {
		start, fraction = start.Add(e.spec.RemoteSpread), remotePauseFraction
	}
	on := e.on(t, start)
	if on == 0 {
		return
	}
	pausedMicros := on * fraction * 1e6
	p.Add(schemas.SourceEthtool, "rx_prio3_pause_duration", uint64(pausedMicros))
	p.Add(schemas.SourceEthtool, "rx_prio3_pause", uint64(pausedMicros/7))
	// Paused half the time: the host can send only half as much.
	t.UtilScale *= 1 - fraction*on/dt
}

func (e *pfcStorm) Observe(t *Tick) {
	r := t.Port.Info.PortRef
	if r == e.origin {
		return
	}
	start := e.spec.From.Add(e.spec.Spread)
	if e.remote[r] {
		start = start.Add(e.spec.RemoteSpread)
	}
	if _, ok := e.firstSeen[r]; !ok && e.on(t, start) > 0 {
		e.firstSeen[r] = t.Now
	}
}

func (e *pfcStorm) Labels() []Label {
	l := Label{Type: schemas.TypePFCStorm, Start: schemas.MillisOf(e.spec.From), Subject: portSubject(e.origin)}
	if e.spec.Duration > 0 {
		l.End = millisPtr(e.until)
	}
	first := map[string]time.Time{}
	var nodes []string
	for _, r := range e.affected {
		ts, ok := e.firstSeen[r]
		if !ok {
			continue
		}
		prev, seen := first[r.Node]
		if !seen {
			nodes = append(nodes, r.Node)
		}
		if !seen || ts.Before(prev) {
			first[r.Node] = ts
		}
	}
	for _, n := range nodes {
		l.Affected = append(l.Affected, LabelAffected{Node: n, FirstSeen: schemas.MillisOf(first[n])})
	}
	return []Label{l}
}
