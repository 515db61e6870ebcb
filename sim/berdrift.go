package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// BERDrift is a link whose bit error rate grows exponentially (a dirty or
// failing optic): on Ethernet the pre-FEC corrected bits of one lane, on
// InfiniBand the symbol errors (symbol BER is over the line rate's bits, as
// ibdiagnet counts it). The label starts at From and gives
// critical_at, when the BER crosses the critical level.
//
// The added error rate is start*(exp(g*t)-1): zero at From, so the onset
// is a bend in the port's own BER and not a step, and a real optic's
// noise (a lognormal factor per reading, Noise) rides on it.
type BERDrift struct {
	Port PortRef
	From time.Time
	// ToCritical is the time from From to the critical level; 0 means 10 min.
	ToCritical time.Duration
	// Until ends the drift (the optic was replaced); zero means never.
	Until time.Time
	// Lane is the Ethernet lane (0..3) that degrades.
	Lane int
	// Noise is the sigma of ln BER per reading; 0 means none.
	Noise float64
}

// Starting BER of the drift: a healthy link's level.
const (
	driftStartPreFEC = 5e-9
	driftStartSymbol = 1e-15
)

// Start implements Fault.
func (f BERDrift) Start(l *Layout) (Effect, error) {
	info, ok := l.Port(f.Port)
	if !ok {
		return nil, fmt.Errorf("ber_drift: no port %s", f.Port)
	}
	if f.ToCritical == 0 {
		f.ToCritical = 10 * time.Minute
	}
	if f.ToCritical < 0 || f.Lane < 0 || f.Lane > 3 || f.Noise < 0 || f.Noise > 2 {
		return nil, fmt.Errorf("ber_drift: bad ToCritical or Lane")
	}
	f.From = f.From.UTC().Truncate(time.Millisecond)
	if err := checkWindow(l, "ber_drift from", f.From); err != nil {
		return nil, err
	}
	if !f.Until.IsZero() && !f.Until.After(f.From) {
		return nil, fmt.Errorf("ber_drift: until before from")
	}
	start, critical := driftStartPreFEC, schemas.CriticalPreFECBER
	if info.LinkLayer == LinkLayerInfiniBand {
		start, critical = driftStartSymbol, schemas.CriticalSymbolBER
	}
	return &berDrift{spec: f, start: start, growthPerS: math.Log(critical/start+1) / f.ToCritical.Seconds(), max: 100 * critical}, nil
}

type berDrift struct {
	spec       BERDrift
	start, max float64
	growthPerS float64
}

func (e *berDrift) Ports() []PortRef { return []PortRef{e.spec.Port} }

// ber is the drift's error rate at t (0 outside the drift).
func (e *berDrift) ber(t time.Time) float64 {
	if t.Before(e.spec.From) || !e.spec.Until.IsZero() && !t.Before(e.spec.Until) {
		return 0
	}
	return min(e.max, e.start*(math.Exp(e.growthPerS*t.Sub(e.spec.From).Seconds())-1))
}

func (e *berDrift) Apply(t *Tick) {
	ber := e.ber(t.Now)
	if ber == 0 {
		return
	}
	if e.spec.Noise > 0 {
		ber *= math.Exp(e.spec.Noise * t.Rand.NormFloat64())
	}
	p := t.Port
	bits := float64(p.Info.RateGbps) * 1e9 * t.Seconds() * max(0, t.UpFraction)
	if p.Info.LinkLayer == LinkLayerInfiniBand {
		p.Add(schemas.SourceCounters, "symbol_error", poisson(t.Rand, ber*bits))
		return
	}
	n := poisson(t.Rand, ber*bits)
	p.Add(schemas.SourceEthtool, "rx_corrected_bits_phy", n)
	p.Add(schemas.SourceEthtool, fmt.Sprintf("rx_err_lane_%d_phy", e.spec.Lane), n)
	if ber > 1e-5 {
		// Past what the FEC can fix: uncorrectable blocks show as PCS errors.
		pcs := poisson(t.Rand, ber*bits*1e-6)
		p.Add(schemas.SourceEthtool, "rx_pcs_symbol_err_phy", pcs)
		// Drivers that list them count the uncorrected symbols and the
		// frames they spoil (about one frame per two uncorrected blocks).
		p.Add(schemas.SourceEthtool, "rx_symbol_err_phy", pcs)
		p.Add(schemas.SourceEthtool, "rx_crc_errors_phy", pcs/2)
	}
}

func (e *berDrift) Observe(*Tick) {}

func (e *berDrift) Labels() []Label {
	f := e.spec
	l := Label{Type: schemas.TypeBERDrift, Start: schemas.MillisOf(f.From), Subject: portSubject(f.Port)}
	if critical := f.From.Add(f.ToCritical); f.Until.IsZero() || critical.Before(f.Until) {
		l.CriticalAt = millisPtr(critical)
	}
	if !f.Until.IsZero() {
		l.End = millisPtr(f.Until)
	}
	return []Label{l}
}

// BERLevel is not a fault: it sets a port's steady BER away from the
// fleet's usual 1e-9..1e-8 (a very clean link, or a high but stable one that
// a drift detector must leave alone). Ethernet: pre-FEC BER multiplied by
// Scale; InfiniBand: SymbolBER symbol errors per line bit. No label.
type BERLevel struct {
	Port      PortRef
	Scale     float64
	SymbolBER float64
}

// Start implements Fault.
func (f BERLevel) Start(l *Layout) (Effect, error) {
	if _, ok := l.Port(f.Port); !ok {
		return nil, fmt.Errorf("ber_level: no port %s", f.Port)
	}
	if f.Scale < 0 || f.SymbolBER < 0 || f.SymbolBER > 1e-6 {
		return nil, fmt.Errorf("ber_level: bad scale or symbol BER")
	}
	return &berLevel{f}, nil
}

type berLevel struct{ spec BERLevel }

func (e *berLevel) Ports() []PortRef { return []PortRef{e.spec.Port} }

func (e *berLevel) Apply(t *Tick) {
	p := t.Port
	if p.Info.LinkLayer == LinkLayerInfiniBand {
		bits := float64(p.Info.RateGbps) * 1e9 * t.Seconds() * max(0, t.UpFraction)
		p.Add(schemas.SourceCounters, "symbol_error", poisson(t.Rand, e.spec.SymbolBER*bits))
		return
	}
	if e.spec.Scale > 0 {
		t.BERScale *= e.spec.Scale
	}
}

func (e *berLevel) Observe(*Tick) {}

func (e *berLevel) Labels() []Label { return nil }
