package sink

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// The sink's check of data times: one rule with the processor's
// (schemas.TimeBounds), applied to a whole message, its data clock moved
// only by messages it accepts.
func TestCheckSampleTimes(t *testing.T) {
	stored := schemas.MillisOf(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	const (
		minute = int64(time.Minute / time.Millisecond)
		day    = 24 * 60 * minute
	)
	at := func(ts ...int64) []SampleRow {
		rows := make([]SampleRow, len(ts))
		for i, t := range ts {
			rows[i] = SampleRow{Node: "gpu-001", Device: "mlx5_0", Port: uint16(i + 1), TimeMs: t}
		}
		return rows
	}
	now := int64(stored)
	// flood is one message of 1024 ports on distinct days (the partitions
	// of port_samples), all before the store time.
	var flood []int64
	for i := range 1024 {
		flood = append(flood, now-int64(i)*day)
	}
	for _, tc := range []struct {
		name      string
		maxBehind time.Duration
		clock     int64 // the data clock before the message
		stored    schemas.Millis
		rows      []SampleRow
		want      string // "" accepted, else a part of the reason
		clockTo   int64  // the data clock after
	}{
		{"live reading", schemas.DefaultMaxBehind, now - 10_000, stored, at(now-2000, now-1500), "", now - 1500},
		{"older than the clock moves nothing", schemas.DefaultMaxBehind, now, stored, at(now - 60_000), "", now},
		{"clock skew ahead", schemas.DefaultMaxBehind, 0, stored, at(now + 9*minute), "", now + 9*minute},
		{"simulated fleet an hour ahead", schemas.DefaultMaxBehind, now + 60*minute, stored, at(now + 60*minute + 10_000), "", now + 60*minute + 10_000},
		{"far ahead", schemas.DefaultMaxBehind, now, stored, at(now, now+2*day), "implausible time: 1 of 2 samples; first: port mlx5_0/2", now},
		{"flood of days", schemas.DefaultMaxBehind, now, stored, at(flood...), "implausible time: 1016 of 1024 samples; first: port mlx5_0/9", now},
		{"flood of days, no bound behind", 0, now, stored, at(flood...), "", now},
		{"spooled six days", schemas.DefaultMaxBehind, now, stored, at(now - 6*day), "", now},
		{"store time unknown", schemas.DefaultMaxBehind, now, 0, at(now - 300*day), "", now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Sink{cfg: Config{MaxBehind: tc.maxBehind}.withDefaults()}
			s.dataClock.Store(tc.clock)
			err := s.checkTimes(tc.stored, tc.rows)
			if tc.want == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("checkTimes = %v, want a reason with %q", err, tc.want)
				}
				if !errors.Is(err, schemas.ErrImplausibleTime) {
					t.Fatalf("reason %v does not wrap ErrImplausibleTime", err)
				}
			}
			if got := s.dataClock.Load(); got != tc.clockTo {
				t.Fatalf("data clock %d after the message, want %d", got, tc.clockTo)
			}
		})
	}
}

// Ready names every reason the sink cannot write, and is nil when there is
// none.
func TestReadyReasons(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name     string
		notReady *string
		probe    *string
		write    []string // per table: its last write error
		want     []string // "" alone: ready
	}{
		{"ready", str(""), nil, []string{"", ""}, []string{""}},
		{"not started", str("not started"), nil, nil, []string{"not started"}},
		{"schema first", str("no schema_migrations"), str("clickhouse does not answer"), []string{"port_samples: the last write failed"}, []string{"no schema_migrations"}},
		{"probe", str(""), str("clickhouse user is read-only (readonly=1)"), []string{"", ""}, []string{"read-only"}},
		{"probe cleared", str(""), str(""), nil, []string{""}},
		{"a table's write", str(""), nil, []string{"", "events: the last write failed: EOF"}, []string{"events: the last write failed"}},
		{"both", str(""), str("clickhouse does not answer: dial tcp"), []string{"port_samples: the last write failed: i/o timeout"}, []string{"does not answer", "port_samples"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Sink{}
			s.notReady.Store(tc.notReady)
			s.probeErr.Store(tc.probe)
			for i, w := range tc.write {
				p := &table[SampleRow]{writer: &tableWriter[SampleRow]{tableSpec: tableSpec[SampleRow]{name: "t" + string(rune('0'+i))}}}
				if w != "" {
					p.writer.writeErr.Store(&w)
				}
				s.pipes = append(s.pipes, p)
			}
			err := s.Ready()
			if tc.want[0] == "" {
				if err != nil {
					t.Fatalf("Ready() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Ready() = nil, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Ready() = %q, want it to name %q", err, w)
				}
			}
		})
	}
}
