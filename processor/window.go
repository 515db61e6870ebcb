package processor

import (
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Buckets is a data-time window of fixed-width buckets that each sum one
// figure: the way a detector keeps two hours of a port's history in a few
// hundred bytes (120 one-minute buckets of float32 are 480 B) instead of
// 1440 raw samples. The zero value is unusable; make one with NewBuckets.
type Buckets struct {
	widthMs int64
	// start is the data time of sums[head]; the window covers
	// [start, start + len(sums)*width).
	start   schemas.Millis
	head    int
	started bool
	sums    []float32
}

// NewBuckets makes a window of n buckets of the given width.
func NewBuckets(n int, width time.Duration) *Buckets {
	return &NewBucketsGroup(1, n, width)[0]
}

// NewBucketsGroup makes k windows of n buckets of the given width in one
// allocation, their sums in one array: for a detector that updates several
// windows of a port on every sample, the windows then lie together in
// memory instead of in 2k scattered objects, each a cache miss when tens
// of thousands of ports pass between two samples of one port.
func NewBucketsGroup(k, n int, width time.Duration) []Buckets {
	if n < 1 {
		n = 1
	}
	w := width.Milliseconds()
	if w < 1 {
		w = 1
	}
	g := make([]Buckets, k)
	sums := make([]float32, k*n)
	for i := range g {
		g[i] = Buckets{widthMs: w, sums: sums[i*n : (i+1)*n : (i+1)*n]}
	}
	return g
}

// Span is the data time the window covers.
func (b *Buckets) Span() time.Duration {
	return time.Duration(int64(len(b.sums))*b.widthMs) * time.Millisecond
}

func (b *Buckets) align(t schemas.Millis) schemas.Millis {
	return t - schemas.Millis(((int64(t)%b.widthMs)+b.widthMs)%b.widthMs)
}

// Add adds v at data time t. Values older than the window are dropped; a
// newer time slides the window forward, clearing the buckets it passes.
func (b *Buckets) Add(t schemas.Millis, v float64) {
	at := b.align(t)
	n := int64(len(b.sums))
	if !b.started {
		b.started = true
		b.start = at - schemas.Millis((n-1)*b.widthMs)
	}
	end := b.start + schemas.Millis(n*b.widthMs)
	if at >= end {
		steps := (int64(at-end))/b.widthMs + 1
		if steps >= n {
			clear(b.sums)
			b.head = 0
			b.start = at - schemas.Millis((n-1)*b.widthMs)
		} else {
			for i := int64(0); i < steps; i++ {
				b.sums[b.head] = 0
				b.head = (b.head + 1) % len(b.sums)
			}
			b.start += schemas.Millis(steps * b.widthMs)
		}
	}
	if at < b.start {
		return
	}
	idx := (b.head + int((int64(at-b.start))/b.widthMs)) % len(b.sums)
	b.sums[idx] += float32(v)
}

// Sum adds the buckets whose start lies in [from, to), oldest first.
func (b *Buckets) Sum(from, to schemas.Millis) float64 {
	// The buckets in range are a run of indexes [lo, hi): bucket i starts
	// at start + i*width.
	n := int64(len(b.sums))
	lo, hi := int64(0), n
	if d := int64(from - b.start); d > 0 {
		lo = (d + b.widthMs - 1) / b.widthMs
	}
	if d := int64(to - b.start); d <= 0 {
		hi = 0
	} else {
		hi = min(n, (d+b.widthMs-1)/b.widthMs)
	}
	var s float64
	for i := lo; i < hi; i++ {
		j := b.head + int(i)
		if j >= len(b.sums) {
			j -= len(b.sums)
		}
		s += float64(b.sums[j])
	}
	return s
}
