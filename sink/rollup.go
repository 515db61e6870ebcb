package sink

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/rdmawatch/rdmawatch/internal/chdb"
)

// The rollups (rollup_minute, rollup_hour, rollup_day) are rolled by the sink from the
// rows it stored, not by materialized views on every insert: the views cost
// ClickHouse three quarters of its CPU under sustained inserts
// (rollup-views-cost), one INSERT ... SELECT per closed minute a small part
// of that.
//
// The roller notes the minutes the sink stored samples of (from acked
// messages, redelivered ones included) and rolls a minute once data time,
// the newest sample stored, is RollupDelay past its end, or at once when no
// rows came in since the last roll (the fleet went quiet, a test ended). A
// minute that gets rows after it was rolled is rolled again; the hour is
// rolled from its minutes the same way, and the day from its hours each time
// one of them was rolled (so the day rollup is as fresh as the hour one, at
// one day roll an hour). Rolling is idempotent
// (chdb.Roll), so a roll that fails is simply tried at the next tick, and a
// sink that starts rolls the minutes since the newest one rolled, minus
// RollupLookback, again: the sink before it may have died with them pending.
//
// Several sinks sharing the consumers each roll the minutes they stored
// rows of: the same minutes, rolled more than once, still right.

// maxRollSpan bounds one roll statement, so the minutes a long outage left
// are rolled a few hours at a time, each an INSERT of bounded size.
const maxRollSpan = 6 * time.Hour

// maxAhead is how far past the wall clock a sample may be and still move
// data time forward: a node whose clock runs a day ahead must not make
// every minute look closed (each would be rolled on every tick).
const maxAhead = 5 * time.Minute

type roller struct {
	log                    *slog.Logger
	every, delay, lookback time.Duration
	// rollRange and unrolled are chdb.Roll and chdb.UnrolledMinutes on the
	// sink's connection (a test records the calls instead).
	rollRange func(ctx context.Context, r chdb.Rollup, from, to time.Time) error
	unrolled  func(ctx context.Context, since time.Time, lookback time.Duration) ([]time.Time, error)

	mu sync.Mutex
	// minutes, hours and days waiting to be rolled (unix minute, hour or
	// UTC day), each with the mark it got last, so a roll does not forget
	// a mark made while it ran.
	minutes, hours, days map[int64]uint64
	mark                 uint64
	// watermark is data time: the newest sample stored (unix ms).
	watermark int64
	// stored: rows were stored since the last tick.
	stored    bool
	recovered bool
	minStats  RollupStats
	hourStats RollupStats
	dayStats  RollupStats
}

func newRoller(conn driver.Conn, cfg Config, log *slog.Logger) *roller {
	return &roller{
		log: log.With("component", "rollup"),
		rollRange: func(ctx context.Context, r chdb.Rollup, from, to time.Time) error {
			return chdb.Roll(ctx, conn, r, from, to)
		},
		unrolled: func(ctx context.Context, since time.Time, lookback time.Duration) ([]time.Time, error) {
			return chdb.UnrolledMinutes(ctx, conn, since, lookback)
		},
		every: cfg.RollupEvery, delay: cfg.RollupDelay, lookback: cfg.RollupLookback,
		minutes: map[int64]uint64{}, hours: map[int64]uint64{}, days: map[int64]uint64{},
	}
}

// note records the minutes of rows ClickHouse has (called as their message
// is acked, from the counters pipeline's goroutine). Each call is one new
// mark: a roll that read its minute before these rows landed must not
// forget the minute.
func (r *roller) note(rows []SampleRow) {
	if len(rows) == 0 {
		return
	}
	limit := time.Now().Add(maxAhead).UnixMilli()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stored = true // baselines too: the fleet is not quiet
	r.mark++
	last := int64(-1) << 62 // the rows of a message share a minute or two
	for i := range rows {
		row := &rows[i]
		if row.First {
			continue // baselines are not rolled
		}
		if row.TimeMs <= limit && row.TimeMs > r.watermark {
			r.watermark = row.TimeMs
		}
		if m := floorDiv(row.TimeMs, 60_000); m != last {
			last = m
			r.minutes[m] = r.mark
		}
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// run rolls every r.every until ctx ends, then once more with everything
// pending, within ShutdownTimeout, so a sink stopped cleanly leaves the
// rollups whole.
func (r *roller) run(ctx context.Context, final time.Duration) {
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), final)
			defer cancel()
			r.tick(fctx, true)
			return
		case <-t.C:
			r.tick(ctx, false)
		}
	}
}

