package sim

import "github.com/rdmawatch/rdmawatch/schemas"

// counterDef is one file (or ethtool statistic) a port exposes.
type counterDef struct {
	src  schemas.Source
	name string
	kind schemas.Kind
	// perLink: on a bond, a delta counts once per member link (perLinkStat).
	perLink bool
}

// counterSet is the list of counters one kind of port exposes, in the order a
// sample writes them, with the indexes the traffic model uses.
type counterSet struct {
	defs  []counterDef
	index map[schemas.Source]map[string]int
	// alias maps an ethtool name the faults count under to the one the
	// port lists (global pause for the priority-3 names); nil: none.
	alias map[string]string
	// rxTransition is rx_global_pause_transition's index, -1 without it.
	rxTransition int

	symbolError, linkDowned, linkErrorRecovery, portRcvErrors, xmitDiscards int
	rcvData, xmitData, rcvPackets, xmitPackets, xmitWait                    int
	unicastXmit, unicastRcv, multicastXmit, multicastRcv                    int
	ecnMarked, cnpSent, cnpHandled, cnpIgnored                              int
	outOfBuffer, outOfSequence, packetSeqErr, localAckTimeout               int
	duplicateRequest, impliedNakSeqErr, rnrNakRetryErr                      int
	txPause, txPauseMicros, rxPause, rxPauseMicros                          int
	stormWarning, stormError                                                int
	rxBitsPhy, correctedBits, pcsSymbolErr, linkDownEventsPhy               int
	lanes                                                                   [4]int
}

