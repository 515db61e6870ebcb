package countersaturated

import (
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Counter ids the detector reads, resolved once: a lookup per sample is then
// a popcount on the decoded sample's index (schemas.PortSample.CounterByID)
// instead of a scan of string compares over every counter.
var (
	idPortXmitWait = schemas.MustCounterID(schemas.SourceCounters, "port_xmit_wait")

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
				panic("countersaturated: " + n + " is not a saturating counter")
			}
			out[i] = saturatingCounter{id: schemas.MustCounterID(schemas.SourceCounters, n), name: n, max: k.Max(), kind: k}
		}
		return out
	}()

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
				panic("countersaturated: " + n + " is not a pinnable 64/32-bit counter")
			}
			out[i] = saturatingCounter{id: schemas.MustCounterID(schemas.SourceCounters, n), name: n, max: 1<<32 - 1, kind: k}
		}
		return out
	}()
)

type saturatingCounter struct {
	id   schemas.CounterID
	name string
	max  uint64
	kind schemas.Kind
}

func millis(d time.Duration) schemas.Millis { return schemas.Millis(d / time.Millisecond) }
