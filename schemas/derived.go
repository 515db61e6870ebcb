package schemas

import "math"

// Derived figures: one definition each, used by the sink for its
// port_samples columns and by the detectors where they measure the same
// thing, so a figure in an event's evidence can be found again in the table.
// Every figure is 0 where its inputs are missing or say nothing about the
// interval (see Usable); none is NaN or infinite.

// Usable reports whether a counter's delta measures its interval: not a
// baseline (FlagFirst), not counted from an unknown moment after a reset
// (FlagReset), not a held read glitch (FlagHeld, delta 0 for now). Wrapped
// and saturated counters keep their delta: a wrap is accounted for, and a
// pinned counter's 0 is what it can say.
func Usable(c CounterDelta) bool { return c.Flags&(FlagFirst|FlagReset|FlagHeld) == 0 }

// PerSecond is a delta over its interval.
func PerSecond(delta uint64, intervalMs int64) float64 {
	if intervalMs <= 0 {
		return 0
	}
	return float64(delta) / (float64(intervalMs) / 1000)
}

// Gbps is a byte delta (port_*_data deltas are bytes already) over its
// interval, in Gb/s.
func Gbps(bytes uint64, intervalMs int64) float64 {
	if intervalMs <= 0 {
		return 0
	}
	return float64(bytes) * 8 / (float64(intervalMs) / 1000) / 1e9
}

// LinkUtilisation is the busier direction's throughput over the link's
// rate, 0..1; 0 when the rate is unknown. It is the sink's `utilisation`
// column: how full the link is, for capacity planning.
func LinkUtilisation(rcvGbps, xmitGbps, rateGbps float64) float64 {
	if rateGbps <= 0 {
		return 0
	}
	return min(max(rcvGbps, xmitGbps)/rateGbps, 1)
}

// RcvUtilisation is the received throughput over the link's rate, not
// clamped (a reading a little above 1 is jitter, and says so); ok is false
// when the rate is unknown. pfc_storm uses it: a port that receives at line
// rate pauses its peer because it is full, not because it is stuck. It is
// not LinkUtilisation: a port can send at line rate and receive nothing.
func RcvUtilisation(rcvGbps, rateGbps float64) (float64, bool) {
	if rateGbps <= 0 {
		return 0, false
	}
	return rcvGbps / rateGbps, true
}

// PauseFraction is the share of the interval a port was paused (or paused
// its peer) on one priority, from the pause duration in microseconds
// (ethtool *_prio<N>_pause_duration), clamped to 1.
func PauseFraction(durationUs float64, intervalMs int64) float64 {
	if intervalMs <= 0 || durationUs <= 0 {
		return 0
	}
	return min(durationUs/(float64(intervalMs)*1000), 1)
}

// ErrorRatio is errors over bits: a bit error ratio (pre-FEC: corrected
// bits over rx_bits_phy; post-FEC: PCS symbol errors over rx_bits_phy;
// InfiniBand: symbol errors over LineBits). 0 without bits.
func ErrorRatio(errors, bits float64) float64 {
	if bits <= 0 || errors <= 0 || math.IsInf(bits, 0) || math.IsNaN(errors) {
		return 0
	}
	return errors / bits
}

// LineBits is what an InfiniBand port's symbol errors are measured against:
// the link's rate times the interval, or the bits it received
// (port_rcv_data deltas are bytes) when the rate is unknown.
func LineBits(rateGbps float64, intervalMs int64, rcvBytes float64) float64 {
	if rateGbps > 0 && intervalMs > 0 {
		return rateGbps * 1e9 * float64(intervalMs) / 1000
	}
	return rcvBytes * 8
}

// Figures are the derived figures of one port-sample: the sink's
// port_samples columns of the same names.
type Figures struct {
	RateGbps        float64 // the link's rate, from the sysfs rate text
	RcvGbps         float64 // port_rcv_data over the interval
	XmitGbps        float64 // port_xmit_data over the interval
	Utilisation     float64 // LinkUtilisation
	TxPauseFraction float64 // PauseFraction of the busiest priority
	RxPauseFraction float64
	PreFECBER       float64 // Ethernet: rx_corrected_bits_phy / rx_bits_phy
	PostFECBER      float64 // Ethernet: rx_pcs_symbol_err_phy / rx_bits_phy
	SymbolBER       float64 // InfiniBand: symbol_error / LineBits
}

