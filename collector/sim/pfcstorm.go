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
type PFCStorm struct {
	Port PortRef
	From time.Time
	// Duration of the storm; 0 means until the trace ends.
	Duration time.Duration
	// Spread is the delay before the leaf pauses the other hosts; 0 means 3 s.
	Spread time.Duration
	// MaxAffected bounds how many other ports on the leaf are paused; 0 means all.
	MaxAffected int
}

// Start implements Fault.
func (f PFCStorm) Start(l *Layout) (Effect, error) {
	info, ok := l.Port(f.Port)
	if !ok {
		return nil, fmt.Errorf("pfc_storm: no port %s", f.Port)
	}
	if info.LinkLayer != LinkLayerEthernet {
		return nil, fmt.Errorf("pfc_storm: %s is not a RoCE port", f.Port)
	}
	if f.Duration < 0 || f.Spread < 0 || f.MaxAffected < 0 {
		return nil, fmt.Errorf("pfc_storm: negative duration, spread or count")
	}
	if f.Spread == 0 {
		f.Spread = 3 * time.Second
	}
	f.From = f.From.UTC().Truncate(time.Millisecond)
	if err := checkWindow(l, "pfc_storm from", f.From); err != nil {
		return nil, err
	}
	e := &pfcStorm{spec: f, origin: f.Port, firstSeen: map[PortRef]time.Time{}}
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
}

func (e *pfcStorm) Ports() []PortRef { return append([]PortRef{e.origin}, e.affected...) }

// pauseFraction is the share of time a port is paused while the storm is on.
const (
	originPauseFraction   = 0.95
	affectedPauseFraction = 0.5
)

func (e *pfcStorm) Apply(t *Tick) {
	p := t.Port
	dt := t.Seconds()
	if dt <= 0 {
		return
	}
	if p.Info.PortRef == e.origin {
		on := t.Overlap(e.spec.From, e.until)
		if on == 0 {
			return
		}
		// A pausing NIC re-sends a pause frame every few µs to keep the
		// link stopped; 7 µs a frame, as in DESIGN.md's example trace.
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
	on := t.Overlap(e.spec.From.Add(e.spec.Spread), e.until)
	if on == 0 {
		return
	}
	pausedMicros := on * affectedPauseFraction * 1e6
	p.Add(schemas.SourceEthtool, "rx_prio3_pause_duration", uint64(pausedMicros))
	p.Add(schemas.SourceEthtool, "rx_prio3_pause", uint64(pausedMicros/7))
	// Paused half the time: the host can send only half as much.
	t.UtilScale *= 1 - affectedPauseFraction*on/dt
}

func (e *pfcStorm) Observe(t *Tick) {
	r := t.Port.Info.PortRef
	if r == e.origin {
		return
	}
	if _, ok := e.firstSeen[r]; !ok && t.Overlap(e.spec.From.Add(e.spec.Spread), e.until) > 0 {
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
