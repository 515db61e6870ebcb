package sink

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Rows are plain structs converted from the wire types without touching
// ClickHouse, so the conversion is unit tested and benchmarked on its own.
// Each row type lists its columns (the INSERT's explicit column list: 18.16
// rejects the column-less form) and returns its values in the same order.

// prioCount is the number of IEEE 802.1Qbb priorities a port pauses per.
const prioCount = 8

// sampleColumn is a named delta column of port_samples and the counter it
// takes its delta from.
type sampleColumn struct {
	column string
	source schemas.Source
	name   string
}

// namedCounters are the counters people query, as columns of their own
// (and the rollups sum).
// port_*_data deltas are bytes already (the delta engine multiplied the
// 4-byte words), hence the names.
var namedCounters = [...]sampleColumn{
	{"xmit_bytes", schemas.SourceCounters, "port_xmit_data"},
	{"rcv_bytes", schemas.SourceCounters, "port_rcv_data"},
	{"xmit_packets", schemas.SourceCounters, "port_xmit_packets"},
	{"rcv_packets", schemas.SourceCounters, "port_rcv_packets"},
	{"symbol_error", schemas.SourceCounters, "symbol_error"},
	{"link_error_recovery", schemas.SourceCounters, "link_error_recovery"},
	{"link_downed", schemas.SourceCounters, "link_downed"},
	{"port_rcv_errors", schemas.SourceCounters, "port_rcv_errors"},
	{"port_xmit_discards", schemas.SourceCounters, "port_xmit_discards"},
	{"port_xmit_wait", schemas.SourceCounters, "port_xmit_wait"},
	{"local_link_integrity_errors", schemas.SourceCounters, "local_link_integrity_errors"},
	{"excessive_buffer_overrun_errors", schemas.SourceCounters, "excessive_buffer_overrun_errors"},
	{"np_ecn_marked_roce_packets", schemas.SourceHWCounters, "np_ecn_marked_roce_packets"},
	{"np_cnp_sent", schemas.SourceHWCounters, "np_cnp_sent"},
	{"rp_cnp_handled", schemas.SourceHWCounters, "rp_cnp_handled"},
	{"rp_cnp_ignored", schemas.SourceHWCounters, "rp_cnp_ignored"},
	{"out_of_buffer", schemas.SourceHWCounters, "out_of_buffer"},
	{"out_of_sequence", schemas.SourceHWCounters, "out_of_sequence"},
	{"packet_seq_err", schemas.SourceHWCounters, "packet_seq_err"},
	{"local_ack_timeout_err", schemas.SourceHWCounters, "local_ack_timeout_err"},
	{"rx_bits_phy", schemas.SourceEthtool, "rx_bits_phy"},
	{"rx_corrected_bits_phy", schemas.SourceEthtool, "rx_corrected_bits_phy"},
	{"rx_pcs_symbol_err_phy", schemas.SourceEthtool, "rx_pcs_symbol_err_phy"},
	{"link_down_events_phy", schemas.SourceEthtool, "link_down_events_phy"},
	{"tx_pause_storm_warning_events", schemas.SourceEthtool, "tx_pause_storm_warning_events"},
	{"tx_pause_storm_error_events", schemas.SourceEthtool, "tx_pause_storm_error_events"},
}

// counterKey names a counter the wire's dictionary may not know.
type counterKey struct {
	source schemas.Source
	name   string
}

// namedSlot maps a dictionary counter to its slot in SampleRow.Named, -1
// for counters without a named column; pauseKind maps the per-priority
// and global pause counters to their sum column (0 rx frames, 1 tx frames, 2 rx
// duration, 3 tx duration; -1 for the others).
var namedSlot, pauseKind = func() (slots, kinds [schemas.CounterIDs]int8) {
	for i := range slots {
		slots[i], kinds[i] = -1, -1
	}
	for i, c := range namedCounters {
		slots[schemas.MustCounterID(c.source, c.name)] = int8(i)
	}
	for p := 0; p < prioCount; p++ {
		for k, f := range []string{"rx_prio%d_pause", "tx_prio%d_pause", "rx_prio%d_pause_duration", "tx_prio%d_pause_duration"} {
			kinds[schemas.MustCounterID(schemas.SourceEthtool, fmt.Sprintf(f, p))] = int8(k)
		}
	}
	// IEEE 802.3x global pause (mlx5 names, then mlx4_en's): a pause of
	// every priority, summed with them (a port counts one or the other), so
	// a fabric on link-level flow control has pause figures too.
	for _, names := range [][4]string{
		{"rx_global_pause", "tx_global_pause", "rx_global_pause_duration", "tx_global_pause_duration"},
		{"rx_pause", "tx_pause", "rx_pause_duration", "tx_pause_duration"},
	} {
		for k, n := range names {
			kinds[schemas.MustCounterID(schemas.SourceEthtool, n)] = int8(k)
		}
	}
	return slots, kinds
}()

