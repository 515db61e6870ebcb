package sim

import (
	"fmt"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// CNPECNImbalance is a RoCE receiver that gets ECN-marked packets but sends
// no CNPs back (congestion control disabled or misconfigured for the RoCE
// priority): np_ecn_marked_roce_packets climbs while np_cnp_sent stays flat,
// and the senders, never told to slow down, cause drops and retransmissions.
type CNPECNImbalance struct {
	Port PortRef
	From time.Time
	// Duration of the misconfiguration; 0 means until the trace ends.
	Duration time.Duration
	// MarkedPerSecond is the extra ECN-marked packets per second; 0 means 20000.
	MarkedPerSecond float64
}

// Start implements Fault.
func (f CNPECNImbalance) Start(l *Layout) (Effect, error) {
	info, ok := l.Port(f.Port)
	if !ok {
		return nil, fmt.Errorf("cnp_ecn_imbalance: no port %s", f.Port)
	}
	if info.LinkLayer != LinkLayerEthernet {
		return nil, fmt.Errorf("cnp_ecn_imbalance: %s is not a RoCE port", f.Port)
	}
	if f.Duration < 0 || f.MarkedPerSecond < 0 {
		return nil, fmt.Errorf("cnp_ecn_imbalance: negative duration or rate")
	}
	if f.MarkedPerSecond == 0 {
		f.MarkedPerSecond = 20000
	}
	f.From = f.From.UTC().Truncate(time.Millisecond)
	if err := checkWindow(l, "cnp_ecn_imbalance from", f.From); err != nil {
		return nil, err
	}
	until := l.End.Add(time.Hour) // never ends within the trace
	if f.Duration > 0 {
		until = f.From.Add(f.Duration)
	}
	return &cnpImbalance{spec: f, until: until}, nil
}

type cnpImbalance struct {
	spec  CNPECNImbalance
	until time.Time
}

func (e *cnpImbalance) Ports() []PortRef { return []PortRef{e.spec.Port} }

func (e *cnpImbalance) Apply(t *Tick) {
	on := t.Overlap(e.spec.From, e.until)
	if on == 0 {
		return
	}
	t.CNPScale *= 1 - on/t.Seconds()
	p := t.Port
	p.Add(schemas.SourceHWCounters, "np_ecn_marked_roce_packets", poisson(t.Rand, e.spec.MarkedPerSecond*on))
	p.Add(schemas.SourceHWCounters, "out_of_sequence", poisson(t.Rand, 50*on))
	p.Add(schemas.SourceHWCounters, "out_of_buffer", poisson(t.Rand, 20*on))
}

func (e *cnpImbalance) Observe(*Tick) {}

func (e *cnpImbalance) Labels() []Label {
	l := Label{Type: schemas.TypeCNPECNImbalance, Start: schemas.MillisOf(e.spec.From), Subject: portSubject(e.spec.Port)}
	if e.spec.Duration > 0 {
		l.End = millisPtr(e.until)
	}
	return []Label{l}
}
