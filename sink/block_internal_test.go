package sink

import (
	"reflect"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestSampleBlockMatchesValues: the column-by-column block holds, column
// for column and row for row, what the row-by-row path (Values, used to
// find a refused row) would send.
func TestSampleBlockMatchesValues(t *testing.T) {
	b := &schemas.CounterBatch{Node: "gpu-001", BootID: "b", Seq: 3, TimeMs: 1767225600500, Ports: []schemas.PortSample{
		{Device: "mlx5_0", Port: 1, LinkLayer: "Ethernet", Rate: "100 Gb/sec (4X EDR)", TimeMs: 1767225600123, IntervalMs: 1000,
			Counters: []schemas.CounterDelta{
				{Source: schemas.SourceCounters, Name: "port_rcv_data", Delta: 4000},
				{Source: schemas.SourceEthtool, Name: "rx_prio3_pause", Delta: 7},
				{Source: schemas.SourceCounters, Name: "symbol_error", Value: 65535, Flags: schemas.FlagSaturated},
				{Source: schemas.SourceEthtool, Name: "not_in_the_dictionary", Delta: 1, Value: 2},
			}, Gauges: map[string]uint64{"lifespan": 10}},
		{Device: "mlx5_1", Port: 1, LinkLayer: "InfiniBand", TimeMs: 1767225600124},
	}}
	rows := SampleRows(b)
	ptrs := []*SampleRow{&rows[0], &rows[1]}
	if len(sampleBlock) != len(SampleColumns) {
		t.Fatalf("%d column builders for %d columns", len(sampleBlock), len(SampleColumns))
	}
	for i, build := range sampleBlock {
		colv := reflect.ValueOf(build(ptrs))
		if colv.Len() != len(rows) {
			t.Fatalf("column %s: %d values for %d rows", SampleColumns[i], colv.Len(), len(rows))
		}
		for r := range rows {
			want := rows[r].Values()[i]
			if got := colv.Index(r).Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("column %s row %d: block %#v, Values %#v", SampleColumns[i], r, got, want)
			}
		}
	}
}

// TestEveryCounterKept: each counter of a sample can be read back from its
// row, by name, with its delta, and with its raw value and flags where it
// had flags; only a zero unflagged delta is left out (it reads 0 alike).
func TestEveryCounterKept(t *testing.T) {
	var counters []schemas.CounterDelta
	for id := range schemas.CounterIDs {
		cid := schemas.CounterID(id)
		flags := schemas.Flag(0)
		if id%7 == 0 {
			flags = schemas.FlagWrapped
		}
		counters = append(counters, schemas.CounterDelta{Source: cid.Source(), Name: cid.Name(), Delta: uint64(id % 3 * 10), Value: uint64(id), Flags: flags})
	}
	counters = append(counters, schemas.CounterDelta{Source: schemas.SourceHWCounters, Name: "new_counter", Delta: 0, Value: 5})
	b := &schemas.CounterBatch{Node: "n", Ports: []schemas.PortSample{{Device: "d", Port: 1, TimeMs: 1, IntervalMs: 1000, Counters: counters}}}
	r := SampleRows(b)[0]
	type key struct {
		src  schemas.Source
		name string
	}
	delta := map[key]uint64{}
	value := map[key]uint64{}
	flags := map[key]uint8{}
	for i, c := range namedCounters {
		delta[key{c.source, c.name}] += r.Named[i]
	}
	for i, id := range r.ExtraID {
		cid := schemas.CounterID(id)
		delta[key{cid.Source(), cid.Name()}] += r.ExtraDelta[i]
	}
	for i, id := range r.FlaggedID {
		cid := schemas.CounterID(id)
		k := key{cid.Source(), cid.Name()}
		value[k], flags[k] = r.FlaggedValue[i], r.FlaggedFlags[i]
	}
	for i, n := range r.UnknownName {
		k := key{schemas.Source(r.UnknownSource[i]), n}
		delta[k], value[k], flags[k] = r.UnknownDelta[i], r.UnknownValue[i], r.UnknownFlags[i]
	}
	for _, c := range counters {
		k := key{c.Source, c.Name}
		if delta[k] != c.Delta {
			t.Errorf("%s/%s: delta %d read back as %d", c.Source, c.Name, c.Delta, delta[k])
		}
		_, unknown := schemas.LookupCounterID(c.Source, c.Name)
		if (c.Flags != 0 || !unknown) && (value[k] != c.Value || flags[k] != uint8(c.Flags)) && c.Flags != 0 {
			t.Errorf("%s/%s: value %d flags %d read back as %d, %d", c.Source, c.Name, c.Value, c.Flags, value[k], flags[k])
		}
	}
	if value[key{schemas.SourceHWCounters, "new_counter"}] != 5 {
		t.Error("an unknown counter's raw value is lost")
	}
}