// SampleRow is one row of port_samples: one port of one batch, in the
// layout of migration 0011 (schemas/ddl/migrations/0011_port_samples_compact.sql):
// the named delta columns, and in arrays by dictionary id only what they do
// not hold. Nothing the sample carried is dropped: a counter is a named
// column, a non-zero extra delta (a zero one reads as 0 alike), a flagged
// counter with its raw value, or an unknown counter by name.
type SampleRow struct {
	TimeMs      int64
	Node        string
	Device      string
	Port        uint16
	Netdev      string
	LinkLayer   string
	State       string
	Rate        string
	IntervalMs  int64
	BootID      string
	Seq         uint64
	BatchTimeMs int64
	First       bool // baseline: no deltas yet
	Reset       bool // some counter fell back and counts from zero
	Wrapped     bool // some 32-bit counter wrapped
	Held        bool // some counter read as a glitch and was held
	Saturated   []string
	// Named holds the deltas of namedCounters, in that order.
	Named [len(namedCounters)]uint64
	// Pause frames and pause durations (microseconds), summed over the
	// priorities; each priority's own delta is in Extra.
	RxPause, TxPause, RxPauseDurationUs, TxPauseDurationUs uint64
	// ExtraID and ExtraDelta: the non-zero deltas of the dictionary's
	// counters without a named column.
	ExtraID    []uint16
	ExtraDelta []uint64
	// Flagged*: every dictionary counter with flags, and its raw value.
	FlaggedID    []uint16
	FlaggedFlags []uint8
	FlaggedValue []uint64
	// Unknown*: every counter the dictionary does not know, by name.
	UnknownSource []uint8
	UnknownName   []string
	UnknownDelta  []uint64
	UnknownValue  []uint64
	UnknownFlags  []uint8
	GaugeName     []string
	GaugeValue    []uint64
	// Derived is what people query, computed from the counters once
	// (schemas.PortFigures).
	Derived schemas.Figures
}

// Delta returns the named column's delta (e.g. "xmit_bytes").
func (r *SampleRow) Delta(column string) (uint64, bool) {
	for i, c := range namedCounters {
		if c.column == column {
			return r.Named[i], true
		}
	}
	return 0, false
}

// SampleRows converts a counter batch into port_samples rows, one per port.
// The rows' arrays share a few allocations per batch: growing each row's
// arrays by append was the sink's largest allocation after the driver's
// columns while it drained a backlog (0.41 of 2.0 GB allocated for 276 474
// rows).
func SampleRows(b *schemas.CounterBatch) []SampleRow {
	rows := make([]SampleRow, len(b.Ports))
	counters, gaugeN := 0, 0
	for i := range b.Ports {
		counters += len(b.Ports[i].Counters)
		gaugeN += len(b.Ports[i].Gauges)
	}
	// A port's extra counters are at most its counters; flagged and
	// unknown ones are rare and grow on their own.
	extraIDs := make([]uint16, counters)
	extraDeltas := make([]uint64, counters)
	gaugeNames := make([]string, gaugeN)
	gaugeValues := make([]uint64, gaugeN)
	// ids is reused from port to port, on the stack while a port has at
	// most 256 counters.
	var idBuf [256]schemas.CounterID
	ids := idBuf[:0]
	for i := range b.Ports {
		p := &b.Ports[i]
		r := &rows[i]
		n, g := len(p.Counters), len(p.Gauges)
		*r = SampleRow{
			TimeMs:      p.TimeMs,
			Node:        b.Node,
			Device:      p.Device,
			Port:        clampU16(p.Port),
			Netdev:      p.Netdev,
			LinkLayer:   p.LinkLayer,
			State:       p.State,
			Rate:        p.Rate,
			IntervalMs:  p.IntervalMs,
			BootID:      b.BootID,
			Seq:         b.Seq,
			BatchTimeMs: b.TimeMs,
			First:       p.IntervalMs == 0,
			Saturated:   []string{},
			ExtraID:     extraIDs[:0:n],
			ExtraDelta:  extraDeltas[:0:n],
		}
		extraIDs, extraDeltas = extraIDs[n:], extraDeltas[n:]
		var indexed bool
		ids, indexed = p.IndexedIDs(ids[:0])
		for j, c := range p.Counters {
			if indexed && j < len(ids) {
				r.addKnown(c, c.Name, ids[j])
			} else {
				r.addCounter(c)
			}
		}
		if len(r.ExtraID) == 0 {
			r.ExtraID, r.ExtraDelta = nil, nil // as a row built without the slab
		}
		r.GaugeName, r.GaugeValue = gauges(p.Gauges, gaugeNames[:0:g], gaugeValues[:g:g])
		gaugeNames, gaugeValues = gaugeNames[g:], gaugeValues[g:]
		r.Derived = schemas.PortFigures(p)
	}
	return rows
}

