package sim

import (
	"fmt"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// LinkFlap takes a link down once for a few seconds: link_downed goes up by
// one (and link_down_events_phy on Ethernet), the interval's traffic dips, a
// few symbol and transport errors come with the retraining, and traffic stays
// low while the flows recover.
type LinkFlap struct {
	Port PortRef
	At   time.Time
	// Down is how long the link stays down; 0 means 3 s.
	Down time.Duration
	// Recovery is how long traffic stays low after the link is back; 0 means 10 s.
	Recovery time.Duration
}

// Start implements Fault.
func (f LinkFlap) Start(l *Layout) (Effect, error) {
	if _, ok := l.Port(f.Port); !ok {
		return nil, fmt.Errorf("link_flap: no port %s", f.Port)
	}
	if f.Down == 0 {
		f.Down = 3 * time.Second
	}
	if f.Recovery == 0 {
		f.Recovery = 10 * time.Second
	}
	if f.Down < 0 || f.Recovery < 0 {
		return nil, fmt.Errorf("link_flap: negative duration")
	}
	f.At = f.At.UTC().Truncate(time.Millisecond)
	if err := checkWindow(l, "link_flap at", f.At); err != nil {
		return nil, err
	}
	return &linkFlap{spec: f}, nil
}

type linkFlap struct{ spec LinkFlap }

func (e *linkFlap) Ports() []PortRef { return []PortRef{e.spec.Port} }

func (e *linkFlap) Apply(t *Tick) {
	f := e.spec
	up := f.At.Add(f.Down)
	if dt := t.Seconds(); dt > 0 {
		t.UpFraction -= t.Overlap(f.At, up) / dt
		if rec := t.Overlap(up, up.Add(f.Recovery)); rec > 0 {
			t.UtilScale *= 1 - 0.6*rec/dt
		}
	}
	if !t.Now.Before(f.At) && t.Now.Before(up) {
		t.State = "DOWN"
	}
	if !t.Within(f.At) {
		return
	}
	p := t.Port
	p.Add(schemas.SourceCounters, "link_downed", 1)
	p.Add(schemas.SourceEthtool, "link_down_events_phy", 1)
	// Retraining: a burst of symbol errors; in-flight RoCE packets time out
	// or arrive out of sequence.
	if p.Info.LinkLayer == LinkLayerInfiniBand {
		p.Add(schemas.SourceCounters, "symbol_error", uint64(t.Rand.IntN(6)))
	} else {
		p.Add(schemas.SourceEthtool, "rx_pcs_symbol_err_phy", uint64(1+t.Rand.IntN(20)))
	}
	p.Add(schemas.SourceHWCounters, "local_ack_timeout_err", uint64(t.Rand.IntN(4)))
	p.Add(schemas.SourceHWCounters, "out_of_sequence", uint64(t.Rand.IntN(30)))
}

func (e *linkFlap) Observe(*Tick) {}

func (e *linkFlap) Labels() []Label {
	return []Label{{
		Type:    schemas.TypeLinkFlap,
		Start:   schemas.MillisOf(e.spec.At),
		End:     millisPtr(e.spec.At.Add(e.spec.Down)),
		Subject: portSubject(e.spec.Port),
	}}
}
