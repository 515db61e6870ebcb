package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Ways a receiver starves (ReceiveStarvation.Via).
const (
	// StarveBuffers: no receive buffer posted for what arrives (an RQ or
	// SRQ runs dry): out_of_buffer at PerSecond (default 1500).
	StarveBuffers = ""
	// StarveRNR: RC queue pairs without a posted receive answer with RNR
	// NAKs; each NAKed packet is dropped (out_of_buffer) and its sender
	// counts the NAK (rnr_nak_retry_err on Senders) and backs off for the
	// RNR timer, so the rate is low: PerSecond defaults to 150.
	StarveRNR = "rnr"
	// StarveDiscards: the host cannot take packets off the NIC (PCIe
	// backpressure, IOMMU): the NIC's receive buffer overflows and the
	// lossy classes are discarded (rx_discards_phy at PerSecond, default
	// 800) while PFC holds the lossless one (the port pauses its link a
	// tenth of the time), and no out_of_buffer.
	StarveDiscards = "discards"
)

// ReceiveStarvation is an application that stops posting receive buffers
// fast enough: the port drops what arrives without one (out_of_buffer rises
// to PerSecond); Via says how the starvation shows (StarveBuffers,
// StarveRNR, StarveDiscards). With StormAfter the receive queue backs up into the NIC's
// buffer that much later and the port starts to pause its link: a PFC storm
// from the same port (PFCStorm, with Spread, MaxAffected and Remote), whose
// label names the starvation as its cause.
type ReceiveStarvation struct {
	Port PortRef
	From time.Time
	// Duration of the starvation; required.
	Duration time.Duration
	// PerSecond is the out_of_buffer rate; 0 means 1500.
	PerSecond float64
	// StormAfter is when, after From, the storm begins; 0 means no storm.
	// Real queues take a minute or two.
	StormAfter time.Duration
	// StormFor is the storm's length; 0 means until the starvation ends.
	StormFor    time.Duration
	Spread      time.Duration
	MaxAffected int
	Remote      int
	Via         string
	// Senders are the ports that send to the starving receiver and count
	// its RNR NAKs (StarveRNR).
	Senders []PortRef
}

// Start implements Fault.
func (f ReceiveStarvation) Start(l *Layout) (Effect, error) {
	if _, ok := l.Port(f.Port); !ok {
		return nil, fmt.Errorf("receive_starvation: no port %s", f.Port)
	}
	if f.Duration <= 0 || f.PerSecond < 0 || f.StormAfter < 0 || f.StormFor < 0 {
		return nil, fmt.Errorf("receive_starvation: needs a positive duration, no negative rate or storm times")
	}
	if f.StormAfter >= f.Duration {
		return nil, fmt.Errorf("receive_starvation: storm_after %s is not within the starvation's %s", f.StormAfter, f.Duration)
	}
	switch f.Via {
	case StarveBuffers:
	case StarveRNR:
		if len(f.Senders) == 0 {
			return nil, fmt.Errorf("receive_starvation via rnr: no senders to count the RNR NAKs")
		}
		for _, r := range f.Senders {
			if _, ok := l.Port(r); !ok || r == f.Port {
				return nil, fmt.Errorf("receive_starvation via rnr: sender %s is not another port of the fabric", r)
			}
		}
	case StarveDiscards:
	default:
		return nil, fmt.Errorf("receive_starvation: via %q is not one of rnr, discards or empty (buffers)", f.Via)
	}
	if f.PerSecond == 0 {
		f.PerSecond = map[string]float64{StarveBuffers: 1500, StarveRNR: 150, StarveDiscards: 800}[f.Via]
	}
	f.From = f.From.UTC().Truncate(time.Millisecond)
	if err := checkWindow(l, "receive_starvation from", f.From); err != nil {
		return nil, err
	}
	e := &receiveStarvation{spec: f, until: f.From.Add(f.Duration), stormPorts: map[PortRef]bool{}}
	if f.StormAfter > 0 {
		length := f.StormFor
		if length == 0 {
			length = f.Duration - f.StormAfter
		}
		storm, err := PFCStorm{Port: f.Port, From: f.From.Add(f.StormAfter), Duration: length,
			Spread: f.Spread, MaxAffected: f.MaxAffected, Remote: f.Remote}.Start(l)
		if err != nil {
			return nil, fmt.Errorf("receive_starvation's storm: %w", err)
		}
		e.storm = storm
		for _, r := range storm.Ports() {
			e.stormPorts[r] = true
		}
	}
	return e, nil
}

type receiveStarvation struct {
	spec       ReceiveStarvation
	until      time.Time
	storm      Effect // nil without a storm
	stormPorts map[PortRef]bool
}

func (e *receiveStarvation) Ports() []PortRef {
	out := append([]PortRef{e.spec.Port}, e.spec.Senders...)
	if e.storm != nil {
		for _, r := range e.storm.Ports() {
			if r != e.spec.Port {
				out = append(out, r)
			}
		}
	}
	return out
}

func (e *receiveStarvation) Apply(t *Tick) {
	ref := t.Port.Info.PortRef
	if on := t.Overlap(e.spec.From, e.until); on > 0 {
		switch {
		case ref == e.spec.Port:
			// The application's pace wanders: a log-normal rate per window.
			rate := e.spec.PerSecond * math.Exp(0.3*t.Rand.NormFloat64())
			switch e.spec.Via {
			case StarveDiscards:
				t.Port.Add(schemas.SourceEthtool, "rx_discards_phy", poisson(t.Rand, rate*on))
				t.Port.Add(schemas.SourceEthtool, "tx_prio3_pause_duration", uint64(0.1*on*1e6))
				t.Port.Add(schemas.SourceEthtool, "tx_prio3_pause", uint64(0.1*on*1e6/120))
			default:
				t.Port.Add(schemas.SourceHWCounters, "out_of_buffer", poisson(t.Rand, rate*on))
			}
		case e.spec.Via == StarveRNR:
			for _, s := range e.spec.Senders {
				if s == ref {
					share := 0.95 * e.spec.PerSecond / float64(len(e.spec.Senders))
					t.Port.Add(schemas.SourceHWCounters, "rnr_nak_retry_err", poisson(t.Rand, share*on))
				}
			}
		}
	}
	if e.stormPorts[t.Port.Info.PortRef] {
		e.storm.Apply(t)
	}
}

func (e *receiveStarvation) Observe(t *Tick) {
	if e.stormPorts[t.Port.Info.PortRef] {
		e.storm.Observe(t)
	}
}

func (e *receiveStarvation) Labels() []Label {
	ls := []Label{{
		Type:    schemas.TypeReceiveStarvation,
		Start:   schemas.MillisOf(e.spec.From),
		End:     millisPtr(e.until),
		Subject: portSubject(e.spec.Port),
	}}
	if e.storm != nil {
		for _, l := range e.storm.Labels() {
			l.Cause = &schemas.LabelCause{Type: schemas.TypeReceiveStarvation, Subject: portSubject(e.spec.Port)}
			ls = append(ls, l)
		}
	}
	return ls
}