// addCounter files one counter by its name: a sample built in memory, or a
// counter the wire dictionary does not know.
func (r *SampleRow) addCounter(c schemas.CounterDelta) {
	name := schemas.TrimStatName(c.Name)
	id, known := schemas.LookupCounterID(c.Source, name)
	if !known {
		r.flags(c, name)
		r.UnknownSource = append(r.UnknownSource, uint8(c.Source))
		r.UnknownName = append(r.UnknownName, name)
		r.UnknownDelta = append(r.UnknownDelta, c.Delta)
		r.UnknownValue = append(r.UnknownValue, c.Value)
		r.UnknownFlags = append(r.UnknownFlags, uint8(c.Flags))
		return
	}
	r.addKnown(c, name, id)
}

// flags notes a counter's flags on the row.
func (r *SampleRow) flags(c schemas.CounterDelta, name string) {
	r.Reset = r.Reset || c.Flags&schemas.FlagReset != 0
	r.Wrapped = r.Wrapped || c.Flags&schemas.FlagWrapped != 0
	r.Held = r.Held || c.Flags&schemas.FlagHeld != 0
	if c.Flags&schemas.FlagSaturated != 0 {
		r.Saturated = append(r.Saturated, name)
	}
}

// addKnown files a counter of the dictionary (id) where the layout keeps it.
func (r *SampleRow) addKnown(c schemas.CounterDelta, name string, id schemas.CounterID) {
	r.flags(c, name)
	if c.Flags != 0 {
		r.FlaggedID = append(r.FlaggedID, uint16(id))
		r.FlaggedFlags = append(r.FlaggedFlags, uint8(c.Flags))
		r.FlaggedValue = append(r.FlaggedValue, c.Value)
	}
	if slot := namedSlot[id]; slot >= 0 {
		r.Named[slot] += c.Delta
		return
	}
	switch pauseKind[id] {
	case 0:
		r.RxPause += c.Delta
	case 1:
		r.TxPause += c.Delta
	case 2:
		r.RxPauseDurationUs += c.Delta
	case 3:
		r.TxPauseDurationUs += c.Delta
	}
	if c.Delta != 0 {
		r.ExtraID = append(r.ExtraID, uint16(id))
		r.ExtraDelta = append(r.ExtraDelta, c.Delta)
	}
}

// gauges lists m's gauges by name into names (empty, of room for all)
// and values (as long as m).
func gauges(m map[string]uint64, names []string, values []uint64) ([]string, []uint64) {
	for n := range m {
		names = append(names, n)
	}
	// Sorted so the same sample always gives the same row.
	slices.Sort(names)
	for i, n := range names {
		values[i] = m[n]
	}
	return names, values
}

// SampleColumns is the port_samples column list, in Values order.
var SampleColumns = func() []string {
	cols := []string{"ts", "time_ms", "node", "device", "port", "netdev", "link_layer", "state", "rate",
		"interval_ms", "boot_id", "seq", "batch_time_ms", "first", "reset", "wrapped", "held", "saturated"}
	for _, c := range namedCounters {
		cols = append(cols, c.column)
	}
	return append(cols, "rx_pause", "tx_pause", "rx_pause_duration_us", "tx_pause_duration_us",
		"extra_id", "extra_delta", "flagged_id", "flagged_flags", "flagged_value",
		"unknown_source", "unknown_name", "unknown_delta", "unknown_value", "unknown_flags",
		"gauge_name", "gauge_value",
		"rate_gbps", "rcv_gbps", "xmit_gbps", "utilisation", "tx_pause_fraction", "rx_pause_fraction",
		"pre_fec_ber", "post_fec_ber", "symbol_ber")
}()

