// Package pause reads a sample's pause, traffic and congestion figures the
// way the pfc_storm detector judges them (processor/detect/pfcstorm);
// receive_starvation's veto reads the same
// (processor/detect/receivestarvation). It reads the wire sample only, so
// it needs nothing of the processor.
package pause

import "github.com/rdmawatch/rdmawatch/schemas"

// GlobalPrio is the priority a reading names when its busiest pause is
// an IEEE 802.3x global pause: a pause of every priority.
const GlobalPrio = -1

// Reading is what one sample says about pauses and traffic.
type Reading struct {
	Valid          bool // the tx pause duration of some priority, or the global one, has a real delta
	Prio           int  // busiest tx priority; GlobalPrio for the global pause
	TxFraction     float64
	TxFramesPerS   float64
	RxFraction     float64
	RxFramesPerS   float64
	RcvGbps        float64
	RcvKnown       bool    // port_rcv_data measures the interval (not a baseline, reset, held or pinned reading)
	Utilisation    float64 // receive Gb/s over the line rate; -1 unknown
	ECNPerS        float64
	CNPSentPerS    float64
	CNPHandledPerS float64
	StormWarn      uint64 // watchdog deltas
	StormErr       uint64
	// Links is how many member links a RoCE LAG's summed pause counters
	// add up (schemas.PauseLinks); 1 on any other port. The fractions and
	// frame rates above are already per link.
	Links int
}

// slots are the pause figures of a sample: the eight priorities,
// then the global pause (slot globalSlot).
const (
	globalSlot = 8
	slots      = 9
)

// Read reads the sample's pause, traffic and congestion figures. A
// counter that is a baseline, was reset or held says nothing about this
// interval; a reading without one usable tx pause duration is not valid.
//
// A port on IEEE 802.3x flow control counts tx/rx_global_pause[_duration]
// (mlx5) or tx/rx_pause[_duration] (mlx4_en) instead of the per-priority
// counters: that pause stops every priority, so it is read as one more
// priority (GlobalPrio), and a reading with only global counters is
// valid. A pinned 32-bit port_rcv_data (schemas.FlagSaturated) is an
// unknown receive rate, not a stalled receive path.
//
// Pauses are per link. A RoCE LAG's sample carries the sum of its n
// members' pause counters (schemas.GaugeLAGMembers): two links pausing 34%
// each sum to 68% of the interval, which read as one link's is a storm that
// is not there. The durations and frames are divided by n: the mean member
// link's figures, which pfc_storm, pfc_spread, pfc_silent and
// receive_starvation's veto then compare with one link's thresholds. The
// busiest member's figure would be the better one for a storm (a stuck
// link beside an idle sibling), but it is not known: the bond's sample has
// only the sum, and the member samples carry only PHY statistics. The mean
// misses little: a stuck host stops draining every link, so all its
// members pause alike (the mean is each link's), and one member stuck at
// 100% beside a sibling pausing nothing still reads 50%, pfc_storm's
// OpenFraction; one stuck at 80% alone reads 40%, its SustainFraction,
// which opens after a few readings. Only a lone member pausing under 80% goes unseen. A
// bond whose member is down still counts it (its counters are summed): the
// live member's pauses are then halved.
func Read(s *schemas.PortSample) Reading {
	var r Reading
	if s.IntervalMs <= 0 {
		return r
	}
	r.Links = schemas.PauseLinks(s)
	sec := float64(s.IntervalMs) / 1000
	links := float64(r.Links)
	var ps pauseSlots
	if !ps.readAll(s) {
		return Reading{}
	}
	r.readCongestion(s, sec)
	for slot := range slots {
		if !ps.txOK[slot] {
			continue
		}
		prio := slot
		if slot == globalSlot {
			prio = GlobalPrio
		}
		if f := schemas.PauseFraction(ps.txDur[slot]/links, s.IntervalMs); !r.Valid || f > r.TxFraction {
			r.Valid, r.Prio, r.TxFraction, r.TxFramesPerS = true, prio, f, ps.txFrames[slot]/links/sec
		}
		if f := schemas.PauseFraction(ps.rxDur[slot]/links, s.IntervalMs); f > r.RxFraction {
			r.RxFraction, r.RxFramesPerS = f, ps.rxFrames[slot]/links/sec
		}
	}
	r.Utilisation = -1
	if gbps := rateGbps(s.Rate); gbps > 0 && r.RcvKnown {
		r.Utilisation, _ = schemas.RcvUtilisation(r.RcvGbps, gbps)
	}
	return r
}

