package berdrift

import "github.com/rdmawatch/rdmawatch/schemas"

// Counter ids the detector reads, resolved once: a lookup per sample is then
// a popcount on the decoded sample's index (schemas.PortSample.CounterByID)
// instead of a scan of string compares over every counter.
var (
	idLinkErrorRecovery = schemas.MustCounterID(schemas.SourceCounters, "link_error_recovery")
	idSymbolError       = schemas.MustCounterID(schemas.SourceCounters, "symbol_error")
	idPortRcvData       = schemas.MustCounterID(schemas.SourceCounters, "port_rcv_data")

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

	// symbolErrorMax is where symbol_error stops counting.
	symbolErrorMax = schemas.KindOf(schemas.SourceCounters, "symbol_error").Max()
)

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
	panic("berdrift: no %d in " + format)
}
