package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
)

// TestRollerSchedule drives the roller tick by tick with recorded rolls:
// which ranges it rolls, and when, as rows of given data times are stored.
func TestRollerSchedule(t *testing.T) {
	base := time.Date(2026, 3, 14, 8, 0, 0, 0, time.UTC) // a minute and an hour start
	at := func(d time.Duration) int64 { return base.Add(d).UnixMilli() }
	// step is one tick: rows stored before it (data times), whether ClickHouse fails, the rolls it must make.
	type step struct {
		rows  []int64
		first bool // the rows are baselines
		fail  bool
		want  []string
	}
	cases := []struct {
		name     string
		recover  []time.Duration // minutes a previous sink left
		steps    []step
		pendingM int // minutes still pending at the end
	}{{
		name: "a minute is rolled once data time is the delay past its end",
		steps: []step{
			{rows: []int64{at(10 * time.Second), at(50 * time.Second)}},
			{rows: []int64{at(100 * time.Second)}},                                       // 08:01:40: 08:00 not closed (delay 1m)
			{rows: []int64{at(120 * time.Second)}, want: []string{"minute 08:00-08:01"}}, // 08:02:00
			{rows: []int64{at(150 * time.Second)}},
		},
		pendingM: 2,
	}, {
		name: "late rows roll their minute again; consecutive minutes go in one roll",
		steps: []step{
			{rows: []int64{at(0), at(time.Minute), at(2 * time.Minute), at(4 * time.Minute)}, want: []string{"minute 08:00-08:03"}},
			{rows: []int64{at(30 * time.Second), at(4*time.Minute + time.Second)}, want: []string{"minute 08:00-08:01"}},
		},
		pendingM: 1,
	}, {
		name: "rows of a minute rolled while quiet roll it again",
		steps: []step{
			{rows: []int64{at(0)}},
			{want: []string{"minute 08:00-08:01", "hour 08:00-09:00", "day 03-14"}},
			{rows: []int64{at(time.Second)}},
			{want: []string{"minute 08:00-08:01", "hour 08:00-09:00", "day 03-14"}},
		},
	}, {
		name: "a quiet tick rolls everything pending, then the hour from its minutes",
		steps: []step{
			{rows: []int64{at(0), at(time.Minute)}},
			{want: []string{"minute 08:00-08:02", "hour 08:00-09:00", "day 03-14"}},
			{},
		},
	}, {
		name: "baselines are not rolled and do not move data time",
		steps: []step{
			{rows: []int64{at(0)}},
			{rows: []int64{at(10 * time.Minute)}, first: true},
			{want: []string{"minute 08:00-08:01", "hour 08:00-09:00", "day 03-14"}},
		},
	}, {
		name: "a failed roll stays pending and is tried at the next tick",
		steps: []step{
			{rows: []int64{at(0)}},
			{fail: true, want: []string{"minute 08:00-08:01 failed"}},
			{want: []string{"minute 08:00-08:01", "hour 08:00-09:00", "day 03-14"}},
		},
	}, {
		name: "an hour waits for its minutes: closed by data time, rolled after the minute",
		steps: []step{
			{rows: []int64{at(59 * time.Minute)}},
			{rows: []int64{at(62 * time.Minute)}, want: []string{"minute 08:59-09:00", "hour 08:00-09:00", "day 03-14"}},
		},
		pendingM: 1,
	}, {
		name:    "a start rolls again what the previous sink left",
		recover: []time.Duration{0, time.Minute, 3 * time.Minute},
		steps: []step{
			{want: []string{"minute 08:00-08:02", "minute 08:03-08:04", "hour 08:00-09:00", "day 03-14"}},
		},
	}, {
		name: "a day is rolled after each of its hours, not held by the hour still filling",
		steps: []step{
			{rows: []int64{at(0)}},
			{rows: []int64{at(62 * time.Minute)}, want: []string{"minute 08:00-08:01", "hour 08:00-09:00", "day 03-14"}},
			{rows: []int64{at(64 * time.Minute)}, want: []string{"minute 09:02-09:03"}}, // hour 09:00 pending, not due: no day roll
		},
		pendingM: 1,
	}, {
		name: "a sample far ahead of the wall clock does not close every minute",
		steps: []step{
			{rows: []int64{at(0)}},
			{rows: []int64{time.Now().Add(24 * time.Hour).UnixMilli()}},
		},
		pendingM: 2,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRoller(nil, Config{}.withDefaults(), slog.New(slog.DiscardHandler))
			var calls []string
			fail := false
			r.rollRange = func(_ context.Context, k chdb.Rollup, from, to time.Time) error {
				call := rollCall(k, from, to)
				if fail {
					calls = append(calls, call+" failed")
					return errors.New("clickhouse down")
				}
				calls = append(calls, call)
				return nil
			}
			r.unrolled = func(context.Context, time.Time, time.Duration) ([]time.Time, error) {
				var out []time.Time
				for _, d := range c.recover {
					out = append(out, base.Add(d))
				}
				return out, nil
			}
			for i, s := range c.steps {
				var rows []SampleRow
				for _, ms := range s.rows {
					rows = append(rows, SampleRow{TimeMs: ms, First: s.first})
				}
				r.note(rows)
				calls, fail = nil, s.fail
				r.tick(context.Background(), false)
				if !reflect.DeepEqual(calls, s.want) {
					t.Fatalf("tick %d rolled [%s], want [%s]", i+1, strings.Join(calls, ", "), strings.Join(s.want, ", "))
				}
			}
			if n := len(r.minutes); n != c.pendingM {
				t.Errorf("%d minutes pending at the end, want %d", n, c.pendingM)
			}
		})
	}
}

