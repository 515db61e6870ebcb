package sink

import (
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// port_samples blocks are built column by column: each column gets one
// typed slice (clickhouse-go appends []uint64, []string, ... without boxing
// each value, where batch.Append boxes every value of every row). Array
// columns go row by row (array.send): the driver's Append of a [][]T walks
// it by reflection, boxing every row and element, where its AppendRow of a
// []T takes a typed path; at 50 000 ports that walk was a tenth of the
// sink's CPU. The layout keeps the arrays short
// (schemas/ddl/migrations/0011).
//
// The values are gathered row by row, every column of a row at once: the
// rows come sorted by the table's key (tableSpec.order), not in the order
// they lie in memory, so a pass over all rows per column would touch every
// row once per column in no order the cache can follow. (The first sorted
// version did that, with a stable sort, and the sink rose from 0.39 to 0.49
// cores at 50 000 ports; the two causes were not measured apart.)

// column is one port_samples column: it makes the builder that gathers its
// values for a block of n rows.
type column func(n int) builder

// builder gathers one column's values, then hands them to the driver
// and is empty again (reset empties it without sending).
type builder interface {
	add(r *SampleRow)
	send(c driver.BatchColumn) error
	reset()
}

type plain[T any] struct {
	value func(*SampleRow) T
	out   []T
}

func (b *plain[T]) add(r *SampleRow) { b.out = append(b.out, b.value(r)) }

func (b *plain[T]) send(c driver.BatchColumn) error {
	defer b.reset()
	return c.Append(b.out)
}

func (b *plain[T]) reset() { b.out = b.out[:0] }

func col[T any](value func(*SampleRow) T) column {
	return func(n int) builder { return &plain[T]{value: value, out: make([]T, 0, n)} }
}

type array[T any] struct {
	value func(*SampleRow) []T
	out   [][]T
}

func (b *array[T]) add(r *SampleRow) { b.out = append(b.out, b.value(r)) }

func (b *array[T]) send(c driver.BatchColumn) error {
	defer b.reset()
	for _, v := range b.out {
		if len(v) == 0 {
			// The driver writes a nil []T as the empty array it is, and a
			// nil slice goes into the interface without an allocation:
			// most rows' arrays are empty (flagged and unknown counters
			// are rare), and boxing each was a tenth of the block's cost.
			v = nil
		}
		if err := c.AppendRow(v); err != nil {
			return err
		}
	}
	return nil
}

func (b *array[T]) reset() {
	clear(b.out) // the rows' arrays, not kept past the chunk
	b.out = b.out[:0]
}

// arr is col for an array column.
func arr[T any](value func(*SampleRow) []T) column {
	return func(n int) builder { return &array[T]{value: value, out: make([][]T, 0, n)} }
}

// sampleBlock is SampleColumns as column builders, in the same order.
var sampleBlock = func() []column {
	cols := []column{
		col(func(r *SampleRow) time.Time { return dateTime(r.TimeMs) }),
		col(func(r *SampleRow) int64 { return r.TimeMs }),
		col(func(r *SampleRow) string { return r.Node }),
		col(func(r *SampleRow) string { return r.Device }),
		col(func(r *SampleRow) uint16 { return r.Port }),
		col(func(r *SampleRow) string { return r.Netdev }),
		col(func(r *SampleRow) string { return r.LinkLayer }),
		col(func(r *SampleRow) string { return r.State }),
		col(func(r *SampleRow) string { return r.Rate }),
		col(func(r *SampleRow) int64 { return r.IntervalMs }),
		col(func(r *SampleRow) string { return r.BootID }),
		col(func(r *SampleRow) uint64 { return r.Seq }),
		col(func(r *SampleRow) int64 { return r.BatchTimeMs }),
		col(func(r *SampleRow) uint8 { return u8(r.First) }),
		col(func(r *SampleRow) uint8 { return u8(r.Reset) }),
		col(func(r *SampleRow) uint8 { return u8(r.Wrapped) }),
		col(func(r *SampleRow) uint8 { return u8(r.Held) }),
		arr(func(r *SampleRow) []string { return r.Saturated }),
	}
	for i := range namedCounters {
		cols = append(cols, col(func(r *SampleRow) uint64 { return r.Named[i] }))
	}
	return append(cols,
		col(func(r *SampleRow) uint64 { return r.RxPause }),
		col(func(r *SampleRow) uint64 { return r.TxPause }),
		col(func(r *SampleRow) uint64 { return r.RxPauseDurationUs }),
		col(func(r *SampleRow) uint64 { return r.TxPauseDurationUs }),
		arr(func(r *SampleRow) []uint16 { return nonNil(r.ExtraID) }),
		arr(func(r *SampleRow) []uint64 { return nonNil(r.ExtraDelta) }),
		arr(func(r *SampleRow) []uint16 { return nonNil(r.FlaggedID) }),
		arr(func(r *SampleRow) []uint8 { return nonNil(r.FlaggedFlags) }),
		arr(func(r *SampleRow) []uint64 { return nonNil(r.FlaggedValue) }),
		arr(func(r *SampleRow) []uint8 { return nonNil(r.UnknownSource) }),
		arr(func(r *SampleRow) []string { return nonNil(r.UnknownName) }),
		arr(func(r *SampleRow) []uint64 { return nonNil(r.UnknownDelta) }),
		arr(func(r *SampleRow) []uint64 { return nonNil(r.UnknownValue) }),
		arr(func(r *SampleRow) []uint8 { return nonNil(r.UnknownFlags) }),
		arr(func(r *SampleRow) []string { return r.GaugeName }),
		arr(func(r *SampleRow) []uint64 { return r.GaugeValue }),
		col(func(r *SampleRow) float64 { return r.Derived.RateGbps }),
		col(func(r *SampleRow) float64 { return r.Derived.RcvGbps }),
		col(func(r *SampleRow) float64 { return r.Derived.XmitGbps }),
		col(func(r *SampleRow) float64 { return r.Derived.Utilisation }),
		col(func(r *SampleRow) float64 { return r.Derived.TxPauseFraction }),
		col(func(r *SampleRow) float64 { return r.Derived.RxPauseFraction }),
		col(func(r *SampleRow) float64 { return r.Derived.PreFECBER }),
		col(func(r *SampleRow) float64 { return r.Derived.PostFECBER }),
		col(func(r *SampleRow) float64 { return r.Derived.SymbolBER }),
	)
}()

// chunkRows is how many rows go to the driver at a time. One INSERT of a
// flush's rows goes as several blocks (batch.Flush between them): the
// driver's columns grow to one chunk and are reset, capacity kept, for the
// next, where a fresh 32 768-row column grew by append from empty on every
// INSERT (the driver appends value by value, and Go grows a large slice by
// a quarter: about five times the column's size allocated and copied, 45 %
// of the sink's allocations while it drained a backlog, sink-insert-chunks).
// ClickHouse squashes the blocks of one INSERT into one
// before it writes a part (min_insert_block_size_rows), so the parts are
// as large as before (TestSinkChunksLandAsOnePart).
const chunkRows = 8192

// sampleBlocks fills port_samples INSERTs (SampleColumns) column by column,
// a chunk of rows at a time. Its builders are reused from chunk to chunk
// and INSERT to INSERT: one per pipeline, used by its goroutine alone.
type sampleBlocks struct {
	bs []builder
}

func newSampleBlocks() *sampleBlocks {
	sb := &sampleBlocks{bs: make([]builder, len(sampleBlock))}
	for i, c := range sampleBlock {
		sb.bs[i] = c(chunkRows)
	}
	return sb
}

// fill appends rows to batch, sending each chunk but the last to the
// server (the caller's batch.Send sends the last and ends the INSERT).
// sent reports whether a chunk went to the server: after an error the
// server may then hold part of the rows, and they must be checked for
// before going again.
func (sb *sampleBlocks) fill(batch driver.Batch, rows []*SampleRow) (sent bool, err error) {
	defer func() {
		if err != nil {
			for _, b := range sb.bs { // empty for the next INSERT
				b.reset()
			}
		}
	}()
	for start := 0; start < len(rows); start += chunkRows {
		if start > 0 {
			if err := batch.Flush(); err != nil {
				return true, fmt.Errorf("port_samples: sending rows %d-%d: %w", start-chunkRows, start-1, err)
			}
			sent = true
		}
		for _, r := range rows[start:min(start+chunkRows, len(rows))] {
			for _, b := range sb.bs {
				b.add(r)
			}
		}
		for i, b := range sb.bs {
			if err := b.send(batch.Column(i)); err != nil {
				return sent, fmt.Errorf("port_samples column %s: %w", SampleColumns[i], err)
			}
		}
	}
	return sent, nil
}
