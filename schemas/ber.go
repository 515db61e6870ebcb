package schemas

// Critical BER levels of the ber_drift contract (docs/formats.md: the
// labels' critical_at is when a link crosses them). The detector, the
// simulator and the postmortem plots all read these.
const (
	// CriticalPreFECBER: Ethernet, rx_corrected_bits_phy over the bits
	// received; past it the FEC is near the end of what it corrects.
	CriticalPreFECBER = 1e-6
	// CriticalSymbolBER: InfiniBand, symbol_error over the bits received.
	CriticalSymbolBER = 1e-12
	// CriticalPostFECBER: the symbol errors FEC left over the bits
	// received, where uncorrectable blocks start to cost packets.
	CriticalPostFECBER = 1e-12
)
