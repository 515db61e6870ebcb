package sink

import (
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// port_samples blocks are built column by column: each column gets one
// typed slice (clickhouse-go appends []uint64, []string, ... without boxing
// each value, where batch.Append boxes every value of every row). Array
// columns go row by row (arr): the driver's Append of a [][]T walks it by
// reflection, boxing every row and element, where its AppendRow of a []T
// takes a typed path; at 50 000 ports that walk was a tenth of the sink's
// CPU. The layout keeps the arrays short (schemas/ddl/migrations/0011).

// column fills one column of a block from its rows.
type column func(c driver.BatchColumn, rows []*SampleRow) error

func col[T any](value func(*SampleRow) T) column {
	return func(c driver.BatchColumn, rows []*SampleRow) error {
		out := make([]T, len(rows))
		for i, r := range rows {
			out[i] = value(r)
		}
		return c.Append(out)
	}
}

// arr is col for an array column.
func arr[T any](value func(*SampleRow) []T) column {
	return func(c driver.BatchColumn, rows []*SampleRow) error {
		for _, r := range rows {
			if err := c.AppendRow(value(r)); err != nil {
				return err
			}
		}
		return nil
	}
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

// appendSamples fills batch (INSERT INTO port_samples (SampleColumns))
// with rows, column by column.
func appendSamples(batch driver.Batch, rows []*SampleRow) error {
	for i, build := range sampleBlock {
		if err := build(batch.Column(i), rows); err != nil {
			return fmt.Errorf("port_samples column %s: %w", SampleColumns[i], err)
		}
	}
	return nil
}