// rollCall names a recorded roll: its rollup and range, a day's by date.
func rollCall(k chdb.Rollup, from, to time.Time) string {
	if k == chdb.Day {
		return fmt.Sprintf("%s %s", k, from.UTC().Format("01-02"))
	}
	return fmt.Sprintf("%s %s-%s", k, from.UTC().Format("15:04"), to.UTC().Format("15:04"))
}

// TestRollerShutdownRollsEverything: the last tick, at shutdown, rolls the
// minutes data time has not closed yet, their hour and its day.
func TestRollerShutdownRollsEverything(t *testing.T) {
	r := newRoller(nil, Config{RollupEvery: time.Hour}.withDefaults(), slog.New(slog.DiscardHandler))
	var calls []string
	r.rollRange = func(_ context.Context, k chdb.Rollup, from, to time.Time) error {
		calls = append(calls, rollCall(k, from, to))
		return nil
	}
	r.unrolled = func(context.Context, time.Time, time.Duration) ([]time.Time, error) { return nil, nil }
	base := time.Date(2026, 3, 14, 8, 0, 0, 0, time.UTC)
	r.note([]SampleRow{{TimeMs: base.UnixMilli()}, {TimeMs: base.Add(time.Minute).UnixMilli()}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.run(ctx, time.Second)
	want := []string{"minute 08:00-08:02", "hour 08:00-09:00", "day 03-14"}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("rolled %v, want %v", calls, want)
	}
}

// TestRollerKeepsMinutesMarkedDuringARoll: rows of a minute that land while
// that minute is being rolled (the roll may have read the table before
// them) keep the minute pending for the next tick.
func TestRollerKeepsMinutesMarkedDuringARoll(t *testing.T) {
	r := newRoller(nil, Config{}.withDefaults(), slog.New(slog.DiscardHandler))
	base := time.Date(2026, 3, 14, 8, 0, 0, 0, time.UTC)
	r.unrolled = func(context.Context, time.Time, time.Duration) ([]time.Time, error) { return nil, nil }
	rolls, hourRolls := 0, 0
	r.rollRange = func(_ context.Context, k chdb.Rollup, _, _ time.Time) error {
		if k == chdb.Hour {
			hourRolls++
		}
		if k == chdb.Minute {
			rolls++
			if rolls == 1 {
				r.note([]SampleRow{{TimeMs: base.Add(20 * time.Second).UnixMilli()}})
			}
		}
		return nil
	}
	r.note([]SampleRow{{TimeMs: base.UnixMilli()}})
	r.tick(context.Background(), true)
	if len(r.minutes) != 1 || hourRolls != 0 {
		t.Fatalf("after a roll during which rows landed: %d minutes pending, %d hour rolls; want 1 and 0 (the hour waits for its minute)", len(r.minutes), hourRolls)
	}
	r.tick(context.Background(), true)
	if len(r.minutes) != 0 || len(r.hours) != 0 || rolls != 2 || hourRolls != 1 {
		t.Errorf("next tick: %d minutes and %d hours pending, %d minute and %d hour rolls; want 0, 0, 2, 1", len(r.minutes), len(r.hours), rolls, hourRolls)
	}
}
