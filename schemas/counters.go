package schemas

import "strings"

// Kind is a counter's hardware semantics.
type Kind uint8

const (
	// Counter64 never wraps in practice (64-bit extended port counters,
	// ethtool statistics).
	Counter64 Kind = iota
	// Wrap32 is a 32-bit counter that wraps to zero (mlx5 q-counters and
	// congestion counters in hw_counters).
	Wrap32
	// Sat16, Sat8 and Sat4 are InfiniBand PortCounters error counters that stop
	// at their maximum until cleared.
	Sat16
	Sat8
	Sat4
	// Gauge is a reading that is not a counter (hw_counters/lifespan).
	Gauge
)

// Max is the largest value a counter of this kind can show.
func (k Kind) Max() uint64 {
	switch k {
	case Wrap32:
		return 1<<32 - 1
	case Sat16:
		return 1<<16 - 1
	case Sat8:
		return 1<<8 - 1
	case Sat4:
		return 1<<4 - 1
	}
	return 1<<64 - 1
}

// Saturating reports whether the counter sticks at Max.
func (k Kind) Saturating() bool { return k == Sat16 || k == Sat8 || k == Sat4 }

func (k Kind) String() string {
	return [...]string{"counter64", "wrap32", "sat16", "sat8", "sat4", "gauge"}[k]
}

// Widths of the IB PortCounters attribute, as the kernel exposes them in
// ports/<p>/counters (IBA 1.3 vol 1, 16.1.3.5).
var portCounterKinds = map[string]Kind{
	"symbol_error":                    Sat16,
	"port_rcv_errors":                 Sat16,
	"port_rcv_remote_physical_errors": Sat16,
	"port_rcv_switch_relay_errors":    Sat16,
	"port_xmit_discards":              Sat16,
	"VL15_dropped":                    Sat16,
	"link_downed":                     Sat8,
	"link_error_recovery":             Sat8,
	"port_xmit_constraint_errors":     Sat8,
	"port_rcv_constraint_errors":      Sat8,
	"local_link_integrity_errors":     Sat4,
	"excessive_buffer_overrun_errors": Sat4,
}

// hwGauges are the hw_counters entries that are settings, not counters.
var hwGauges = map[string]bool{
	"lifespan": true,
}

// KindOf returns the semantics of a counter read from src.
func KindOf(src Source, name string) Kind {
	switch src {
	case SourceCounters:
		if k, ok := portCounterKinds[name]; ok {
			return k
		}
		return Counter64
	case SourceHWCounters:
		if hwGauges[name] {
			return Gauge
		}
		return Wrap32
	}
	return Counter64
}

// WordsToBytes reports whether a counter counts 4-byte words
// (port_xmit_data, port_rcv_data): the delta engine multiplies its deltas by 4.
func WordsToBytes(src Source, name string) bool {
	return src == SourceCounters && (name == "port_xmit_data" || name == "port_rcv_data")
}

// TrimStatName normalises an ethtool statistic name: older mlx5 kernels wrote
// "tx_pause_storm_warning_events " with a trailing space.
func TrimStatName(name string) string { return strings.TrimSpace(name) }
