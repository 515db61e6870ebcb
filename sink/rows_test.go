package sink_test

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

func cd(src schemas.Source, name string, delta, value uint64, flags schemas.Flag) schemas.CounterDelta {
	return schemas.CounterDelta{Name: name, Source: src, Delta: delta, Value: value, Flags: flags}
}

// testBatch is a RoCE port mid-storm and an InfiniBand port at baseline.
func testBatch() *schemas.CounterBatch {
	return &schemas.CounterBatch{
		Version: schemas.Version, Node: "gpu-017", BootID: "boot-a", Seq: 42, TimeMs: 1767225600500,
		Ports: []schemas.PortSample{
			{
				Device: "mlx5_0", Port: 1, Netdev: "eth2", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)",
				TimeMs: 1767225600123, IntervalMs: 1000,
				Counters: []schemas.CounterDelta{
					cd(schemas.SourceCounters, "port_rcv_data", 4000, 1000, 0), // bytes already
					cd(schemas.SourceCounters, "port_xmit_data", 8000, 2000, 0),
					cd(schemas.SourceCounters, "port_xmit_packets", 7, 70, 0),
					cd(schemas.SourceCounters, "symbol_error", 0, 65535, schemas.FlagSaturated),
					cd(schemas.SourceCounters, "port_rcv_errors", 3, 3, schemas.FlagReset),
					cd(schemas.SourceHWCounters, "np_cnp_sent", 11, 4294967290, schemas.FlagWrapped),
					cd(schemas.SourceHWCounters, "out_of_sequence", 0, 9, schemas.FlagHeld),
					cd(schemas.SourceEthtool, "rx_prio3_pause", 100, 1000, 0),
					cd(schemas.SourceEthtool, "rx_prio5_pause", 5, 50, 0),
					cd(schemas.SourceEthtool, "tx_prio3_pause", 2, 20, 0),
					cd(schemas.SourceEthtool, "rx_prio3_pause_duration", 900, 9000, 0),
					cd(schemas.SourceEthtool, "tx_prio7_pause_duration", 30, 300, 0),
					cd(schemas.SourceEthtool, "tx_pause_storm_warning_events ", 1, 1, 0), // older mlx5: trailing space
					cd(schemas.SourceEthtool, "rx_vport_unicast_packets", 9, 99, 0),      // not a named column
					cd(schemas.SourceEthtool, "symbol_error", 77, 77, 0),                 // same name, other source: not the named column
				},
				Gauges: map[string]uint64{"lifespan": 10, "a_gauge": 1},
			},
			{
				Device: "mlx5_1", Port: 1, LinkLayer: "InfiniBand", State: "ACTIVE", Rate: "400 Gb/sec (4X NDR)",
				TimeMs: 1767225600200,
				Counters: []schemas.CounterDelta{
					cd(schemas.SourceCounters, "port_rcv_data", 0, 5, schemas.FlagFirst),
				},
			},
		},
	}
}

