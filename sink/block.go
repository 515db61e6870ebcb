package sink

import (
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// port_samples blocks are built column by column: each column gets one
// typed slice (clickhouse-go appends []uint64, []string, ... without boxing
// each value, where batch.Append boxes every value of every row). Array
// columns still go through the driver's per-element path; the layout keeps
// them short (schemas/ddl/migrations/0011).

// column builds one column of a block from its rows.
type column func(rows []*SampleRow) any

func col[T any](value func(*SampleRow) T) column {
	return func(rows []*SampleRow) any {
		out := make([]T, len(rows))
		for i, r := range rows {
			out[i] = value(r)
		}
		return out
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
		col(func(r *SampleRow) []string { return r.Saturated }),
	}
	for i := range namedCounters {
		cols = append(cols, col(func(r *SampleRow) uint64 { return r.Named[i] }))
	}
	return append(cols,
		col(func(r *SampleRow) uint64 { return r.RxPause }),
		col(func(r *SampleRow) uint64 { return r.TxPause }),
		col(func(r *SampleRow) uint64 { return r.RxPauseDurationUs }),
		col(func(r *SampleRow) uint64 { return r.TxPauseDurationUs }),
		col(func(r *SampleRow) []uint16 { return nonNil(r.ExtraID) }),
		col(func(r *SampleRow) []uint64 { return nonNil(r.ExtraDelta) }),
		col(func(r *SampleRow) []uint16 { return nonNil(r.FlaggedID) }),
		col(func(r *SampleRow) []uint8 { return nonNil(r.FlaggedFlags) }),
		col(func(r *SampleRow) []uint64 { return nonNil(r.FlaggedValue) }),
		col(func(r *SampleRow) []uint8 { return nonNil(r.UnknownSource) }),
		col(func(r *SampleRow) []string { return nonNil(r.UnknownName) }),
		col(func(r *SampleRow) []uint64 { return nonNil(r.UnknownDelta) }),
		col(func(r *SampleRow) []uint64 { return nonNil(r.UnknownValue) }),
		col(func(r *SampleRow) []uint8 { return nonNil(r.UnknownFlags) }),
		col(func(r *SampleRow) []string { return r.GaugeName }),
		col(func(r *SampleRow) []uint64 { return r.GaugeValue }),
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
		if err := batch.Column(i).Append(build(rows)); err != nil {
			return fmt.Errorf("port_samples column %s: %w", SampleColumns[i], err)
		}
	}
	return nil
}
