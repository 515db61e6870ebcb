package schemas

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTimeBounds(t *testing.T) {
	const (
		minute = Millis(time.Minute / time.Millisecond)
		day    = 24 * 60 * minute
	)
	stored := MillisOf(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	live := TimeBounds{Stored: stored, MaxAhead: DefaultMaxAhead, MaxBehind: DefaultMaxBehind}
	for _, tc := range []struct {
		name string
		b    TimeBounds
		t    Millis
		want string // "" accepted, else a part of the error
	}{
		{"at the store time", live, stored, ""},
		{"a reading's age", live, stored - 3000, ""},
		{"clock skew ahead", live, stored + 9*minute, ""},
		{"just past the bound ahead", live, stored + 10*minute + 1, "ahead of the data clock none and the store time"},
		{"far future", live, stored + 365*day, "ahead"},
		{"spooled for days", live, stored - 6*day, ""},
		{"just past the bound behind", live, stored - 7*day - 1, "behind the store time"},
		{"the year 2000", live, MillisOf(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)), "behind"},
		{"not after 1970", live, 0, "not after 1970"},
		{"negative", live, -5, "not after 1970"},
		// A fleet played faster than real time: the data clock, not the
		// store time, says what "now" is.
		{"simulated fleet ahead", TimeBounds{Clock: stored + 60*minute, Stored: stored, MaxAhead: DefaultMaxAhead, MaxBehind: DefaultMaxBehind}, stored + 65*minute, ""},
		{"past the simulated clock", TimeBounds{Clock: stored + 60*minute, Stored: stored, MaxAhead: DefaultMaxAhead}, stored + 71*minute, "ahead"},
		// A replay: the trace is months older than its store time, and an
		// in-process run sets no bound behind.
		{"replay of an old trace", TimeBounds{Stored: stored, MaxAhead: DefaultMaxAhead}, stored - 200*day, ""},
		{"replay line after today", TimeBounds{Clock: stored - 200*day, Stored: stored, MaxAhead: DefaultMaxAhead}, stored + day, "ahead"},
		// Nothing known: only the absolute check of the decoders applies.
		{"no clock at all", TimeBounds{MaxAhead: DefaultMaxAhead, MaxBehind: DefaultMaxBehind}, stored + 1000*day, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.b.Check(tc.t)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check(%v) = %v, want accepted", tc.t, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check(%v) = %v, want an error with %q", tc.t, err, tc.want)
			}
			if !errors.Is(err, ErrImplausibleTime) {
				t.Fatalf("error %v does not wrap ErrImplausibleTime", err)
			}
		})
	}
}

func TestTimeBoundsLimits(t *testing.T) {
	for _, tc := range []struct {
		name          string
		b             TimeBounds
		ahead, behind Millis
	}{
		{"nothing known", TimeBounds{MaxAhead: time.Minute, MaxBehind: time.Hour}, 0, 0},
		{"store time", TimeBounds{Stored: 1_000_000_000, MaxAhead: time.Minute, MaxBehind: time.Hour}, 1_000_060_000, 1_000_000_000 - 3_600_000},
		{"data clock later", TimeBounds{Clock: 2_000_000_000, Stored: 1_000_000_000, MaxAhead: time.Minute, MaxBehind: time.Hour}, 2_000_060_000, 1_000_000_000 - 3_600_000},
		{"no bound behind", TimeBounds{Stored: 1_000_000_000, MaxAhead: time.Minute}, 1_000_060_000, 0},
		{"clock without store time", TimeBounds{Clock: 1_000_000_000, MaxAhead: time.Minute, MaxBehind: time.Hour}, 1_000_060_000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.b.AheadLimit(); got != tc.ahead {
				t.Errorf("AheadLimit() = %d, want %d", got, tc.ahead)
			}
			if got := tc.b.BehindLimit(); got != tc.behind {
				t.Errorf("BehindLimit() = %d, want %d", got, tc.behind)
			}
		})
	}
}
