package sim

import (
	"fmt"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Incast is congestion, not a fault: several senders burst into one receiver
// at once (a collective's fan-in, a parameter server). The leaf's port toward
// the receiver fills; the leaf ECN-marks what it forwards
// (np_ecn_marked_roce_packets on the receiver, which answers with CNPs:
// np_cnp_sent) and, for the moments before the senders slow down
// (rp_cnp_handled), pauses them (rx_prio3_pause). A receiver that cannot
// absorb the burst pauses its leaf briefly too (tx_prio3_pause). Bursts are
// short and congestion control ends each one: the receiver keeps receiving
// at a high rate all along, unlike a storm origin.
//
// It writes no label: a pfc_storm raised on it is a false alarm. Like a
// fault, it keeps other noise away from its ports.
type Incast struct {
	Receiver PortRef
	Senders  []PortRef
	From     time.Time
	// Duration of the incast episodes; 0 means until the trace ends.
	Duration time.Duration
	// Every is the burst period (0: 2 s); Burst its length (0: 200 ms).
	// Each burst starts up to a quarter period late.
	Every, Burst time.Duration
	// SenderPause is the share of a burst the senders are paused (0: 0.5);
	// ReceiverPause the share the receiver pauses its leaf (0: 0.3).
	SenderPause, ReceiverPause float64
}

// Start implements Fault.
func (f Incast) Start(l *Layout) (Effect, error) {
	for _, r := range append([]PortRef{f.Receiver}, f.Senders...) {
		info, ok := l.Port(r)
		if !ok {
			return nil, fmt.Errorf("incast: no port %s", r)
		}
		if info.LinkLayer != LinkLayerEthernet {
			return nil, fmt.Errorf("incast: %s is not a RoCE port", r)
		}
	}
	if len(f.Senders) == 0 {
		return nil, fmt.Errorf("incast: no senders")
	}
	if f.Duration < 0 || f.Every < 0 || f.Burst < 0 || f.SenderPause < 0 || f.SenderPause > 1 || f.ReceiverPause < 0 || f.ReceiverPause > 1 {
		return nil, fmt.Errorf("incast: negative duration or a pause share outside 0..1")
	}
	if f.Every == 0 {
		f.Every = 2 * time.Second
	}
	if f.Burst == 0 {
		f.Burst = 200 * time.Millisecond
	}
	if f.Burst > f.Every/2 {
		return nil, fmt.Errorf("incast: burst %v longer than half its period %v: that is sustained congestion, not incast", f.Burst, f.Every)
	}
	if f.SenderPause == 0 {
		f.SenderPause = 0.5
	}
	if f.ReceiverPause == 0 {
		f.ReceiverPause = 0.3
	}
	f.From = f.From.UTC().Truncate(time.Millisecond)
	if err := checkWindow(l, "incast from", f.From); err != nil {
		return nil, err
	}
	until := l.End.Add(time.Hour)
	if f.Duration > 0 {
		until = f.From.Add(f.Duration)
	}
	return &incast{spec: f, until: until}, nil
}

type incast struct {
	spec  Incast
	until time.Time
}

func (e *incast) Ports() []PortRef { return append([]PortRef{e.spec.Receiver}, e.spec.Senders...) }

// burstOverlap is how much of the tick's window the bursts cover, in
// seconds. Burst k starts at From + k*Every plus a delay drawn from k alone,
// so every port of the incast sees the same bursts.
func (e *incast) burstOverlap(t *Tick) float64 {
	every := e.spec.Every
	if !t.Now.After(e.spec.From) || !t.Prev.Before(e.until) {
		return 0
	}
	first := int64(0)
	if t.Prev.After(e.spec.From) {
		first = int64(t.Prev.Sub(e.spec.From)/every) - 1
	}
	var on float64
	for k := max(first, 0); ; k++ {
		start := e.spec.From.Add(time.Duration(k)*every + burstDelay(k, every/4))
		if !start.Before(t.Now) || !start.Before(e.until) {
			break
		}
		end := start.Add(e.spec.Burst)
		if end.After(e.until) {
			end = e.until
		}
		on += t.Overlap(start, end)
	}
	return on
}

// burstDelay is a fixed pseudo-random delay in [0, upTo) for burst k.
func burstDelay(k int64, upTo time.Duration) time.Duration {
	if upTo <= 0 {
		return 0
	}
	x := uint64(k)*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return time.Duration(x % uint64(upTo))
}

func (e *incast) Apply(t *Tick) {
	on := e.burstOverlap(t)
	if on == 0 {
		return
	}
	p := t.Port
	if p.Info.PortRef == e.spec.Receiver {
		// The leaf marks most of what it forwards during a burst; the NIC
		// coalesces CNPs (one per flow per 50 µs at most).
		ecn := poisson(t.Rand, 150000*on)
		p.Add(schemas.SourceHWCounters, "np_ecn_marked_roce_packets", ecn)
		p.Add(schemas.SourceHWCounters, "np_cnp_sent", binomial(t.Rand, ecn, 0.3))
		pausedMicros := on * e.spec.ReceiverPause * 1e6
		p.Add(schemas.SourceEthtool, "tx_prio3_pause_duration", uint64(pausedMicros))
		p.Add(schemas.SourceEthtool, "tx_prio3_pause", uint64(pausedMicros/7))
		// Fan-in: the receiver's link runs full during a burst.
		t.UtilScale *= 1 + 1.5*on/t.Seconds()
		return
	}
	pausedMicros := on * e.spec.SenderPause * 1e6
	p.Add(schemas.SourceEthtool, "rx_prio3_pause_duration", uint64(pausedMicros))
	p.Add(schemas.SourceEthtool, "rx_prio3_pause", uint64(pausedMicros/7))
	p.Add(schemas.SourceHWCounters, "rp_cnp_handled", poisson(t.Rand, 45000*on/float64(len(e.spec.Senders))))
	t.UtilScale *= 1 - e.spec.SenderPause*on/t.Seconds()
}

func (e *incast) Observe(*Tick) {}

func (e *incast) Labels() []Label { return nil }
