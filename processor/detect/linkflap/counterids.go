package linkflap

import "github.com/rdmawatch/rdmawatch/schemas"

// Counter ids the detector reads, resolved once: a lookup per sample is then
// a popcount on the decoded sample's index (schemas.PortSample.CounterByID)
// instead of a scan of string compares over every counter.
var (
	idLinkDowned        = schemas.MustCounterID(schemas.SourceCounters, "link_downed")
	idLinkDownEventsPhy = schemas.MustCounterID(schemas.SourceEthtool, "link_down_events_phy")
)
