package engine

import (
	"slices"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// defaultLateness is the allowed lateness before any collection interval has
// been seen, and the fixed value older configs relied on.
const defaultLateness = 10 * time.Second

// intervalEstimator tracks the fleet's collection interval from the samples'
// IntervalMs. The median of the recent ones: a gap makes one sample's
// interval a multiple of the real one, a collector with jitter makes them
// wobble, and neither should move the watermark's lag.
type intervalEstimator struct {
	ring [64]int64
	// sorted holds the ring's values (the first min(n, 64)) in order,
	// kept as values come and go: the median is an index, never a sort.
	sorted [64]int64
	n      int // values written so far
	median int64
}

func (e *intervalEstimator) observe(intervalMs int64) {
	if intervalMs <= 0 {
		return // a baseline carries no interval
	}
	slot := &e.ring[e.n%len(e.ring)]
	k := min(e.n, len(e.ring)) // values in sorted
	if e.n >= len(e.ring) {
		if old := *slot; old != intervalMs {
			i, _ := slices.BinarySearch(e.sorted[:k], old)
			copy(e.sorted[i:k-1], e.sorted[i+1:k])
			k--
		} else {
			k = -1 // the same value replaces itself: sorted stays
		}
	}
	if k >= 0 {
		i, _ := slices.BinarySearch(e.sorted[:k], intervalMs)
		copy(e.sorted[i+1:k+1], e.sorted[i:k])
		e.sorted[i] = intervalMs
	}
	*slot = intervalMs
	e.n++
	// The median is taken every 16 samples (and for the first 16): the
	// interval of a fleet changes when someone reconfigures the
	// collectors, not per sample.
	if e.n < 16 || e.n%16 == 0 {
		e.median = e.sorted[min(e.n, len(e.ring))/2]
	}
}

// lateness is the allowed lateness in milliseconds: the configured one, or
// one observed interval plus a tenth for read-time jitter.
func (p *Processor) lateness() schemas.Millis {
	if p.cfg.AllowedLateness > 0 {
		return schemas.Millis(p.cfg.AllowedLateness.Milliseconds())
	}
	if p.intervals.median <= 0 {
		return schemas.Millis(defaultLateness.Milliseconds())
	}
	return schemas.Millis(p.intervals.median + p.intervals.median/10)
}

// tick is the data-time step between fabric-detector calls: the configured
// one, or 1 s, shortened to a quarter of the lateness (at least 100 ms).
func (p *Processor) tick() schemas.Millis {
	if p.cfg.Tick > 0 {
		return schemas.Millis(p.cfg.Tick.Milliseconds())
	}
	return max(100, min(1000, p.lateness()/4))
}