// Values returns the row in SampleColumns order, typed as the columns are.
func (r *SampleRow) Values() []any {
	v := make([]any, 0, len(SampleColumns))
	v = append(v, dateTime(r.TimeMs), r.TimeMs, r.Node, r.Device, r.Port, r.Netdev, r.LinkLayer, r.State, r.Rate,
		r.IntervalMs, r.BootID, r.Seq, r.BatchTimeMs, u8(r.First), u8(r.Reset), u8(r.Wrapped), u8(r.Held), r.Saturated)
	for _, d := range r.Named {
		v = append(v, d)
	}
	d := &r.Derived
	return append(v, r.RxPause, r.TxPause, r.RxPauseDurationUs, r.TxPauseDurationUs,
		nonNil(r.ExtraID), nonNil(r.ExtraDelta), nonNil(r.FlaggedID), nonNil(r.FlaggedFlags), nonNil(r.FlaggedValue),
		nonNil(r.UnknownSource), nonNil(r.UnknownName), nonNil(r.UnknownDelta), nonNil(r.UnknownValue), nonNil(r.UnknownFlags),
		r.GaugeName, r.GaugeValue,
		d.RateGbps, d.RcvGbps, d.XmitGbps, d.Utilisation, d.TxPauseFraction, d.RxPauseFraction,
		d.PreFECBER, d.PostFECBER, d.SymbolBER)
}

// nonNil gives the driver an empty array rather than a nil slice.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// EventRow is one row of events: one state change of one incident.
type EventRow struct {
	ID, Type, State, Severity, Scope string
	Revision                         uint32
	SubjectNode, SubjectDevice       string
	SubjectPort                      uint16
	StartMs, DetectedAtMs            int64
	EndMs                            *int64 // nil while open
	Layer, Summary                   string
	Evidence                         string // JSON object
	NextChecks                       []string
	HasOrigin                        bool
	OriginNode, OriginDevice         string
	OriginPort                       uint16
	OriginSilent                     bool
	Affected                         string // JSON array, docs/formats.md's form
	AffectedNode, AffectedDevice     []string
	AffectedPort                     []uint16
	AffectedFirstSeenMs              []int64
	AffectedHops                     []uint8
	AffectedPauseFraction            []float64
	CauseID, CauseType               string // "" without a cause
	CauseNode, CauseDevice           string
	CausePort                        uint16
}

// EventColumns is the events column list, in Values order.
var EventColumns = []string{"id", "type", "state", "severity", "scope", "revision",
	"subject_node", "subject_device", "subject_port",
	"start_ms", "detected_at_ms", "end_ms", "start_ts", "detected_at_ts", "end_ts",
	"layer", "summary", "evidence", "next_checks",
	"has_origin", "origin_node", "origin_device", "origin_port", "origin_silent",
	"affected", "affected_node", "affected_device", "affected_port", "affected_first_seen_ms", "affected_hops", "affected_pause_fraction",
	"cause_id", "cause_type", "cause_node", "cause_device", "cause_port"}

// NewEventRow converts an event. Evidence and affected are kept as JSON
// (what a person reads) and affected also as parallel arrays (what a query
// filters on).
func NewEventRow(e *schemas.Event) (EventRow, error) {
	r := EventRow{
		ID: e.ID, Type: e.Type, State: e.State, Severity: e.Severity, Scope: e.Scope,
		Revision:      uint32(max(e.Revision, 0)),
		SubjectNode:   e.Subject.Node,
		SubjectDevice: e.Subject.Device,
		SubjectPort:   clampU16(e.Subject.Port),
		StartMs:       int64(e.Start),
		DetectedAtMs:  int64(e.DetectedAt),
		Layer:         e.Layer,
		Summary:       e.Summary,
		NextChecks:    e.NextChecks,
	}
	if r.NextChecks == nil {
		r.NextChecks = []string{}
	}
	if e.End != nil {
		end := int64(*e.End)
		r.EndMs = &end
	}
	ev := e.Evidence
	if ev == nil {
		ev = map[string]any{}
	}
	evidence, err := json.Marshal(finite(ev))
	if err != nil {
		return EventRow{}, fmt.Errorf("event %q revision %d: evidence as JSON: %w", e.ID, e.Revision, err)
	}
	r.Evidence = string(evidence)
	if o := e.Origin; o != nil {
		r.HasOrigin = true
		r.OriginNode, r.OriginDevice, r.OriginPort, r.OriginSilent = o.Node, o.Device, clampU16(o.Port), o.Silent
	}
	if c := e.Cause; c != nil {
		r.CauseID, r.CauseType = c.ID, c.Type
		r.CauseNode, r.CauseDevice, r.CausePort = c.Subject.Node, c.Subject.Device, clampU16(c.Subject.Port)
	}
	n := len(e.Affected)
	r.AffectedNode = make([]string, n)
	r.AffectedDevice = make([]string, n)
	r.AffectedPort = make([]uint16, n)
	r.AffectedFirstSeenMs = make([]int64, n)
	r.AffectedHops = make([]uint8, n)
	r.AffectedPauseFraction = make([]float64, n)
	affected := make([]map[string]any, n)
	for i, a := range e.Affected {
		r.AffectedNode[i] = a.Node
		r.AffectedDevice[i] = a.Device
		r.AffectedPort[i] = clampU16(a.Port)
		r.AffectedFirstSeenMs[i] = int64(a.FirstSeen)
		r.AffectedHops[i] = uint8(min(max(a.Hops, 0), math.MaxUint8))
		r.AffectedPauseFraction[i] = a.PauseFraction
		affected[i] = map[string]any{"node": a.Node, "device": a.Device, "port": a.Port,
			"first_seen": a.FirstSeen, "hops": a.Hops, "pause_fraction": finite(a.PauseFraction)}
		// A completion_errors responder's own errors (optional fields:
		// written as the event's JSON writes them, only when present).
		if a.Counter != "" {
			affected[i]["counter"], affected[i]["rate_per_s"] = a.Counter, finite(a.RatePerS)
		}
	}
	aj, err := json.Marshal(affected)
	if err != nil {
		return EventRow{}, fmt.Errorf("event %q revision %d: affected as JSON: %w", e.ID, e.Revision, err)
	}
	r.Affected = string(aj)
	return r, nil
}