func TestSampleRows(t *testing.T) {
	rows := sink.SampleRows(testBatch())
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	roce, ib := rows[0], rows[1]
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"node", roce.Node, "gpu-017"},
		{"time", roce.TimeMs, int64(1767225600123)},
		{"batch time", roce.BatchTimeMs, int64(1767225600500)},
		{"seq", roce.Seq, uint64(42)},
		{"boot", roce.BootID, "boot-a"},
		{"roce not first", roce.First, false},
		{"ib first", ib.First, true},
		{"reset", roce.Reset, true},
		{"wrapped", roce.Wrapped, true},
		{"held", roce.Held, true},
		{"ib reset", ib.Reset, false},
		{"saturated", roce.Saturated, []string{"symbol_error"}},
		{"ib saturated empty", ib.Saturated, []string{}},
		{"extra: non-zero deltas without a named column, by id", names(roce.ExtraID),
			[]string{"rx_prio3_pause", "rx_prio5_pause", "tx_prio3_pause", "rx_prio3_pause_duration", "tx_prio7_pause_duration"}},
		{"extra deltas", roce.ExtraDelta, []uint64{100, 5, 2, 900, 30}},
		{"flagged: every counter with flags", names(roce.FlaggedID), []string{"symbol_error", "port_rcv_errors", "np_cnp_sent", "out_of_sequence"}},
		{"flagged flags", roce.FlaggedFlags, []uint8{uint8(schemas.FlagSaturated), uint8(schemas.FlagReset), uint8(schemas.FlagWrapped), uint8(schemas.FlagHeld)}},
		{"flagged raw values", roce.FlaggedValue, []uint64{65535, 3, 4294967290, 9}},
		{"unknown counters by name", roce.UnknownName, []string{"rx_vport_unicast_packets", "symbol_error"}},
		{"unknown sources", roce.UnknownSource, []uint8{uint8(schemas.SourceEthtool), uint8(schemas.SourceEthtool)}},
		{"unknown deltas", roce.UnknownDelta, []uint64{9, 77}},
		{"unknown values", roce.UnknownValue, []uint64{99, 77}},
		{"pause sums", [4]uint64{roce.RxPause, roce.TxPause, roce.RxPauseDurationUs, roce.TxPauseDurationUs}, [4]uint64{105, 2, 900, 30}},
		{"ib baseline flagged with its raw value", names(ib.FlaggedID), []string{"port_rcv_data"}},
		{"ib raw value", ib.FlaggedValue, []uint64{5}},
		{"ib no extra", len(ib.ExtraID), 0},
		{"gauges sorted", roce.GaugeName, []string{"a_gauge", "lifespan"}},
		{"gauge values", roce.GaugeValue, []uint64{1, 10}},
		{"ib gauges empty", len(ib.GaugeName), 0},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	for col, want := range map[string]uint64{
		"rcv_bytes": 4000, "xmit_bytes": 8000, "xmit_packets": 7, "rcv_packets": 0,
		"symbol_error": 0, "port_rcv_errors": 3, "np_cnp_sent": 11, "out_of_sequence": 0,
		"tx_pause_storm_warning_events": 1,
	} {
		if got, ok := roce.Delta(col); !ok || got != want {
			t.Errorf("delta %s = %d (known %v), want %d", col, got, ok, want)
		}
	}
	if _, ok := roce.Delta("no_such_column"); ok {
		t.Error("Delta knows a column that does not exist")
	}
}

func names(ids []uint16) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = schemas.CounterID(id).Name()
	}
	return out
}

func TestValuesMatchColumns(t *testing.T) {
	sr := sink.SampleRows(testBatch())[0]
	er, err := sink.NewEventRow(testEvent())
	if err != nil {
		t.Fatal(err)
	}
	ir := sink.InventoryRows(testInventory())[0]
	for _, tc := range []struct {
		table   string
		columns []string
		values  []any
	}{
		{"port_samples", sink.SampleColumns, sr.Values()},
		{"events", sink.EventColumns, er.Values()},
		{"inventory", sink.InventoryColumns, ir.Values()},
	} {
		if len(tc.columns) != len(tc.values) {
			t.Errorf("%s: %d columns, %d values", tc.table, len(tc.columns), len(tc.values))
		}
		seen := map[string]bool{}
		for _, c := range tc.columns {
			if seen[c] {
				t.Errorf("%s: column %s twice", tc.table, c)
			}
			seen[c] = true
		}
	}
	// Pause sums come right after the named deltas.
	v := sr.Values()
	idx := func(col string) int {
		for i, c := range sink.SampleColumns {
			if c == col {
				return i
			}
		}
		t.Fatalf("no column %s", col)
		return -1
	}
	for col, want := range map[string]uint64{"rx_pause": 105, "tx_pause": 2, "rx_pause_duration_us": 900, "tx_pause_duration_us": 30} {
		if got := v[idx(col)]; got != want {
			t.Errorf("%s = %v, want %d", col, got, want)
		}
	}
}

func ms(v int64) *schemas.Millis { m := schemas.Millis(v); return &m }

func testEvent() *schemas.Event {
	return &schemas.Event{
		Version: schemas.Version, ID: "pfc_storm/gpu-017/mlx5_0/1/1767225600", Type: schemas.TypePFCStorm,
		State: schemas.StateUpdate, Severity: schemas.SeverityCritical, Scope: schemas.ScopePort,
		Subject: schemas.Subject{Node: "gpu-017", Device: "mlx5_0", Port: 1},
		Start:   1767225600000, DetectedAt: 1767225605000, Layer: schemas.LayerLinkNetwork,
		Summary:    "gpu-017 mlx5_0/1 sends PFC pauses that reach 2 ports",
		Evidence:   map[string]any{"pause_fraction": 0.8, "window_s": 10, "nested": map[string]any{"ratio": math.NaN()}},
		NextChecks: []string{"mlnx_qos -i eth2", "ethtool -S eth2 | grep pause"},
		Origin:     &schemas.Origin{Node: "gpu-017", Device: "mlx5_0", Port: 1, Silent: true},
		Cause: &schemas.Cause{ID: "receive_starvation/gpu-017/mlx5_0/1/1767225500", Type: schemas.TypeReceiveStarvation,
			Subject: schemas.Subject{Node: "gpu-017", Device: "mlx5_0", Port: 1}},
		Affected: []schemas.Affected{
			{Node: "gpu-018", Device: "mlx5_0", Port: 1, FirstSeen: 1767225601000, Hops: 2, PauseFraction: 0.5},
			{Node: "gpu-019", Device: "mlx5_0", Port: 1, FirstSeen: 1767225602000, Hops: 4, PauseFraction: math.Inf(1),
				Counter: "resp_remote_access_errors", RatePerS: 12.5},
		},
		Revision: 3,
	}
}

