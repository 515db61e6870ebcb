package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// CNPFault is what breaks in a CNPECNImbalance.
type CNPFault int

const (
	// NPDisabled is a RoCE receiver that gets ECN-marked packets but sends
	// no CNPs back (the notification point is off for the RoCE priority):
	// np_ecn_marked_roce_packets climbs while np_cnp_sent stays flat, and
	// the senders, never told to slow down, cause drops and retransmissions.
	NPDisabled CNPFault = iota
	// RPIgnoring is a sender whose reaction point ignores the CNPs it
	// receives: rp_cnp_ignored climbs instead of rp_cnp_handled.
	RPIgnoring
	// FabricCNPLoss is the network dropping a share of the CNPs (they ride
	// a lossy or starved priority): the fabric's Σ np_cnp_sent exceeds its
	// Σ rp_cnp_handled + rp_cnp_ignored. A fabric-scope fault: it takes over
	// the CNP accounting of every RoCE port so that, outside the loss, every
	// CNP sent is handled (the traffic model alone does not balance them).
	FabricCNPLoss
)

func (k CNPFault) String() string {
	switch k {
	case NPDisabled:
		return "np_disabled"
	case RPIgnoring:
		return "rp_ignoring"
	case FabricCNPLoss:
		return "fabric_cnp_loss"
	}
	return fmt.Sprintf("cnp_fault(%d)", int(k))
}

// CNPECNImbalance is a broken link between ECN marks and the rate cuts they
// should cause; Kind says which part breaks.
type CNPECNImbalance struct {
	Kind CNPFault
	// Port is the faulty port (NPDisabled, RPIgnoring); FabricCNPLoss has
	// none.
	Port PortRef
	From time.Time
	// Duration of the misconfiguration; 0 means until the trace ends.
	Duration time.Duration
	// MarkedPerSecond is the extra ECN-marked packets per second of an
	// NPDisabled port (0 means 20000), or the extra CNPs per second an
	// RPIgnoring port receives and ignores (0 means 300).
	MarkedPerSecond float64
	// LossFraction is the share of CNPs FabricCNPLoss drops; 0 means 0.5.
	LossFraction float64
}

// Start implements Fault.
func (f CNPECNImbalance) Start(l *Layout) (Effect, error) {
	if f.Duration < 0 || f.MarkedPerSecond < 0 || f.LossFraction < 0 || f.LossFraction > 1 {
		return nil, fmt.Errorf("cnp_ecn_imbalance: negative duration or rate, or loss outside [0, 1]")
	}
	f.From = f.From.UTC().Truncate(time.Millisecond)
	if err := checkWindow(l, "cnp_ecn_imbalance from", f.From); err != nil {
		return nil, err
	}
	until := l.End.Add(time.Hour) // never ends within the trace
	if f.Duration > 0 {
		until = f.From.Add(f.Duration)
	}
	switch f.Kind {
	case NPDisabled, RPIgnoring:
		info, ok := l.Port(f.Port)
		if !ok {
			return nil, fmt.Errorf("cnp_ecn_imbalance: no port %s", f.Port)
		}
		if info.LinkLayer != LinkLayerEthernet {
			return nil, fmt.Errorf("cnp_ecn_imbalance: %s is not a RoCE port", f.Port)
		}
		if f.MarkedPerSecond == 0 {
			f.MarkedPerSecond = 20000
			if f.Kind == RPIgnoring {
				f.MarkedPerSecond = 300
			}
		}
		return &cnpImbalance{spec: f, until: until}, nil
	case FabricCNPLoss:
		if f.LossFraction == 0 {
			f.LossFraction = 0.5
		}
		e := &cnpLoss{spec: f, until: until, ports: map[PortRef]*cnpLossPort{}}
		for _, p := range l.Ports {
			if p.LinkLayer == LinkLayerEthernet && p.RDMA() {
				e.refs = append(e.refs, p.PortRef)
				e.ports[p.PortRef] = &cnpLossPort{}
			}
		}
		if len(e.refs) == 0 {
			return nil, fmt.Errorf("cnp_ecn_imbalance: no RoCE port in the fabric")
		}
		return e, nil
	}
	return nil, fmt.Errorf("cnp_ecn_imbalance: unknown kind %d", int(f.Kind))
}

type cnpImbalance struct {
	spec    CNPECNImbalance
	until   time.Time
	handled uint64 // rp_cnp_handled before the model advanced (RPIgnoring)
	on      float64
}

func (e *cnpImbalance) Ports() []PortRef { return []PortRef{e.spec.Port} }

func (e *cnpImbalance) Apply(t *Tick) {
	e.on = t.Overlap(e.spec.From, e.until)
	if e.on == 0 {
		return
	}
	p := t.Port
	switch e.spec.Kind {
	case NPDisabled:
		t.CNPScale *= 1 - e.on/t.Seconds()
		p.Add(schemas.SourceHWCounters, "np_ecn_marked_roce_packets", poisson(t.Rand, e.spec.MarkedPerSecond*e.on))
		p.Add(schemas.SourceHWCounters, "out_of_sequence", poisson(t.Rand, 50*e.on))
		p.Add(schemas.SourceHWCounters, "out_of_buffer", poisson(t.Rand, 20*e.on))
	case RPIgnoring:
		e.handled, _ = p.Value(schemas.SourceHWCounters, "rp_cnp_handled")
	}
}