// tick rolls what is due; all: everything pending (shutdown).
func (r *roller) tick(ctx context.Context, all bool) {
	if !r.recover(ctx) {
		return
	}
	r.mu.Lock()
	idle := !r.stored
	r.stored = false
	wm := r.watermark
	r.mu.Unlock()
	due := func(start int64, step time.Duration) bool {
		return all || idle || start*step.Milliseconds()+step.Milliseconds()+r.delay.Milliseconds() <= wm
	}
	r.roll(ctx, chdb.Minute, r.minutes, func(m int64) bool { return due(m, time.Minute) }, &r.minStats, func(m int64) {
		r.mark++
		r.hours[floorDiv(m, 60)] = r.mark
	})
	// An hour waits for its minutes: rolled before them it misses rows.
	var busy map[int64]bool // hours with minutes pending, built by the first call (under r.mu)
	r.roll(ctx, chdb.Hour, r.hours, func(h int64) bool {
		if !due(h, time.Hour) {
			return false
		}
		if busy == nil {
			busy = map[int64]bool{}
			for m := range r.minutes {
				busy[floorDiv(m, 60)] = true
			}
		}
		return !busy[h]
	}, &r.hourStats, func(h int64) {
		r.mark++
		r.days[floorDiv(h, 24)] = r.mark
	})
	// A day is rolled again after any of its hours was, not only once it
	// is over: trends read whole days from rollup_day. It waits for its
	// hours that are due (rolled before them it misses rows); the hour
	// still filling is not due, and marks the day again when it is rolled.
	var busyDays map[int64]bool
	r.roll(ctx, chdb.Day, r.days, func(d int64) bool {
		if busyDays == nil {
			busyDays = map[int64]bool{}
			for h := range r.hours {
				if due(h, time.Hour) {
					busyDays[floorDiv(h, 24)] = true
				}
			}
		}
		return !busyDays[d]
	}, &r.dayStats, nil)
}

// roll rolls the due keys of pending (minutes, hours or days), a run of
// consecutive keys per statement, and forgets those not marked again
// meanwhile; rolled is called for each of them under r.mu.
func (r *roller) roll(ctx context.Context, kind chdb.Rollup, pending map[int64]uint64, due func(int64) bool, st *RollupStats, rolled func(int64)) {
	r.mu.Lock()
	var keys []int64
	marks := map[int64]uint64{}
	for k, mark := range pending {
		if due(k) {
			keys = append(keys, k)
			marks[k] = mark
		}
	}
	r.mu.Unlock()
	slices.Sort(keys)
	step := kind.Step()
	span := int64(maxRollSpan / step)
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j] == keys[j-1]+1 && keys[j]-keys[i] < span {
			j++
		}
		from := time.Unix(keys[i]*int64(step/time.Second), 0)
		to := time.Unix((keys[j-1]+1)*int64(step/time.Second), 0)
		start := time.Now()
		err := r.rollRange(ctx, kind, from, to)
		took := time.Since(start).Seconds()
		r.mu.Lock()
		st.Seconds += took
		if err != nil {
			st.Failures++
			r.mu.Unlock()
			if ctx.Err() == nil {
				r.log.Warn("sink: rolling up failed, trying again at the next tick", "rollup", string(kind), "from", from.UTC(), "to", to.UTC(), "err", err)
			}
			return
		}
		st.Rolls++
		for _, k := range keys[i:j] {
			if pending[k] == marks[k] {
				delete(pending, k)
			}
			if rolled != nil {
				rolled(k)
			}
		}
		r.mu.Unlock()
		i = j
	}
}

// recover marks, once, the minutes a sink before this one may have left
// unrolled; it returns false while ClickHouse cannot say (tried again at
// the next tick).
func (r *roller) recover(ctx context.Context) bool {
	r.mu.Lock()
	done := r.recovered
	r.mu.Unlock()
	if done {
		return true
	}
	minutes, err := r.unrolled(ctx, time.Now().Add(-r.lookback), r.lookback)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("sink: reading which minutes to roll up after a start failed, trying again at the next tick", "err", err)
		}
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range minutes {
		r.mark++
		r.minutes[floorDiv(m.Unix(), 60)] = r.mark
	}
	r.recovered = true
	if len(minutes) > 0 {
		r.log.Info("sink: rolling up again the minutes a previous sink may have left", "minutes", len(minutes), "from", minutes[0].UTC())
	}
	return true
}

func (r *roller) snapshots() map[string]RollupStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, h, d := r.minStats, r.hourStats, r.dayStats
	m.Pending, h.Pending, d.Pending = len(r.minutes), len(r.hours), len(r.days)
	return map[string]RollupStats{string(chdb.Minute): m, string(chdb.Hour): h, string(chdb.Day): d}
}

// noteStored hands the rows of an acked counters message to the roller.
func (s *Sink) noteStored(rows []SampleRow) {
	if s.roll != nil {
		s.roll.note(rows)
	}
}