func TestNewEventRow(t *testing.T) {
	resolved := testEvent()
	resolved.State, resolved.End, resolved.Origin, resolved.Affected, resolved.Evidence, resolved.NextChecks, resolved.Cause =
		schemas.StateResolved, ms(1767225700000), nil, nil, nil, nil, nil
	for _, tc := range []struct {
		name  string
		event *schemas.Event
		check func(t *testing.T, r sink.EventRow)
	}{
		{"open storm", testEvent(), func(t *testing.T, r sink.EventRow) {
			if r.EndMs != nil {
				t.Errorf("end %v, want nil while open", *r.EndMs)
			}
			if r.Revision != 3 || r.SubjectPort != 1 || r.StartMs != 1767225600000 || r.DetectedAtMs != 1767225605000 {
				t.Errorf("row %+v", r)
			}
			if !r.HasOrigin || !r.OriginSilent || r.OriginNode != "gpu-017" {
				t.Errorf("origin %v %v %q", r.HasOrigin, r.OriginSilent, r.OriginNode)
			}
			if r.CauseID != "receive_starvation/gpu-017/mlx5_0/1/1767225500" || r.CauseType != schemas.TypeReceiveStarvation ||
				r.CauseNode != "gpu-017" || r.CauseDevice != "mlx5_0" || r.CausePort != 1 {
				t.Errorf("cause %q %q %q %q %d", r.CauseID, r.CauseType, r.CauseNode, r.CauseDevice, r.CausePort)
			}
			if !reflect.DeepEqual(r.AffectedNode, []string{"gpu-018", "gpu-019"}) || !reflect.DeepEqual(r.AffectedHops, []uint8{2, 4}) ||
				!reflect.DeepEqual(r.AffectedFirstSeenMs, []int64{1767225601000, 1767225602000}) {
				t.Errorf("affected arrays %v %v %v", r.AffectedNode, r.AffectedHops, r.AffectedFirstSeenMs)
			}
			var ev map[string]any
			if err := json.Unmarshal([]byte(r.Evidence), &ev); err != nil {
				t.Fatalf("evidence %q: %v", r.Evidence, err)
			}
			if ev["pause_fraction"] != 0.8 || ev["nested"].(map[string]any)["ratio"] != nil {
				t.Errorf("evidence %s: NaN must become null, figures stay", r.Evidence)
			}
			var aff []map[string]any
			if err := json.Unmarshal([]byte(r.Affected), &aff); err != nil {
				t.Fatalf("affected %q: %v", r.Affected, err)
			}
			if len(aff) != 2 || aff[0]["first_seen"] != "2026-01-01T00:00:01.000Z" || aff[1]["pause_fraction"] != nil {
				t.Errorf("affected JSON %s", r.Affected)
			}
			if _, ok := aff[0]["counter"]; ok || aff[1]["counter"] != "resp_remote_access_errors" || aff[1]["rate_per_s"] != 12.5 {
				t.Errorf("affected JSON %s: a responder's counter and rate only where given", r.Affected)
			}
		}},
		{"resolved port event", resolved, func(t *testing.T, r sink.EventRow) {
			if r.EndMs == nil || *r.EndMs != 1767225700000 {
				t.Errorf("end %v", r.EndMs)
			}
			if r.CauseID != "" || r.CauseType != "" || r.CausePort != 0 {
				t.Errorf("no cause, row has %q %q %d", r.CauseID, r.CauseType, r.CausePort)
			}
			if r.HasOrigin || r.Evidence != "{}" || r.Affected != "[]" || r.NextChecks == nil || len(r.AffectedNode) != 0 {
				t.Errorf("empty parts: origin %v evidence %q affected %q next %v", r.HasOrigin, r.Evidence, r.Affected, r.NextChecks)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := sink.NewEventRow(tc.event)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}

func testInventory() *schemas.Inventory {
	return &schemas.Inventory{
		Version: schemas.Version, Node: "gpu-017", BootID: "boot-a", TimeMs: 1767225600999,
		Ports: []schemas.PortInventory{
			{Device: "mlx5_0", Port: 1, Netdev: "eth2", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)",
				FWVersion: "28.39.1002", BoardID: "MT_0000000838", HCAType: "MT4129", NodeGUID: "946d:ae03:00f1:2a3c"},
			{Device: "mlx5_1", Port: 1, LinkLayer: "InfiniBand", State: "DOWN", Rate: "10 Gb/sec (4X SDR)"},
		},
	}
}

func TestInventoryRows(t *testing.T) {
	rows := sink.InventoryRows(testInventory())
	want := []sink.InventoryRow{
		{Node: "gpu-017", Device: "mlx5_0", Port: 1, Netdev: "eth2", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)",
			FWVersion: "28.39.1002", BoardID: "MT_0000000838", HCAType: "MT4129", GUID: "946d:ae03:00f1:2a3c", BootID: "boot-a", LastSeenMs: 1767225600999},
		{Node: "gpu-017", Device: "mlx5_1", Port: 1, LinkLayer: "InfiniBand", State: "DOWN", Rate: "10 Gb/sec (4X SDR)", BootID: "boot-a", LastSeenMs: 1767225600999},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("rows\n%+v\nwant\n%+v", rows, want)
	}
}

// go test ./sink -run '^$' -bench . -benchmem
func BenchmarkSampleRows(b *testing.B) {
	batch := testBatch()
	b.ReportAllocs()
	for b.Loop() {
		rows := sink.SampleRows(batch)
		for i := range rows {
			_ = rows[i].Values()
		}
	}
}

func BenchmarkNewEventRow(b *testing.B) {
	e := testEvent()
	b.ReportAllocs()
	for b.Loop() {
		r, err := sink.NewEventRow(e)
		if err != nil {
			b.Fatal(err)
		}
		_ = r.Values()
	}
}

// TestDerived: the sink stores schemas.PortFigures (the one definition,
// table-tested in schemas/derived_test.go), the baseline's only the rate.
func TestDerived(t *testing.T) {
	b := testBatch()
	rows := sink.SampleRows(b)
	for i := range rows {
		if want := schemas.PortFigures(&b.Ports[i]); rows[i].Derived != want {
			t.Errorf("port %d: derived %+v, want %+v", i, rows[i].Derived, want)
		}
	}
	if want := (schemas.Figures{RateGbps: 400}); rows[1].Derived != want {
		t.Errorf("baseline derived %+v, want %+v", rows[1].Derived, want)
	}
}

// TestSampleRowsDecodedEqualsInMemory: a batch off the wire (its counters
// filed by the decoder's dictionary ids) gives the rows the same batch built
// in memory (looked up by name) gives, but for the order the decoder puts
// the counters in (dictionary order), which only the per-counter lists
// show; they are compared as sets.
func TestSampleRowsDecodedEqualsInMemory(t *testing.T) {
	b := testBatch()
	data, err := schemas.EncodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	d, err := schemas.DecodeBatch(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, indexed := d.Ports[0].IndexedIDs(nil); !indexed {
		t.Fatal("a decoded sample is not indexed: the test would not reach the id path")
	}
	mem, wire := sink.SampleRows(b), sink.SampleRows(d)
	if len(mem) != len(wire) {
		t.Fatalf("%d rows in memory, %d decoded", len(mem), len(wire))
	}
	for i := range mem {
		m, w := mem[i], wire[i]
		if fmt.Sprint(m.Values()) == fmt.Sprint(w.Values()) {
			continue
		}
		for _, r := range []*sink.SampleRow{&m, &w} {
			sortPairs(r.ExtraID, r.ExtraDelta)
			sortTriples(r.FlaggedID, r.FlaggedFlags, r.FlaggedValue)
			sort.Strings(r.Saturated)
		}
		if got, want := fmt.Sprint(w.Values()), fmt.Sprint(m.Values()); got != want {
			t.Errorf("row %d decoded:\n%s\nin memory:\n%s", i, got, want)
		}
	}
}

func sortPairs(ids []uint16, v []uint64) {
	idx := make([]int, len(ids))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return ids[idx[a]] < ids[idx[b]] })
	ids2, v2 := slices.Clone(ids), slices.Clone(v)
	for i, j := range idx {
		ids[i], v[i] = ids2[j], v2[j]
	}
}

func sortTriples(ids []uint16, f []uint8, v []uint64) {
	idx := make([]int, len(ids))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return ids[idx[a]] < ids[idx[b]] })
	ids2, f2, v2 := slices.Clone(ids), slices.Clone(f), slices.Clone(v)
	for i, j := range idx {
		ids[i], f[i], v[i] = ids2[j], f2[j], v2[j]
	}
}