func (e *cnpImbalance) Observe(t *Tick) {
	if e.on == 0 || e.spec.Kind != RPIgnoring {
		return
	}
	// The CNPs the model had the port handle during the fault are ignored
	// instead, with the extra ones the port's uncut senders provoke.
	p := t.Port
	now, _ := p.Value(schemas.SourceHWCounters, "rp_cnp_handled")
	dh := (now - e.handled) & schemas.Wrap32.Max()
	moved := uint64(float64(dh) * min(1, e.on/t.Seconds()))
	p.Set(schemas.SourceHWCounters, "rp_cnp_handled", (e.handled+dh-moved)&schemas.Wrap32.Max())
	ignored := moved + poisson(t.Rand, e.spec.MarkedPerSecond*e.on)
	p.Add(schemas.SourceHWCounters, "rp_cnp_ignored", ignored)
}

func (e *cnpImbalance) Labels() []Label {
	l := Label{Type: schemas.TypeCNPECNImbalance, Start: schemas.MillisOf(e.spec.From), Subject: portSubject(e.spec.Port)}
	if e.spec.Duration > 0 {
		l.End = millisPtr(e.until)
	}
	return []Label{l}
}

// cnpLoss is FabricCNPLoss. The CNPs every RoCE port sends in one reading
// round go into a pool; in the next round the pool is handed out to the
// ports' rp_cnp_handled in proportion to the CNPs the traffic model would
// have had each of them handle (its senders' share of the congestion), less
// the lost share while the fault is on. So Σ np_cnp_sent and Σ
// rp_cnp_handled balance to within a round, except for the loss.
type cnpLoss struct {
	spec  CNPECNImbalance
	until time.Time
	refs  []PortRef
	ports map[PortRef]*cnpLossPort
	// pool and weight are the current round's CNPs sent and model weights;
	// prevPool and prevWeight the previous round's, being handed out.
	pool, weight         float64
	prevPool, prevWeight float64
}

type cnpLossPort struct {
	sent, handled uint64  // readings before the model advanced
	prevWeight    float64 // the port's weight in the previous round
	carry         float64 // the fraction of a CNP not handed out yet
}

func (e *cnpLoss) Ports() []PortRef { return e.refs }

func (e *cnpLoss) Apply(t *Tick) {
	r := t.Port.Info.PortRef
	if r == e.refs[0] {
		// A new reading round: every port is advanced once per round, in
		// layout order, silent or not.
		e.prevPool, e.prevWeight = e.pool, e.weight
		e.pool, e.weight = 0, 0
	}
	st := e.ports[r]
	st.sent, _ = t.Port.Value(schemas.SourceHWCounters, "np_cnp_sent")
	st.handled, _ = t.Port.Value(schemas.SourceHWCounters, "rp_cnp_handled")
}

func (e *cnpLoss) Observe(t *Tick) {
	p := t.Port
	st := e.ports[p.Info.PortRef]
	sent, _ := p.Value(schemas.SourceHWCounters, "np_cnp_sent")
	handled, _ := p.Value(schemas.SourceHWCounters, "rp_cnp_handled")
	mask := schemas.Wrap32.Max()
	dSent := float64((sent - st.sent) & mask)
	weight := float64((handled - st.handled) & mask)
	e.pool += dSent
	e.weight += weight

	var share float64
	if e.prevWeight > 0 {
		share = e.prevPool * st.prevWeight / e.prevWeight
	}
	st.prevWeight = weight
	if dt := t.Seconds(); dt > 0 {
		share *= 1 - e.spec.LossFraction*t.Overlap(e.spec.From, e.until)/dt
	}
	share += st.carry
	n := math.Floor(share)
	st.carry = share - n
	p.Set(schemas.SourceHWCounters, "rp_cnp_handled", (st.handled+uint64(n))&mask)
}

func (e *cnpLoss) Labels() []Label {
	l := Label{Type: schemas.TypeCNPECNImbalance, Start: schemas.MillisOf(e.spec.From), Scope: schemas.ScopeFabric}
	if e.spec.Duration > 0 {
		l.End = millisPtr(e.until)
	}
	return []Label{l}
}

// newCNPBalance is the loss-free cnpLoss: it makes Σ np_cnp_sent and
// Σ rp_cnp_handled agree over the RoCE ports, as in a healthy fabric.
func newCNPBalance(l *Layout) *cnpLoss {
	e := &cnpLoss{ports: map[PortRef]*cnpLossPort{}}
	for _, p := range l.Ports {
		if p.LinkLayer == LinkLayerEthernet && p.RDMA() { // a bond member has no CNP counters
			e.refs = append(e.refs, p.PortRef)
			e.ports[p.PortRef] = &cnpLossPort{}
		}
	}
	if len(e.refs) == 0 {
		return nil
	}
	return e
}

func hasFabricCNPEffect(effects []Effect) bool {
	for _, e := range effects {
		if _, ok := e.(*cnpLoss); ok {
			return true
		}
	}
	return false
}
