package sink

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// recorded is a driver.BatchColumn that keeps the rows given to it, one
// value per row, the way the driver's column reads them: Append takes a
// slice of rows, AppendRow one row.
type recorded []any

func (r *recorded) Append(v any) error {
	rv := reflect.ValueOf(v)
	for i := range rv.Len() {
		*r = append(*r, rv.Index(i).Interface())
	}
	return nil
}

func (r *recorded) AppendRow(v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.IsNil() {
		// The driver's array column writes a nil slice as the empty array,
		// as Values' non-nil empty one.
		v = reflect.MakeSlice(rv.Type(), 0, 0).Interface()
	}
	*r = append(*r, v)
	return nil
}

// built is what column c hands the driver for rows.
func built(t *testing.T, c column, rows []*SampleRow) []any {
	t.Helper()
	b := c(len(rows))
	for _, r := range rows {
		b.add(r)
	}
	var out recorded
	if err := b.send(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

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
		colv := built(t, build, ptrs)
		if len(colv) != len(rows) {
			t.Fatalf("column %s: %d values for %d rows", SampleColumns[i], len(colv), len(rows))
		}
		for r := range rows {
			want := rows[r].Values()[i]
			if got := colv[r]; !reflect.DeepEqual(got, want) {
				t.Errorf("column %s row %d: block %#v, Values %#v", SampleColumns[i], r, got, want)
			}
		}
	}
}

// chunkBatch is a driver.Batch that records each column's rows and how many
// rows each column held at every Flush; refuseCol's Append fails in the
// chunk after refuseAfter flushes (refuseCol -1: never).
type chunkBatch struct {
	driver.Batch
	cols                   []recorded
	flushes                [][]int
	refuseCol, refuseAfter int
}

func (b *chunkBatch) Column(i int) driver.BatchColumn {
	if i == b.refuseCol && len(b.flushes) == b.refuseAfter {
		return refusing{}
	}
	return &b.cols[i]
}

func (b *chunkBatch) Flush() error {
	held := make([]int, len(b.cols))
	for i := range b.cols {
		held[i] = len(b.cols[i])
	}
	b.flushes = append(b.flushes, held)
	return nil
}

type refusing struct{}

func (refusing) Append(any) error    { return errors.New("refused") }
func (refusing) AppendRow(any) error { return errors.New("refused") }

// manyRows is n rows of distinct ports.
func manyRows(n int) []*SampleRow {
	var rows []*SampleRow
	for i := 0; len(rows) < n; i++ {
		b := &schemas.CounterBatch{Node: fmt.Sprintf("gpu-%04d", i), BootID: "b", Seq: uint64(i), TimeMs: 1767225600000}
		for p := range min(n-len(rows), 100) {
			b.Ports = append(b.Ports, schemas.PortSample{Device: "mlx5_0", Port: p + 1, TimeMs: 1767225600000 + int64(p), IntervalMs: 1000,
				Counters: []schemas.CounterDelta{
					{Source: schemas.SourceCounters, Name: "port_rcv_data", Delta: uint64(i*1000 + p)},
					{Source: schemas.SourceEthtool, Name: "rx_prio3_pause", Delta: uint64(p)},
				}, Gauges: map[string]uint64{"lifespan": uint64(i)}})
		}
		for _, r := range SampleRows(b) {
			rows = append(rows, &r)
		}
	}
	return rows
}

