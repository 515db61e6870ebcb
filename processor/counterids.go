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

	idLinkDownEventsPhy  = schemas.MustCounterID(schemas.SourceEthtool, "link_down_events_phy")
	idRxBitsPhy          = schemas.MustCounterID(schemas.SourceEthtool, "rx_bits_phy")
	idRxCorrectedBitsPhy = schemas.MustCounterID(schemas.SourceEthtool, "rx_corrected_bits_phy")
	idRxPCSSymbolErrPhy  = schemas.MustCounterID(schemas.SourceEthtool, "rx_pcs_symbol_err_phy")
	idRxErrLanePhy       = counterIDs(schemas.SourceEthtool, "rx_err_lane_%d_phy")
	idStormWarning       = schemas.MustCounterID(schemas.SourceEthtool, "tx_pause_storm_warning_events")
	idStormError         = schemas.MustCounterID(schemas.SourceEthtool, "tx_pause_storm_error_events")

	// PFC per priority.
	idTxPause         = counterIDs(schemas.SourceEthtool, "tx_prio%d_pause")
	idRxPause         = counterIDs(schemas.SourceEthtool, "rx_prio%d_pause")
	idTxPauseDuration = counterIDs(schemas.SourceEthtool, "tx_prio%d_pause_duration")
	idRxPauseDuration = counterIDs(schemas.SourceEthtool, "rx_prio%d_pause_duration")

	// The congestion counters, in cnpNames order.
	idCNP = func() (ids [cnpCounters]schemas.CounterID) {
		for i, n := range cnpNames {
			ids[i] = schemas.MustCounterID(schemas.SourceHWCounters, n)
		}
		return ids
	}()

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
			out[i] = saturatingCounter{id: schemas.MustCounterID(schemas.SourceCounters, n), name: n, max: k.Max()}
		}
		return out
	}()

	// symbolErrorMax is where symbol_error stops counting.
	symbolErrorMax = schemas.KindOf(schemas.SourceCounters, "symbol_error").Max()
)

type saturatingCounter struct {
	id   schemas.CounterID
	name string
	max  uint64
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
