package cnp

import "github.com/rdmawatch/rdmawatch/schemas"

// Counter ids the detector reads, resolved once: a lookup per sample is then
// a popcount on the decoded sample's index (schemas.PortSample.CounterByID)
// instead of a scan of string compares over every counter.
var (
	idPortXmitWait = schemas.MustCounterID(schemas.SourceCounters, "port_xmit_wait")

	// The congestion counters, in counterNames order.
	idCNP = func() (ids [counters]schemas.CounterID) {
		for i, n := range counterNames {
			ids[i] = schemas.MustCounterID(schemas.SourceHWCounters, n)
		}
		return ids
	}()
)