var (
	figRcvData      = MustCounterID(SourceCounters, "port_rcv_data")
	figXmitData     = MustCounterID(SourceCounters, "port_xmit_data")
	figSymbolError  = MustCounterID(SourceCounters, "symbol_error")
	figRxBitsPhy    = MustCounterID(SourceEthtool, "rx_bits_phy")
	figCorrectedPhy = MustCounterID(SourceEthtool, "rx_corrected_bits_phy")
	figPCSSymbolErr = MustCounterID(SourceEthtool, "rx_pcs_symbol_err_phy")
	figTxPauseDur   [8]CounterID
	figRxPauseDur   [8]CounterID
)

func init() {
	for p := range 8 {
		figTxPauseDur[p] = MustCounterID(SourceEthtool, "tx_prio"+string(rune('0'+p))+"_pause_duration")
		figRxPauseDur[p] = MustCounterID(SourceEthtool, "rx_prio"+string(rune('0'+p))+"_pause_duration")
	}
}

// PortFigures computes a port-sample's derived figures. A figure whose
// counter is absent or not Usable is 0 (unknown), never a guess: a reset
// port's traffic is not a throughput, a held read is not a quiet link, and
// a pause counter that says nothing about the interval makes both pause
// fractions unknown (as pfc_storm reads them).
func PortFigures(p *PortSample) Figures {
	rate, _ := ParseRateGbps(p.Rate) // 0: not a rate text
	f := Figures{RateGbps: rate}
	if p.IntervalMs <= 0 {
		return f
	}
	// get returns a counter's delta, whether it was read and whether its
	// delta measures the interval.
	get := func(id CounterID) (delta uint64, present, ok bool) {
		c, found := p.CounterByID(id)
		if !found {
			return 0, false, true
		}
		if !Usable(c) {
			return 0, true, false
		}
		return c.Delta, true, true
	}
	rcv, haveRcv, rcvOK := get(figRcvData)
	xmit, _, xmitOK := get(figXmitData)
	if rcvOK {
		f.RcvGbps = Gbps(rcv, p.IntervalMs)
	}
	if xmitOK {
		f.XmitGbps = Gbps(xmit, p.IntervalMs)
	}
	if rcvOK && xmitOK {
		f.Utilisation = LinkUtilisation(f.RcvGbps, f.XmitGbps, rate)
	}
	var tx, rx uint64
	pausesOK := true
	for prio := range 8 {
		t, _, tOK := get(figTxPauseDur[prio])
		r, _, rOK := get(figRxPauseDur[prio])
		pausesOK = pausesOK && tOK && rOK
		tx, rx = max(tx, t), max(rx, r)
	}
	if pausesOK {
		f.TxPauseFraction = PauseFraction(float64(tx), p.IntervalMs)
		f.RxPauseFraction = PauseFraction(float64(rx), p.IntervalMs)
	}
	if bits, ok, bitsOK := get(figRxBitsPhy); ok && bitsOK {
		if corrected, _, ok := get(figCorrectedPhy); ok {
			f.PreFECBER = ErrorRatio(float64(corrected), float64(bits))
		}
		if pcs, _, ok := get(figPCSSymbolErr); ok {
			f.PostFECBER = ErrorRatio(float64(pcs), float64(bits))
		}
	}
	if p.LinkLayer == "InfiniBand" {
		errs, haveErrs, errsOK := get(figSymbolError)
		if c, ok := p.CounterByID(figSymbolError); ok && c.Flags&FlagSaturated != 0 {
			errsOK = false // pinned at its maximum: blind, not error-free
		}
		if haveErrs && errsOK && (rate > 0 || (haveRcv && rcvOK)) {
			f.SymbolBER = ErrorRatio(float64(errs), LineBits(rate, p.IntervalMs, float64(rcv)))
		}
	}
	return f
}