// unusable are the flags of a counter whose delta says nothing about the
// interval: a baseline, a reset or a held reading.
const unusable = schemas.FlagFirst | schemas.FlagReset | schemas.FlagHeld

// pauseSlots are a sample's pause durations and frames per slot (the
// eight priorities and the global pause), summed over the counters that
// name a slot, and which slots have a tx duration.
type pauseSlots struct {
	txDur, txFrames, rxDur, rxFrames [slots]float64
	txOK                             [slots]bool
}

// readAll files every pause counter of the sample into its slot; false
// when one says nothing about this interval, which makes the whole
// reading invalid.
func (ps *pauseSlots) readAll(s *schemas.PortSample) bool {
	for p := range 8 {
		for k, id := range [4]schemas.CounterID{idTxPauseDuration[p], idTxPause[p], idRxPauseDuration[p], idRxPause[p]} {
			if !ps.read(s, p, k, id) {
				return false
			}
		}
	}
	// The global pause, under either driver's names (a port lists one).
	for n := range idTxGlobalPauseDuration {
		for k, id := range [4]schemas.CounterID{idTxGlobalPauseDuration[n], idTxGlobalPause[n], idRxGlobalPauseDuration[n], idRxGlobalPause[n]} {
			if !ps.read(s, globalSlot, k, id) {
				return false
			}
		}
	}
	return true
}

// read files one pause counter of a slot (k: 0 tx duration, 1 tx
// frames, 2 rx duration, 3 rx frames); false when it says nothing
// about this interval, which makes the whole reading invalid.
func (ps *pauseSlots) read(s *schemas.PortSample, slot, k int, id schemas.CounterID) bool {
	c, ok := s.CounterByID(id)
	if !ok {
		return true
	}
	if c.Flags&unusable != 0 {
		return false
	}
	v := float64(c.Delta)
	switch k {
	case 0:
		ps.txDur[slot], ps.txOK[slot] = ps.txDur[slot]+v, true
	case 1:
		ps.txFrames[slot] += v
	case 2:
		ps.rxDur[slot] += v
	default:
		ps.rxFrames[slot] += v
	}
	return true
}

// readCongestion reads the storm watchdog's deltas, the receive rate and
// the ECN and CNP rates, each only from a usable counter.
func (r *Reading) readCongestion(s *schemas.PortSample, sec float64) {
	if c, ok := s.CounterByID(idStormWarning); ok && c.Flags&unusable == 0 {
		r.StormWarn = c.Delta
	}
	if c, ok := s.CounterByID(idStormError); ok && c.Flags&unusable == 0 {
		r.StormErr = c.Delta
	}
	if c, ok := s.CounterByID(idPortRcvData); ok && c.Flags&(unusable|schemas.FlagSaturated) == 0 {
		r.RcvGbps = schemas.Gbps(c.Delta, s.IntervalMs)
		r.RcvKnown = true
	}
	if c, ok := s.CounterByID(idECNMarked); ok && c.Flags&unusable == 0 {
		r.ECNPerS = float64(c.Delta) / sec
	}
	if c, ok := s.CounterByID(idCNPSent); ok && c.Flags&unusable == 0 {
		r.CNPSentPerS = float64(c.Delta) / sec
	}
	if c, ok := s.CounterByID(idCNPHandled); ok && c.Flags&unusable == 0 {
		r.CNPHandledPerS = float64(c.Delta) / sec
	}
}

// TxFraction is the share of the sample's interval the port paused
// its link (a LAG's mean member link): the busiest priority or the global
// pause; ok is false when no
// tx pause duration measures the interval. receive_starvation's veto reads
// it, so that a port that pauses with 802.3x global pause is seen pausing.
func TxFraction(s *schemas.PortSample) (fraction float64, ok bool) {
	r := Read(s)
	return r.TxFraction, r.Valid
}

// FlowControl names the kind of pause a reading's priority is, for the
// evidence.
func FlowControl(prio int) string {
	if prio == GlobalPrio {
		return "global_pause"
	}
	return "pfc"
}

// ParseCounter parses {tx,rx}_prio<N>_pause[_duration].
func ParseCounter(name string) (dir byte, prio int, duration, ok bool) {
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

// rateGbps is a port's speed from its rate text, 0 when the text is not a
// rate (the utilisation is then unknown).
func rateGbps(text string) float64 {
	v, _ := schemas.ParseRateGbps(text)
	return v
}