// Counter files of a RoCE port as an mlx5 driver shows them (see the
// examples in test/fixtures/examples/trace.jsonl).
var ethernetNames = [3][]string{
	{"symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors", "port_xmit_discards",
		"port_rcv_data", "port_xmit_data", "port_rcv_packets", "port_xmit_packets", "port_xmit_wait"},
	{"np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored", "out_of_buffer",
		"out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "lifespan", "rnr_nak_retry_err"},
	{"tx_prio3_pause", "tx_prio3_pause_duration", "rx_prio3_pause", "rx_prio3_pause_duration",
		"tx_pause_storm_warning_events", "tx_pause_storm_error_events", "rx_bits_phy", "rx_corrected_bits_phy",
		"rx_pcs_symbol_err_phy", "link_down_events_phy",
		"rx_err_lane_0_phy", "rx_err_lane_1_phy", "rx_err_lane_2_phy", "rx_err_lane_3_phy", "rx_discards_phy"},
}

// Counter files of an InfiniBand port: the full PortCounters set and the
// q-counters without the RoCE congestion ones (see the mlx5 capture in
// test/fixtures/mlx-sysfs-capture.txt). No netdev, so no ethtool.
var infinibandNames = [3][]string{
	{"symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors", "port_rcv_remote_physical_errors",
		"port_rcv_switch_relay_errors", "port_xmit_discards", "port_xmit_constraint_errors",
		"port_rcv_constraint_errors", "local_link_integrity_errors", "excessive_buffer_overrun_errors",
		"VL15_dropped", "port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets",
		"port_xmit_wait", "unicast_xmit_packets", "unicast_rcv_packets", "multicast_xmit_packets",
		"multicast_rcv_packets"},
	{"duplicate_request", "implied_nak_seq_err", "lifespan", "local_ack_timeout_err", "out_of_buffer",
		"out_of_sequence", "packet_seq_err", "rnr_nak_retry_err"},
	nil,
}

var sources = [3]schemas.Source{schemas.SourceCounters, schemas.SourceHWCounters, schemas.SourceEthtool}

var (
	ethernetSet   = newCounterSet(ethernetNames, nil)
	infinibandSet = newCounterSet(infinibandNames, nil)
)

func newCounterSet(names [3][]string, alias map[string]string) *counterSet {
	cs := &counterSet{index: map[schemas.Source]map[string]int{}, alias: alias}
	for i, src := range sources {
		cs.index[src] = map[string]int{}
		for _, n := range names[i] {
			cs.index[src][n] = len(cs.defs)
			cs.defs = append(cs.defs, counterDef{src: src, name: n, kind: schemas.KindOf(src, n)})
		}
	}
	c := func(n string) int { return cs.lookup(schemas.SourceCounters, n) }
	h := func(n string) int { return cs.lookup(schemas.SourceHWCounters, n) }
	e := func(n string) int { return cs.lookup(schemas.SourceEthtool, n) }
	cs.symbolError, cs.linkDowned, cs.linkErrorRecovery = c("symbol_error"), c("link_downed"), c("link_error_recovery")
	cs.portRcvErrors, cs.xmitDiscards = c("port_rcv_errors"), c("port_xmit_discards")
	cs.rcvData, cs.xmitData, cs.rcvPackets, cs.xmitPackets = c("port_rcv_data"), c("port_xmit_data"), c("port_rcv_packets"), c("port_xmit_packets")
	cs.xmitWait = c("port_xmit_wait")
	cs.unicastXmit, cs.unicastRcv = c("unicast_xmit_packets"), c("unicast_rcv_packets")
	cs.multicastXmit, cs.multicastRcv = c("multicast_xmit_packets"), c("multicast_rcv_packets")
	cs.ecnMarked, cs.cnpSent, cs.cnpHandled, cs.cnpIgnored = h("np_ecn_marked_roce_packets"), h("np_cnp_sent"), h("rp_cnp_handled"), h("rp_cnp_ignored")
	cs.outOfBuffer, cs.outOfSequence, cs.packetSeqErr, cs.localAckTimeout = h("out_of_buffer"), h("out_of_sequence"), h("packet_seq_err"), h("local_ack_timeout_err")
	cs.duplicateRequest, cs.impliedNakSeqErr, cs.rnrNakRetryErr = h("duplicate_request"), h("implied_nak_seq_err"), h("rnr_nak_retry_err")
	cs.txPause, cs.txPauseMicros, cs.rxPause, cs.rxPauseMicros = e("tx_prio3_pause"), e("tx_prio3_pause_duration"), e("rx_prio3_pause"), e("rx_prio3_pause_duration")
	cs.stormWarning, cs.stormError = e("tx_pause_storm_warning_events"), e("tx_pause_storm_error_events")
	cs.rxBitsPhy, cs.correctedBits, cs.pcsSymbolErr, cs.linkDownEventsPhy = e("rx_bits_phy"), e("rx_corrected_bits_phy"), e("rx_pcs_symbol_err_phy"), e("link_down_events_phy")
	for i := range cs.lanes {
		cs.lanes[i] = e("rx_err_lane_" + string(rune('0'+i)) + "_phy")
	}
	cs.rxTransition = e(rxPauseTransition)
	return cs
}

func (cs *counterSet) lookup(src schemas.Source, name string) int {
	if i, ok := cs.index[src][name]; ok {
		return i
	}
	if a, ok := cs.alias[name]; ok && src == schemas.SourceEthtool {
		if i, ok := cs.index[src][a]; ok {
			return i
		}
	}
	return -1
}

// addCounter adds delta to a reading the way the hardware does: saturating
// counters stop at their maximum, 32-bit ones wrap, settings do not move.
func addCounter(kind schemas.Kind, value, delta uint64) uint64 {
	switch {
	case kind == schemas.Gauge:
		return value
	case kind.Saturating():
		if max := kind.Max(); value >= max || delta >= max-value {
			return max
		}
		return value + delta
	case kind == schemas.Wrap32:
		return (value + delta) & schemas.Wrap32.Max()
	}
	return value + delta
}

// PortState is the hardware state of one port: what a reading would show.
// Faults change it through Add, Set and Clear, which keep the counters'
// hardware semantics.
type PortState struct {
	Info      PortInfo
	set       *counterSet
	values    []uint64
	linkState string
	// links is how many member links a bond's summed statistics add up
	// (1 on any other port).
	links uint64
	// transCarry is the fraction of a pause episode not yet counted in
	// rx_global_pause_transition.
	transCarry float64
}

func newPortState(info PortInfo) *PortState {
	set := counterSetOf(info)
	p := &PortState{Info: info, set: set, values: make([]uint64, len(set.defs)), linkState: "ACTIVE", links: 1}
	if info.role == roleBond {
		p.links = bondMembers
	}
	if i := set.lookup(schemas.SourceHWCounters, "lifespan"); i >= 0 {
		p.values[i] = 10 // ms, the mlx5 default
	}
	if i, v := lagMembersGauge(p); i >= 0 {
		p.values[i] = v
	}
	return p
}

// Has reports whether the port exposes the counter.
func (p *PortState) Has(src schemas.Source, name string) bool { return p.set.lookup(src, name) >= 0 }

// Value returns the counter's reading; ok is false when the port has no such counter.
func (p *PortState) Value(src schemas.Source, name string) (v uint64, ok bool) {
	i := p.set.lookup(src, name)
	if i < 0 {
		return 0, false
	}
	return p.values[i], true
}

// Add counts delta events on the counter, if the port has it.
func (p *PortState) Add(src schemas.Source, name string, delta uint64) {
	p.add(p.set.lookup(src, name), delta)
}

// Set forces a reading, clamped to what the counter can show.
func (p *PortState) Set(src schemas.Source, name string, v uint64) {
	if i := p.set.lookup(src, name); i >= 0 {
		if k := p.set.defs[i].kind; v > k.Max() {
			v = k.Max()
		}
		p.values[i] = v
	}
}

// Clear sets every counter of the port to zero, as a driver reload or
// `perfquery -R` does; settings such as lifespan keep their value.
func (p *PortState) Clear() {
	for i, d := range p.set.defs {
		if d.kind != schemas.Gauge {
			p.values[i] = 0
		}
	}
}

func (p *PortState) add(i int, delta uint64) {
	if i < 0 || delta == 0 {
		return
	}
	if p.set.defs[i].perLink {
		delta *= p.links
	}
	p.values[i] = addCounter(p.set.defs[i].kind, p.values[i], delta)
	if i == p.set.rxPauseMicros && p.set.rxTransition >= 0 {
		// One XOFF-to-XON transition per received pause episode (delta is
		// already the sum over a bond's links).
		p.transCarry += float64(delta) / pauseEpisodeMicros
		n := uint64(p.transCarry)
		p.transCarry -= float64(n)
		p.values[p.set.rxTransition] = addCounter(p.set.defs[p.set.rxTransition].kind, p.values[p.set.rxTransition], n)
	}
}