// TestSampleBlocksChunks: fill hands the driver a chunk of chunkRows rows
// at a time, every column complete at each Flush, and altogether the rows
// Values would send, in order; a refusal names its column, says whether a
// chunk went to the server, and leaves nothing behind for the next INSERT.
func TestSampleBlocksChunks(t *testing.T) {
	sb := newSampleBlocks()
	for _, tc := range []struct {
		rows, refuseCol, refuseAfter int
		wantFlushes                  int
		wantErr                      bool
	}{
		{rows: 1, refuseCol: -1},
		{rows: chunkRows, refuseCol: -1},
		{rows: chunkRows + 1, refuseCol: -1, wantFlushes: 1},
		{rows: 2*chunkRows + 5, refuseCol: -1, wantFlushes: 2},
		{rows: 10, refuseCol: 3, refuseAfter: 0, wantErr: true},
		{rows: 2*chunkRows + 5, refuseCol: 20, refuseAfter: 1, wantFlushes: 1, wantErr: true},
		{rows: 3, refuseCol: -1}, // after a refusal: exactly its own rows
	} {
		t.Run(fmt.Sprintf("%d rows, refuse %d after %d", tc.rows, tc.refuseCol, tc.refuseAfter), func(t *testing.T) {
			rows := manyRows(tc.rows)
			b := &chunkBatch{cols: make([]recorded, len(SampleColumns)), refuseCol: tc.refuseCol, refuseAfter: tc.refuseAfter}
			sent, err := sb.fill(b, rows)
			if sent != (len(b.flushes) > 0) || (err != nil) != tc.wantErr || len(b.flushes) != tc.wantFlushes {
				t.Fatalf("sent %t, err %v, %d flushes; want error %t, %d flushes (sent when one was)", sent, err, len(b.flushes), tc.wantErr, tc.wantFlushes)
			}
			if err != nil {
				if want := "port_samples column " + SampleColumns[tc.refuseCol]; !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
				return
			}
			for f, held := range b.flushes {
				for c, n := range held {
					if n != (f+1)*chunkRows {
						t.Fatalf("flush %d: column %s held %d rows, want %d", f, SampleColumns[c], n, (f+1)*chunkRows)
					}
				}
			}
			for i, r := range rows {
				want := r.Values()
				for c := range b.cols {
					if len(b.cols[c]) != len(rows) {
						t.Fatalf("column %s: %d rows, want %d", SampleColumns[c], len(b.cols[c]), len(rows))
					}
					if got := b.cols[c][i]; !reflect.DeepEqual(got, want[c]) {
						t.Fatalf("column %s row %d: %#v, want %#v", SampleColumns[c], i, got, want[c])
					}
				}
			}
		})
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
	checkKept(t, &b.Ports[0], &r)
	if v, ok := readBack(&r)[counterKey{schemas.SourceHWCounters, "new_counter"}]; !ok || v.value != 5 {
		t.Error("an unknown counter's raw value is lost")
	}
}

// kept is what a row holds of one counter.
type kept struct {
	delta, value uint64
	flags        uint8
}

// readBack reads every counter back from a row, by source and name.
func readBack(r *SampleRow) map[counterKey]kept {
	out := map[counterKey]kept{}
	for i, c := range namedCounters {
		k := counterKey{c.source, c.name}
		v := out[k]
		v.delta += r.Named[i]
		out[k] = v
	}
	for i, id := range r.ExtraID {
		cid := schemas.CounterID(id)
		k := counterKey{cid.Source(), cid.Name()}
		v := out[k]
		v.delta += r.ExtraDelta[i]
		out[k] = v
	}
	for i, id := range r.FlaggedID {
		cid := schemas.CounterID(id)
		k := counterKey{cid.Source(), cid.Name()}
		v := out[k]
		v.value, v.flags = r.FlaggedValue[i], r.FlaggedFlags[i]
		out[k] = v
	}
	for i, n := range r.UnknownName {
		k := counterKey{schemas.Source(r.UnknownSource[i]), n}
		v := out[k]
		v.delta, v.value, v.flags = v.delta+r.UnknownDelta[i], r.UnknownValue[i], r.UnknownFlags[i]
		out[k] = v
	}
	return out
}

// checkKept: every counter of p can be read back from r with its delta,
// and with its raw value and flags where it had flags (a counter listed
// twice in a sample adds up).
func checkKept(t *testing.T, p *schemas.PortSample, r *SampleRow) {
	t.Helper()
	got := readBack(r)
	want := map[counterKey]kept{}
	for _, c := range p.Counters {
		k := counterKey{c.Source, schemas.TrimStatName(c.Name)}
		v := want[k]
		v.delta += c.Delta
		if c.Flags != 0 {
			v.value, v.flags = c.Value, uint8(c.Flags)
		}
		want[k] = v
	}
	for k, w := range want {
		g := got[k]
		if g.delta != w.delta || (w.flags != 0 && (g.value != w.value || g.flags != w.flags)) {
			t.Errorf("%s/%s: kept %+v, read back %+v", k.source, k.name, w, g)
		}
	}
}

// FuzzSampleRows: any batch the decoder accepts becomes rows that keep
// every counter, and the column-wise block equals the row-wise values.
//
//	go test -run '^$' -fuzz FuzzSampleRows -fuzztime 30s ./sink
func FuzzSampleRows(f *testing.F) {
	for _, b := range []*schemas.CounterBatch{
		{Version: schemas.Version, Node: "gpu-001", BootID: "b", Seq: 1, TimeMs: 1767225600000, Ports: []schemas.PortSample{
			{Device: "mlx5_0", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", Rate: "100 Gb/sec (4X EDR)", TimeMs: 1767225600000, IntervalMs: 1000,
				Counters: []schemas.CounterDelta{
					{Source: schemas.SourceCounters, Name: "port_rcv_data", Delta: 4000},
					{Source: schemas.SourceEthtool, Name: "rx_prio3_pause_duration", Delta: 7},
					{Source: schemas.SourceCounters, Name: "symbol_error", Value: 65535, Flags: schemas.FlagSaturated},
					{Source: schemas.SourceHWCounters, Name: "a_new_counter", Delta: 1, Value: 2, Flags: schemas.FlagReset},
				}, Gauges: map[string]uint64{"lifespan": 10}}}},
		{Version: schemas.Version, Node: "ib-1", BootID: "c", Seq: 2, TimeMs: 1767225600000, Ports: []schemas.PortSample{
			{Device: "mlx5_1", Port: 2, LinkLayer: "InfiniBand", TimeMs: 1767225600000,
				Counters: []schemas.CounterDelta{{Source: schemas.SourceCounters, Name: "port_xmit_data", Value: 9, Flags: schemas.FlagFirst}}}}},
	} {
		data, err := schemas.EncodeBatch(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := schemas.DecodeBatch(data)
		if err != nil {
			return
		}
		rows := SampleRows(b)
		ptrs := make([]*SampleRow, len(rows))
		for i := range rows {
			checkKept(t, &b.Ports[i], &rows[i])
			ptrs[i] = &rows[i]
		}
		for c, build := range sampleBlock {
			col := built(t, build, ptrs)
			for i := range rows {
				if got, want := col[i], rows[i].Values()[c]; !reflect.DeepEqual(got, want) {
					t.Fatalf("column %s row %d: block %#v, Values %#v", SampleColumns[c], i, got, want)
				}
			}
		}
	})
}
