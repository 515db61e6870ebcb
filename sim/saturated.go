package sim

import (
	"fmt"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// CounterSaturated is a saturating error counter (symbol_error,
// link_error_recovery, port_rcv_errors, ...) that climbs until it pins at its
// maximum: from then on the port hides every new error. The label starts at
// the first reading at the maximum and ends at the first reading below it
// (the counters were cleared), or stays open.
type CounterSaturated struct {
	Port PortRef
	// Counter is a saturating file in counters/, e.g. "symbol_error".
	Counter string
	// From is when the errors start; zero (or the trace start) means the
	// counter is already pinned at the first reading.
	From time.Time
	// Initial is the counter's reading at the trace start (months of
	// history); 0 means five minutes of climbing below the maximum.
	Initial uint64
	// PerSecond is the error rate once From is reached; 0 means 1.
	PerSecond float64
	// ClearAt, when set, clears the port's counters (driver reload,
	// `perfquery -R`) after the cause was fixed: errors stop.
	ClearAt time.Time
}

// Start implements Fault.
func (f CounterSaturated) Start(l *Layout) (Effect, error) {
	info, ok := l.Port(f.Port)
	if !ok {
		return nil, fmt.Errorf("counter_saturated: no port %s", f.Port)
	}
	kind := schemas.KindOf(schemas.SourceCounters, f.Counter)
	if !kind.Saturating() || !newPortState(info).Has(schemas.SourceCounters, f.Counter) {
		return nil, fmt.Errorf("counter_saturated: %q is not a saturating counter of %s port %s", f.Counter, info.LinkLayer, f.Port)
	}
	if f.PerSecond == 0 {
		f.PerSecond = 1
	}
	if f.PerSecond < 0 {
		return nil, fmt.Errorf("counter_saturated: negative rate")
	}
	if f.From.Before(l.Start) {
		f.From = l.Start
	}
	f.From = f.From.UTC().Truncate(time.Millisecond)
	if err := checkWindow(l, "counter_saturated from", f.From); err != nil {
		return nil, err
	}
	if !f.ClearAt.IsZero() && !f.ClearAt.After(f.From) {
		return nil, fmt.Errorf("counter_saturated: clear_at before from")
	}
	max := kind.Max()
	switch {
	case f.From.Equal(l.Start):
		f.Initial = max
	case f.Initial == 0:
		climb := uint64(300 * f.PerSecond)
		f.Initial = max - min(climb, max)
	}
	return &counterSaturated{spec: f, max: max}, nil
}

type counterSaturated struct {
	spec   CounterSaturated
	max    uint64
	labels []Label
	open   bool
}

func (e *counterSaturated) Ports() []PortRef { return []PortRef{e.spec.Port} }

func (e *counterSaturated) Apply(t *Tick) {
	f := e.spec
	if t.First {
		t.Port.Set(schemas.SourceCounters, f.Counter, f.Initial)
	}
	end := t.Now
	if !f.ClearAt.IsZero() {
		if t.Within(f.ClearAt) {
			// Cleared after the repair: the reading shows only what came after.
			t.Port.Clear()
			return
		}
		end = f.ClearAt
	}
	if s := t.Overlap(f.From, end); s > 0 {
		t.Port.Add(schemas.SourceCounters, f.Counter, poisson(t.Rand, f.PerSecond*s))
	}
}

func (e *counterSaturated) Observe(t *Tick) {
	v, _ := t.Port.Value(schemas.SourceCounters, e.spec.Counter)
	switch {
	case v >= e.max && !e.open:
		e.open = true
		e.labels = append(e.labels, Label{
			Type:    schemas.TypeCounterSaturated,
			Start:   schemas.MillisOf(t.Now),
			Subject: portSubject(e.spec.Port),
		})
	case v < e.max && e.open:
		e.open = false
		e.labels[len(e.labels)-1].End = millisPtr(t.Now)
	}
}

func (e *counterSaturated) Labels() []Label { return append([]Label(nil), e.labels...) }