// Values returns the row in EventColumns order.
func (r *EventRow) Values() []any {
	var endTs *time.Time
	if r.EndMs != nil {
		t := dateTime(*r.EndMs)
		endTs = &t
	}
	return []any{r.ID, r.Type, r.State, r.Severity, r.Scope, r.Revision,
		r.SubjectNode, r.SubjectDevice, r.SubjectPort,
		r.StartMs, r.DetectedAtMs, r.EndMs, dateTime(r.StartMs), dateTime(r.DetectedAtMs), endTs,
		r.Layer, r.Summary, r.Evidence, r.NextChecks,
		u8(r.HasOrigin), r.OriginNode, r.OriginDevice, r.OriginPort, u8(r.OriginSilent),
		r.Affected, r.AffectedNode, r.AffectedDevice, r.AffectedPort, r.AffectedFirstSeenMs, r.AffectedHops, r.AffectedPauseFraction,
		r.CauseID, r.CauseType, r.CauseNode, r.CauseDevice, r.CausePort}
}

// InventoryRow is one row of inventory: one port as its node last described it.
type InventoryRow struct {
	Node, Device                      string
	Port                              uint16
	Netdev, LinkLayer, State, Rate    string
	FWVersion, BoardID, HCAType, GUID string
	BootID                            string
	LastSeenMs                        int64
}

// InventoryColumns is the inventory column list, in Values order.
var InventoryColumns = []string{"node", "device", "port", "netdev", "link_layer", "state", "rate",
	"fw_ver", "board_id", "hca_type", "node_guid", "boot_id", "last_seen", "last_seen_ms"}

// InventoryRows converts a node's inventory, one row per port.
func InventoryRows(inv *schemas.Inventory) []InventoryRow {
	rows := make([]InventoryRow, len(inv.Ports))
	for i, p := range inv.Ports {
		rows[i] = InventoryRow{
			Node: inv.Node, Device: p.Device, Port: clampU16(p.Port),
			Netdev: p.Netdev, LinkLayer: p.LinkLayer, State: p.State, Rate: p.Rate,
			FWVersion: p.FWVersion, BoardID: p.BoardID, HCAType: p.HCAType, GUID: p.NodeGUID,
			BootID: inv.BootID, LastSeenMs: inv.TimeMs,
		}
	}
	return rows
}

// Values returns the row in InventoryColumns order.
func (r *InventoryRow) Values() []any {
	return []any{r.Node, r.Device, r.Port, r.Netdev, r.LinkLayer, r.State, r.Rate,
		r.FWVersion, r.BoardID, r.HCAType, r.GUID, r.BootID, dateTime(r.LastSeenMs), r.LastSeenMs}
}

// dateTime turns unix ms into the second-resolution DateTime, clamped to the
// type's range (1970 to 2106) so an absurd data time cannot make ClickHouse
// reject, and the sink retry forever, a whole batch.
func dateTime(ms int64) time.Time {
	s := ms / 1000
	if ms < 0 {
		s = 0
	}
	if s > math.MaxUint32 {
		s = math.MaxUint32
	}
	return time.Unix(s, 0).UTC()
}

func clampU16(v int) uint16 { return uint16(min(max(v, 0), math.MaxUint16)) }

func u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// finite replaces NaN and infinities, which JSON cannot carry, by null, so
// one odd figure does not cost the whole event its evidence.
func finite(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = finite(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = finite(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = finite(e)
		}
		return out
	}
	return v
}
