package sink

import (
	"fmt"
	"time"
)

// columnAppender is what a block column takes: driver.BatchColumn, or a
// bare column in tests.
type columnAppender interface {
	// Append adds one value per row from a typed slice ([]uint64, []string...).
	Append(v any) error
	// AppendRow adds one row's value (an array column's []T).
	AppendRow(v any) error
}

// appendSampleColumns builds port_samples rows into a block column by
// column, in SampleColumns order, with the same values Values gives row by
// row: scalar columns as one typed slice each (no per-row []any, no boxing),
// array columns one typed slice per row (the driver's reflection-free path;
// a [][]T goes through reflection per element and is slower).
func appendSampleColumns(column func(int) columnAppender, rows []SampleRow) error {
	a := sampleAppender{column: column, rows: rows}
	a.scalar(col(rows, func(r *SampleRow) time.Time { return dateTime(r.TimeMs) }))
	a.scalar(col(rows, func(r *SampleRow) int64 { return r.TimeMs }))
	a.scalar(col(rows, func(r *SampleRow) string { return r.Node }))
	a.scalar(col(rows, func(r *SampleRow) string { return r.Device }))
	a.scalar(col(rows, func(r *SampleRow) uint16 { return r.Port }))
	a.scalar(col(rows, func(r *SampleRow) string { return r.Netdev }))
	a.scalar(col(rows, func(r *SampleRow) string { return r.LinkLayer }))
	a.scalar(col(rows, func(r *SampleRow) string { return r.State }))
	a.scalar(col(rows, func(r *SampleRow) string { return r.Rate }))
	a.scalar(col(rows, func(r *SampleRow) int64 { return r.IntervalMs }))
	a.scalar(col(rows, func(r *SampleRow) string { return r.BootID }))
	a.scalar(col(rows, func(r *SampleRow) uint64 { return r.Seq }))
	a.scalar(col(rows, func(r *SampleRow) int64 { return r.BatchTimeMs }))
	a.scalar(col(rows, func(r *SampleRow) uint8 { return u8(r.First) }))
	a.scalar(col(rows, func(r *SampleRow) uint8 { return u8(r.Reset) }))
	a.scalar(col(rows, func(r *SampleRow) uint8 { return u8(r.Wrapped) }))
	a.scalar(col(rows, func(r *SampleRow) uint8 { return u8(r.Held) }))
	arrayRows(&a, func(r *SampleRow) []string { return r.Saturated })
	u := make([]uint64, len(rows)) // reused: the driver copies what it is given
	for k := range namedCounters {
		for i := range rows {
			u[i] = rows[i].Named[k]
		}
		a.scalar(u)
	}
	for _, f := range []func(*SampleRow) uint64{
		func(r *SampleRow) uint64 { return sum(r.RxPrioPause) },
		func(r *SampleRow) uint64 { return sum(r.TxPrioPause) },
		func(r *SampleRow) uint64 { return sum(r.RxPrioPauseDurationUs) },
		func(r *SampleRow) uint64 { return sum(r.TxPrioPauseDurationUs) },
	} {
		for i := range rows {
			u[i] = f(&rows[i])
		}
		a.scalar(u)
	}
	arrayRows(&a, func(r *SampleRow) []uint64 { return r.RxPrioPause[:] })
	arrayRows(&a, func(r *SampleRow) []uint64 { return r.TxPrioPause[:] })
	arrayRows(&a, func(r *SampleRow) []uint64 { return r.RxPrioPauseDurationUs[:] })
	arrayRows(&a, func(r *SampleRow) []uint64 { return r.TxPrioPauseDurationUs[:] })
	arrayRows(&a, func(r *SampleRow) []uint8 { return r.CounterSource })
	arrayRows(&a, func(r *SampleRow) []string { return r.CounterName })
	arrayRows(&a, func(r *SampleRow) []uint64 { return r.CounterDelta })
	arrayRows(&a, func(r *SampleRow) []uint64 { return r.CounterValue })
	arrayRows(&a, func(r *SampleRow) []uint8 { return r.CounterFlags })
	arrayRows(&a, func(r *SampleRow) []string { return r.GaugeName })
	arrayRows(&a, func(r *SampleRow) []uint64 { return r.GaugeValue })
	f := make([]float64, len(rows))
	for _, g := range []func(*Derived) float64{
		func(d *Derived) float64 { return d.RateGbps },
		func(d *Derived) float64 { return d.RcvGbps },
		func(d *Derived) float64 { return d.XmitGbps },
		func(d *Derived) float64 { return d.Utilisation },
		func(d *Derived) float64 { return d.TxPauseFraction },
		func(d *Derived) float64 { return d.RxPauseFraction },
		func(d *Derived) float64 { return d.PreFECBER },
		func(d *Derived) float64 { return d.PostFECBER },
		func(d *Derived) float64 { return d.SymbolBER },
	} {
		for i := range rows {
			f[i] = g(&rows[i].Derived)
		}
		a.scalar(f)
	}
	if a.err == nil && a.next != len(SampleColumns) {
		return fmt.Errorf("port_samples: built %d columns, the insert names %d", a.next, len(SampleColumns))
	}
	return a.err
}

// sampleAppender walks the block's columns in order and keeps the first error.
type sampleAppender struct {
	column func(int) columnAppender
	rows   []SampleRow
	next   int
	err    error
}

func (a *sampleAppender) nextColumn() (columnAppender, bool) {
	if a.err != nil {
		return nil, false
	}
	if a.next >= len(SampleColumns) {
		a.err = fmt.Errorf("port_samples: more columns built than the insert's %d", len(SampleColumns))
		return nil, false
	}
	c := a.column(a.next)
	a.next++
	return c, true
}

func (a *sampleAppender) scalar(v any) {
	if c, ok := a.nextColumn(); ok {
		if err := c.Append(v); err != nil {
			a.err = fmt.Errorf("port_samples column %s: %w", SampleColumns[a.next-1], err)
		}
	}
}

func arrayRows[T any](a *sampleAppender, f func(*SampleRow) []T) {
	c, ok := a.nextColumn()
	if !ok {
		return
	}
	for i := range a.rows {
		if err := c.AppendRow(f(&a.rows[i])); err != nil {
			a.err = fmt.Errorf("port_samples column %s row %d: %w", SampleColumns[a.next-1], i, err)
			return
		}
	}
}

// col returns one column's values, f of every row.
func col[T any](rows []SampleRow, f func(*SampleRow) T) []T {
	v := make([]T, len(rows))
	for i := range rows {
		v[i] = f(&rows[i])
	}
	return v
}
