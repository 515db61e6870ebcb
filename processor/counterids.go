package processor

import "github.com/rdmawatch/rdmawatch/schemas"

// Counter ids the detectors read, resolved once: a lookup per sample is then
// a popcount on the decoded sample's index (schemas.PortSample.CounterByID)
// instead of a scan of string compares over every counter.
var (
	idLinkDowned        = schemas.MustCounterID(schemas.SourceCounters, "link_downed")
	idLinkErrorRecovery = schemas.MustCounterID(schemas.SourceCounters, "link_error_recovery")
	idSymbolError       = schemas.MustCounterID(schemas.SourceCounters, "symbol_error")
	idPortRcvData       = schemas.MustCounterID(schemas.SourceCounters, "port_rcv_data")
	idPortXmitWait      = schemas.MustCounterID(schemas.SourceCounters, "port_xmit_wait")

	idLinkDownEventsPhy  = schemas.MustCounterID(schemas.SourceEthtool, "link_down_events_phy")
	idRxBitsPhy          = schemas.MustCounterID(schemas.SourceEthtool, "rx_bits_phy")
	idRxCorrectedBitsPhy = schemas.MustCounterID(schemas.SourceEthtool, "rx_corrected_bits_phy")
	idRxPCSSymbolErrPhy  = schemas.MustCounterID(schemas.SourceEthtool, "rx_pcs_symbol_err_phy")
	idRxErrLanePhy       = counterIDs(schemas.SourceEthtool, "rx_err_lane_%d_phy")
	// What is left after FEC: symbol errors it could not correct (802.3
	// group, listed where the PHY statistics group with rx_corrected_bits_phy
	// is not) and the frames dropped for a bad FCS, out of rx_packets_phy.
	idRxSymbolErrPhy = schemas.MustCounterID(schemas.SourceEthtool, "rx_symbol_err_phy")
	idRxCRCErrorsPhy = schemas.MustCounterID(schemas.SourceEthtool, "rx_crc_errors_phy")
	idRxPacketsPhy   = schemas.MustCounterID(schemas.SourceEthtool, "rx_packets_phy")
	idStormWarning   = schemas.MustCounterID(schemas.SourceEthtool, "tx_pause_storm_warning_events")
	idStormError     = schemas.MustCounterID(schemas.SourceEthtool, "tx_pause_storm_error_events")

	// PFC per priority.
	idTxPause         = counterIDs(schemas.SourceEthtool, "tx_prio%d_pause")
	idRxPause         = counterIDs(schemas.SourceEthtool, "rx_prio%d_pause")
	idTxPauseDuration = counterIDs(schemas.SourceEthtool, "tx_prio%d_pause_duration")
	idRxPauseDuration = counterIDs(schemas.SourceEthtool, "rx_prio%d_pause_duration")

	// IEEE 802.3x global pause, a pause of every priority: mlx5's names,
	// then mlx4_en's (a port lists one set or the other, never both, and
	// never together with per-priority ones on the same priority).
	idTxGlobalPause         = globalPauseIDs("tx_global_pause", "tx_pause")
	idRxGlobalPause         = globalPauseIDs("rx_global_pause", "rx_pause")
	idTxGlobalPauseDuration = globalPauseIDs("tx_global_pause_duration", "tx_pause_duration")
	idRxGlobalPauseDuration = globalPauseIDs("rx_global_pause_duration", "rx_pause_duration")


	// saturatingIDs are the counters schemas.KindOf calls saturating (the
	// IB PortCounters error counters), with their maximum, in name order.
	saturatingIDs = func() []saturatingCounter {
		names := []string{
			"VL15_dropped",
			"excessive_buffer_overrun_errors",
			"link_downed",
			"link_error_recovery",
			"local_link_integrity_errors",
			"port_rcv_constraint_errors",
			"port_rcv_errors",
			"port_rcv_remote_physical_errors",
			"port_rcv_switch_relay_errors",
			"port_xmit_constraint_errors",
			"port_xmit_discards",
			"symbol_error",
		}
		out := make([]saturatingCounter, len(names))
		for i, n := range names {
			k := schemas.KindOf(schemas.SourceCounters, n)
			if !k.Saturating() {
				panic("processor: " + n + " is not a saturating counter")
			}
			out[i] = saturatingCounter{id: schemas.MustCounterID(schemas.SourceCounters, n), name: n, max: k.Max(), kind: k}
		}
		return out
	}()

	// symbolErrorMax is where symbol_error stops counting.
	symbolErrorMax = schemas.KindOf(schemas.SourceCounters, "symbol_error").Max()

	// pinnableDataIDs are the data and packet counters that are 64-bit
	// where the HCA has PortCountersExtended and 32-bit saturating where it
	// does not (schemas.Ext64Sat32): pinned at 2^32-1 they read as an idle
	// link, and every throughput figure of the port is blind.
	pinnableDataIDs = func() []saturatingCounter {
		names := []string{"port_rcv_data", "port_rcv_packets", "port_xmit_data", "port_xmit_packets"}
		out := make([]saturatingCounter, len(names))
		for i, n := range names {
			k := schemas.KindOf(schemas.SourceCounters, n)
			if k != schemas.Ext64Sat32 {
				panic("processor: " + n + " is not a pinnable 64/32-bit counter")
			}
			out[i] = saturatingCounter{id: schemas.MustCounterID(schemas.SourceCounters, n), name: n, max: 1<<32 - 1, kind: k}
		}
		return out
	}()
)

// globalPauseIDs resolves one global pause counter under its mlx5 and
// mlx4_en names.
func globalPauseIDs(mlx5, mlx4 string) [2]schemas.CounterID {
	return [2]schemas.CounterID{schemas.MustCounterID(schemas.SourceEthtool, mlx5), schemas.MustCounterID(schemas.SourceEthtool, mlx4)}
}

type saturatingCounter struct {
	id   schemas.CounterID
	name string
	max  uint64
	kind schemas.Kind
}

// counterIDs resolves a counter per priority or lane, 0 to 7.
func counterIDs(src schemas.Source, format string) (ids [8]schemas.CounterID) {
	for i := range ids {
		ids[i] = schemas.MustCounterID(src, fmtDigit(format, i))
	}
	return ids
}

// fmtDigit replaces the %d of format with the digit i (0-9).
func fmtDigit(format string, i int) string {
	for j := 0; j+1 < len(format); j++ {
		if format[j] == '%' && format[j+1] == 'd' {
			return format[:j] + string(rune('0'+i)) + format[j+2:]
		}
	}
	panic("processor: no %d in " + format)
}
