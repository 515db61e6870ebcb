package pause

import "github.com/rdmawatch/rdmawatch/schemas"

// Counter ids the reading reads, resolved once: a lookup per sample is then
// a popcount on the decoded sample's index (schemas.PortSample.CounterByID)
// instead of a scan of string compares over every counter.
var (
	idPortRcvData  = schemas.MustCounterID(schemas.SourceCounters, "port_rcv_data")
	idStormWarning = schemas.MustCounterID(schemas.SourceEthtool, "tx_pause_storm_warning_events")
	idStormError   = schemas.MustCounterID(schemas.SourceEthtool, "tx_pause_storm_error_events")

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

	// The congestion counters a storm's evidence carries (cnp_ecn_imbalance
	// judges them).
	idECNMarked  = schemas.MustCounterID(schemas.SourceHWCounters, "np_ecn_marked_roce_packets")
	idCNPSent    = schemas.MustCounterID(schemas.SourceHWCounters, "np_cnp_sent")
	idCNPHandled = schemas.MustCounterID(schemas.SourceHWCounters, "rp_cnp_handled")
)

// globalPauseIDs resolves one global pause counter under its mlx5 and
// mlx4_en names.
func globalPauseIDs(mlx5, mlx4 string) [2]schemas.CounterID {
	return [2]schemas.CounterID{schemas.MustCounterID(schemas.SourceEthtool, mlx5), schemas.MustCounterID(schemas.SourceEthtool, mlx4)}
}

// counterIDs resolves a counter per priority, 0 to 7.
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
	panic("pause: no %d in " + format)
}
