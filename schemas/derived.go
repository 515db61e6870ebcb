package schemas

import (
	"math"
	"strings"
)

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

// maxLAGMembers bounds the member count a sample's GaugeLAGMembers may
// claim: the collector bonds at most 16 netdevs (a RoCE LAG has 2, 4 on
// ConnectX-7's 4-port LAG). A larger value is not the collector's; it is
// ignored rather than allowed to divide a storm's pauses away.
const maxLAGMembers = 16

// PauseLinks is how many links a sample's pause counters add up: the
// GaugeLAGMembers of a RoCE LAG's sample (its ethtool statistics are the
// sum over its members, and pauses are per link), 1 for any other port or
// a bond sample without the gauge (a trace written before it existed, or a
// value outside 1..maxLAGMembers).
func PauseLinks(p *PortSample) int {
	if n, ok := p.Gauges[GaugeLAGMembers]; ok && n > 1 && n <= maxLAGMembers {
		return int(n)
	}
	return 1
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

// LinkActive reads a port's sysfs state text: an unknown state ("") is
// taken as up, since a trace may leave it out.
func LinkActive(state string) bool {
	if state == "" {
		return true
	}
	return strings.Contains(strings.ToUpper(state), "ACTIVE")
}

// LaneCount reads the lanes of a link out of its sysfs rate text: 4 from
// "100 Gb/sec (4X EDR)", 1 from "25 Gb/sec (1X EDR)"; 0 when the text does
// not say.
func LaneCount(rate string) int {
	i := strings.IndexByte(rate, '(')
	if i < 0 {
		return 0
	}
	n := 0
	for _, c := range rate[i+1:] {
		if c < '0' || c > '9' {
			if c != 'X' && c != 'x' || n == 0 {
				return 0
			}
			return n
		}
		n = n*10 + int(c-'0')
		if n > 64 {
			return 0
		}
	}
	return 0
}

// PHYBits says what an Ethernet port's bit error ratios were measured
// against.
type PHYBits uint8

const (
	// PHYBitsNone: neither rx_bits_phy nor a link rate: no BER.
	PHYBitsNone PHYBits = iota
	// PHYBitsCounted: rx_bits_phy, the bits the PHY received.
	PHYBitsCounted
	// PHYBitsLineRate: the link rate times the interval. Upstream mlx5
	// before 2026 and MLNX_OFED 5.x do not list rx_bits_phy; a PHY receives
	// symbols at its lane rate whether they carry frames or idles, so the
	// rate is the count (as InfiniBand's symbol BER is measured, and as
	// mlxlink computes its raw physical BER).
	PHYBitsLineRate
)

func (b PHYBits) String() string {
	return [...]string{"none", "rx_bits_phy", "link_rate_x_interval"}[b]
}

// EthernetPHYBits is the bits an Ethernet port's PHY received in the
// sample's interval: rx_bits_phy where the driver lists it, else the link
// rate times the interval on a port that is up. A listed rx_bits_phy that
// says nothing about the interval (a baseline, a reset, a held read) gives
// no bits, never the rate in its place. ok is false without either.
func EthernetPHYBits(p *PortSample) (bits float64, src PHYBits) {
	if p.IntervalMs <= 0 {
		return 0, PHYBitsNone
	}
	if c, found := p.CounterByID(figRxBitsPhy); found {
		if !Usable(c) || c.Delta == 0 {
			return 0, PHYBitsNone
		}
		return float64(c.Delta), PHYBitsCounted
	}
	rate, err := ParseRateGbps(p.Rate)
	if err != nil || rate <= 0 || !LinkActive(p.State) {
		return 0, PHYBitsNone
	}
	return rate * 1e9 * float64(p.IntervalMs) / 1000, PHYBitsLineRate
}

// Figures are the derived figures of one port-sample: the sink's
// port_samples columns of the same names.
type Figures struct {
	RateGbps        float64 // the link's rate, from the sysfs rate text
	RcvGbps         float64 // port_rcv_data over the interval
	XmitGbps        float64 // port_xmit_data over the interval
	Utilisation     float64 // LinkUtilisation
	TxPauseFraction float64 // PauseFraction of the busiest priority, or of the global pause; per link (PortFigures)
	RxPauseFraction float64
	PreFECBER       float64 // Ethernet: rx_corrected_bits_phy / EthernetPHYBits
	PostFECBER      float64 // Ethernet: rx_pcs_symbol_err_phy (else rx_symbol_err_phy) / EthernetPHYBits
	SymbolBER       float64 // InfiniBand: symbol_error / LineBits
}

var (
	figRcvData      = MustCounterID(SourceCounters, "port_rcv_data")
	figXmitData     = MustCounterID(SourceCounters, "port_xmit_data")
	figSymbolError  = MustCounterID(SourceCounters, "symbol_error")
	figRxBitsPhy    = MustCounterID(SourceEthtool, "rx_bits_phy")
	figCorrectedPhy = MustCounterID(SourceEthtool, "rx_corrected_bits_phy")
	figPCSSymbolErr = MustCounterID(SourceEthtool, "rx_pcs_symbol_err_phy")
	figSymbolErrPhy = MustCounterID(SourceEthtool, "rx_symbol_err_phy")
	figTxPauseDur   [8]CounterID
	figRxPauseDur   [8]CounterID
	// IEEE 802.3x global pause: a pause of every priority (mlx5 and mlx4_en
	// names; a port counts one or the other, never both).
	figTxGlobalPauseDur = [...]CounterID{MustCounterID(SourceEthtool, "tx_global_pause_duration"), MustCounterID(SourceEthtool, "tx_pause_duration")}
	figRxGlobalPauseDur = [...]CounterID{MustCounterID(SourceEthtool, "rx_global_pause_duration"), MustCounterID(SourceEthtool, "rx_pause_duration")}
)

func init() {
	for p := range 8 {
		figTxPauseDur[p] = MustCounterID(SourceEthtool, "tx_prio"+string(rune('0'+p))+"_pause_duration")
		figRxPauseDur[p] = MustCounterID(SourceEthtool, "rx_prio"+string(rune('0'+p))+"_pause_duration")
	}
}

// PortFigures computes a port-sample's derived figures. A figure whose
// counter is absent or not Usable is 0 (unknown), never a guess: a reset
// port's traffic is not a throughput, a held read is not a quiet link, a
// data counter pinned at 2^32-1 is no throughput either, and
// a pause counter that says nothing about the interval makes both pause
// fractions unknown (as pfc_storm reads them).
//
// The pause fractions are one link's. A RoCE LAG's sample sums its n
// members' pause durations (PauseLinks), which can reach n intervals: read
// as one link's they would say two links pausing 34% each pause 68%. They
// are divided by n, the mean member link's fraction. The busiest member's
// is not known: the bond's sample carries only the sum, and the member
// samples only PHY statistics.
func PortFigures(p *PortSample) Figures {
	rate, _ := ParseRateGbps(p.Rate) // 0: not a rate text
	f := Figures{RateGbps: rate}
	if p.IntervalMs <= 0 {
		return f
	}
	rcv, haveRcv, rcvOK := unpinnedDelta(p, figRcvData)
	xmit, _, xmitOK := unpinnedDelta(p, figXmitData)
	if rcvOK {
		f.RcvGbps = Gbps(rcv, p.IntervalMs)
	}
	if xmitOK {
		f.XmitGbps = Gbps(xmit, p.IntervalMs)
	}
	if rcvOK && xmitOK {
		f.Utilisation = LinkUtilisation(f.RcvGbps, f.XmitGbps, rate)
	}
	if tx, rx, ok := busiestPauses(p); ok {
		links := float64(PauseLinks(p))
		f.TxPauseFraction = PauseFraction(float64(tx)/links, p.IntervalMs)
		f.RxPauseFraction = PauseFraction(float64(rx)/links, p.IntervalMs)
	}
	if p.LinkLayer != "InfiniBand" {
		f.PreFECBER, f.PostFECBER = ethernetBERs(p)
	}
	if p.LinkLayer == "InfiniBand" {
		// A pinned symbol_error (FlagSaturated) is blind, not error-free.
		errs, haveErrs, errsOK := unpinnedDelta(p, figSymbolError)
		if haveErrs && errsOK && (rate > 0 || (haveRcv && rcvOK)) {
			f.SymbolBER = ErrorRatio(float64(errs), LineBits(rate, p.IntervalMs, float64(rcv)))
		}
	}
	return f
}

// figureDelta returns a counter's delta, whether it was read and whether
// its delta measures the interval.
func figureDelta(p *PortSample, id CounterID) (delta uint64, present, ok bool) {
	c, found := p.CounterByID(id)
	if !found {
		return 0, false, true
	}
	if !Usable(c) {
		return 0, true, false
	}
	return c.Delta, true, true
}

// unpinnedDelta is figureDelta, not ok for a counter pinned at its 32-bit
// top (FlagSaturated, an Ext64Sat32 counter without PortCountersExtended):
// it reads delta 0 whatever the traffic or the errors, so its throughput or
// BER is unknown, not an idle or clean link.
func unpinnedDelta(p *PortSample, id CounterID) (delta uint64, present, ok bool) {
	delta, present, ok = figureDelta(p, id)
	if c, found := p.CounterByID(id); found && c.Flags&FlagSaturated != 0 {
		ok = false
	}
	return delta, present, ok
}

// busiestPauses returns the largest pause duration sent and received over
// the priorities and the global pause; ok false when any pause counter
// says nothing about the interval.
func busiestPauses(p *PortSample) (tx, rx uint64, ok bool) {
	ok = true
	for prio := range 8 {
		t, _, tOK := figureDelta(p, figTxPauseDur[prio])
		r, _, rOK := figureDelta(p, figRxPauseDur[prio])
		ok = ok && tOK && rOK
		tx, rx = max(tx, t), max(rx, r)
	}
	for i := range figTxGlobalPauseDur {
		t, _, tOK := figureDelta(p, figTxGlobalPauseDur[i])
		r, _, rOK := figureDelta(p, figRxGlobalPauseDur[i])
		ok = ok && tOK && rOK
		tx, rx = max(tx, t), max(rx, r)
	}
	return tx, rx, ok
}

// ethernetBERs returns an Ethernet port's pre- and post-FEC bit error
// rates, 0 (unknown) where a counter is missing or not Usable.
func ethernetBERs(p *PortSample) (pre, post float64) {
	bits, src := EthernetPHYBits(p)
	if src == PHYBitsNone {
		return 0, 0
	}
	if corrected, _, ok := figureDelta(p, figCorrectedPhy); ok {
		pre = ErrorRatio(float64(corrected), bits)
	}
	// The symbol errors FEC left: the PCS's count where the NIC
	// has the statistical group, else IEEE 802.3's symbol errors
	// during carrier (ports without it list only that one).
	pcs, havePCS, ok := figureDelta(p, figPCSSymbolErr)
	if !havePCS {
		pcs, _, ok = figureDelta(p, figSymbolErrPhy)
	}
	if ok {
		post = ErrorRatio(float64(pcs), bits)
	}
	return pre, post
}
