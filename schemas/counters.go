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
	// Gauge is a reading that is not a counter (hw_counters/lifespan, a
	// LAG's GaugeLAGMembers).
	Gauge
	// Sat32 is a 32-bit PortCounters counter that stops at 2^32-1
	// (port_xmit_wait).
	Sat32
	// Ext64Sat32 is a data or packet counter the kernel reads from
	// PortCountersExtended (64-bit) where the HCA has them and from
	// PortCounters (32-bit, saturating) where it does not: mlx4 on old
	// kernels pins port_rcv_data at 4294967295. A reading of exactly 2^32-1
	// is taken for the pinned 32-bit counter: a 64-bit one passes that
	// value in one reading out of billions and does not stay there.
	Ext64Sat32
)

// Max is the largest value a counter of this kind can show.
func (k Kind) Max() uint64 {
	switch k {
	case Wrap32, Sat32:
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
func (k Kind) Saturating() bool { return k == Sat16 || k == Sat8 || k == Sat4 || k == Sat32 }

// Pinned reports whether value is a counter of this kind stuck at its
// maximum: a saturating counter at Max, or an Ext64Sat32 counter at 2^32-1.
func (k Kind) Pinned(value uint64) bool {
	switch {
	case k.Saturating():
		return value >= k.Max()
	case k == Ext64Sat32:
		return value == 1<<32-1
	}
	return false
}

func (k Kind) String() string {
	return [...]string{"counter64", "wrap32", "sat16", "sat8", "sat4", "gauge", "sat32", "ext64sat32"}[k]
}

// Widths of the IB PortCounters attribute, as the kernel exposes them in
// ports/<p>/counters (IBA 1.3 vol 1, 16.1.3.5; drivers/infiniband/core/
// sysfs.c, PORT_PMA_ATTR with its width in bits, and PORT_PMA_ATTR_EXT for
// the 64-bit PortCountersExtended ones). A name not listed is 64-bit
// (unicast_*, multicast_*: extended only).
var portCounterKinds = map[string]Kind{
	"port_xmit_wait":                  Sat32,
	"port_xmit_data":                  Ext64Sat32,
	"port_rcv_data":                   Ext64Sat32,
	"port_xmit_packets":               Ext64Sat32,
	"port_rcv_packets":                Ext64Sat32,
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

// GaugeLAGMembers is the number of member links whose ethtool statistics a
// RoCE LAG's sample sums (docs/formats.md, "Bonded RoCE ports"). It is the
// collector's, not a driver statistic: no driver lists it, and the sum it
// qualifies is the collector's too. It travels in the bond sample's ethtool
// map (a trace's bond line writes it there) and reaches the processor as
// PortSample.Gauges[GaugeLAGMembers]. Pause counters are per link, so a
// summed pause duration over n links can reach n times the interval; the
// pause figures divide by it (PortFigures, pfc_storm).
const GaugeLAGMembers = "lag_members"

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
		if hw64(name) {
			return Counter64
		}
		return Wrap32
	case SourceEthtool:
		if name == GaugeLAGMembers {
			return Gauge
		}
	}
	return Counter64
}

// hw64 reports the hw_counters the driver reads 64 bits wide. mlx5
// (drivers/infiniband/hw/mlx5/counters.c): the congestion counters np_* and
// rp_* come from QUERY_CONG_STATISTICS through MLX5_GET64 (real ports read
// above 2^34), the optional cc_* counters from 64-bit flow counters; its
// q-counters (out_of_buffer, out_of_sequence, the *_err and *_error
// counters, roce_*) and rx_icrc_encapsulated are be32 and wrap. mlx4
// (drivers/infiniband/hw/mlx4/main.c) reads every diag counter as be32.
// Ethtool statistics are u64 in every driver (Counter64).
func hw64(name string) bool {
	return strings.HasPrefix(name, "np_") || strings.HasPrefix(name, "rp_") || strings.HasPrefix(name, "cc_")
}

// WordsToBytes reports whether a counter counts 4-byte words
// (port_xmit_data, port_rcv_data): the delta engine multiplies its deltas by 4.
func WordsToBytes(src Source, name string) bool {
	return src == SourceCounters && (name == "port_xmit_data" || name == "port_rcv_data")
}

// TrimStatName normalises an ethtool statistic name: older mlx5 kernels wrote
// "tx_pause_storm_warning_events " with a trailing space.
func TrimStatName(name string) string { return strings.TrimSpace(name) }
