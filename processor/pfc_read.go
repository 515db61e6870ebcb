package processor

// This file reads a sample's pause, traffic and congestion figures for the
// pfc_storm detector (see PFCStorm).

import (
	"github.com/rdmawatch/rdmawatch/schemas"
)

// pfcReading is what one sample says about pauses and traffic.
type pfcReading struct {
	valid        bool // the tx pause duration of some priority has a real delta
	prio         int  // busiest tx priority
	txFraction   float64
	txFramesPerS float64
	rxFraction   float64
	rxFramesPerS float64
	rcvGbps      float64
	rcvKnown     bool
	utilisation  float64 // receive Gb/s over the line rate; -1 unknown
	ecnPerS      float64
	cnpSentPerS  float64
	cnpHandPerS  float64
	stormWarn    uint64 // watchdog deltas
	stormErr     uint64
}

// pfcReadPauses reads the sample's pause, traffic and congestion figures. A
// counter that is a baseline, was reset or held says nothing about this
// interval; a reading without one usable tx pause duration is not valid.
func pfcReadPauses(s *Sample) pfcReading {
	var r pfcReading
	if s.IntervalMs <= 0 {
		return r
	}
	sec := float64(s.IntervalMs) / 1000
	var txDur, txFrames, rxDur, rxFrames [8]float64
	var txOK [8]bool
	const unusable = schemas.FlagFirst | schemas.FlagReset | schemas.FlagHeld
	// The pause counters: one of them that says nothing about this
	// interval makes the whole reading invalid.
	for p := range 8 {
		for k, id := range [4]schemas.CounterID{idTxPauseDuration[p], idTxPause[p], idRxPauseDuration[p], idRxPause[p]} {
			c, ok := s.CounterByID(id)
			if !ok {
				continue
			}
			if c.Flags&unusable != 0 {
				return pfcReading{}
			}
			v := float64(c.Delta)
			switch k {
			case 0:
				txDur[p], txOK[p] = v, true
			case 1:
				txFrames[p] = v
			case 2:
				rxDur[p] = v
			default:
				rxFrames[p] = v
			}
		}
	}
	if c, ok := s.CounterByID(idStormWarning); ok && c.Flags&unusable == 0 {
		r.stormWarn = c.Delta
	}
	if c, ok := s.CounterByID(idStormError); ok && c.Flags&unusable == 0 {
		r.stormErr = c.Delta
	}
	if c, ok := s.CounterByID(idPortRcvData); ok && c.Flags&unusable == 0 {
		r.rcvGbps = schemas.Gbps(c.Delta, s.IntervalMs)
		r.rcvKnown = true
	}
	if c, ok := s.CounterByID(idCNP[cnpMarked]); ok && c.Flags&unusable == 0 {
		r.ecnPerS = float64(c.Delta) / sec
	}
	if c, ok := s.CounterByID(idCNP[cnpSent]); ok && c.Flags&unusable == 0 {
		r.cnpSentPerS = float64(c.Delta) / sec
	}
	if c, ok := s.CounterByID(idCNP[cnpHandled]); ok && c.Flags&unusable == 0 {
		r.cnpHandPerS = float64(c.Delta) / sec
	}
	for p := range 8 {
		if !txOK[p] {
			continue
		}
		if f := schemas.PauseFraction(txDur[p], s.IntervalMs); !r.valid || f > r.txFraction {
			r.valid, r.prio, r.txFraction, r.txFramesPerS = true, p, f, txFrames[p]/sec
		}
		if f := schemas.PauseFraction(rxDur[p], s.IntervalMs); f > r.rxFraction {
			r.rxFraction, r.rxFramesPerS = f, rxFrames[p]/sec
		}
	}
	r.utilisation = -1
	if gbps := rateGbps(s.Rate); gbps > 0 && r.rcvKnown {
		r.utilisation, _ = schemas.RcvUtilisation(r.rcvGbps, gbps)
	}
	return r
}

// pfcPauseCounter parses {tx,rx}_prio<N>_pause[_duration].
func pfcPauseCounter(name string) (dir byte, prio int, duration, ok bool) {
	if len(name) < len("tx_prio0_pause") || name[1] != 'x' || name[2:7] != "_prio" {
		return 0, 0, false, false
	}
	dir = name[0]
	if dir != 't' && dir != 'r' || name[7] < '0' || name[7] > '7' {
		return 0, 0, false, false
	}
	switch name[8:] {
	case "_pause":
		return dir, int(name[7] - '0'), false, true
	case "_pause_duration":
		return dir, int(name[7] - '0'), true, true
	}
	return 0, 0, false, false
}

func pfcRound2(x float64) float64 { return roundTo(x, 2) }
