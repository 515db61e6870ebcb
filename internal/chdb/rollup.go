package chdb

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas/ddl"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// Rollups (migration 0012): rollup_minute holds one row per port per minute
// rolled from port_samples (without FINAL, a third of the cost: the sink
// never inserts a sample twice), rollup_hour one per port per hour rolled
// from the minutes. A roll of a range is one INSERT ... SELECT
// (schemas/ddl/rollups); run again it writes the same keys with at least as
// many samples, and ReplacingMergeTree(samples) keeps the newest. So rolling
// is idempotent, and whoever rolls (the sink, `rdmawatch rollup`) needs no
// bookkeeping beyond which ranges may have changed.

// rollup_day (migration 0017) holds one row per port per day rolled from
// the hours, so trends by day or week read a 24th of the rows; rolling a
// day also rolls its groups into rollup_day_group (0020, day_group.sql),
// so trends over the whole fabric read a row per group-day.

// Rollup names one of the rollups.
type Rollup string

// The rollups, by the file that rolls them.
const (
	Minute Rollup = "minute"
	Hour   Rollup = "hour"
	Day    Rollup = "day"
)

// Rollups are the rollups in the order they must be rolled: each from the
// one before.
var Rollups = []Rollup{Minute, Hour, Day}

// Step is the span one rollup row covers. A day is a day of the server's
// time zone: day.sql widens whatever range it is given to whole days there,
// so the UTC truncation Roll does cannot roll part of a day.
func (r Rollup) Step() time.Duration {
	switch r {
	case Day:
		return 24 * time.Hour
	case Hour:
		return time.Hour
	}
	return time.Minute
}

// files are the statements that roll r, in order: a day's groups are
// rolled from its port-days, so after them.
func (r Rollup) files() []string {
	if r == Day {
		return []string{"day", "day_group"}
	}
	return []string{string(r)}
}

func (r Rollup) stmts() ([]string, error) {
	stmts, err := rollupStmts()
	if err != nil {
		return nil, err
	}
	s, ok := stmts[r]
	if !ok {
		return nil, fmt.Errorf("no rollup %q: minute, hour or day", r)
	}
	return s, nil
}

// rollupStmts reads the roll statements once (a sink rolls every few
// seconds), comments and blank lines dropped.
var rollupStmts = sync.OnceValues(func() (map[Rollup][]string, error) {
	out := map[Rollup][]string{}
	for _, r := range Rollups {
		for _, name := range r.files() {
			data, err := fs.ReadFile(ddl.Rollups, path.Join("rollups", name+".sql"))
			if err != nil {
				return nil, fmt.Errorf("rollup %s: %w", r, err)
			}
			var b strings.Builder
			for _, line := range strings.Split(string(data), "\n") {
				if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
					continue
				}
				b.WriteString(line)
				b.WriteByte('\n')
			}
			out[r] = append(out[r], b.String())
		}
	}
	return out, nil
})

// unrolledSearch is how far back UnrolledMinutes looks for the newest
// rolled minute.
const unrolledSearch = 7 * 24 * time.Hour

// Roll rolls the rows of [from, to) into the rollup r, in the connection's
// database. from and to are truncated to r's step (to rounded up), so a
// partial range rolls whole minutes or hours. In cluster mode the rollup
// rows are written through the Distributed table synchronously, so a roll
// that returns nil has them on their shards.
func Roll(ctx context.Context, conn Conn, r Rollup, from, to time.Time) error {
	stmts, err := r.stmts()
	if err != nil {
		return err
	}
	step := r.Step()
	from = from.Truncate(step)
	if t := to.Truncate(step); t.Before(to) {
		to = t.Add(step)
	}
	if !from.Before(to) {
		return nil
	}
	ctx = ch.Context(ctx, ch.WithSettings(ch.Settings{"insert_distributed_sync": 1}))
	for i, stmt := range stmts {
		args := []any{ch.Named("from", from.Unix()), ch.Named("to", to.Unix())}
		if r.files()[i] == "day_group" {
			// The roll's number (day_group.sql): its start in nanoseconds,
			// so every roll has its own and a later roll a larger one, also
			// two sinks rolling the same day in the same second.
			args = append(args, ch.Named("roll", uint64(time.Now().UnixNano())))
		}
		if err := conn.Exec(ctx, stmt, args...); err != nil {
			return fmt.Errorf("roll %s rollup (%s.sql) of %s..%s: %w", r, r.files()[i], from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), err)
		}
	}
	return nil
}

// UnrolledMinutes returns the minutes from since on that hold samples
// (baselines aside), oldest first: what a sink starting up rolls again,
// because the one before it may have died with them pending. The newest
// minute already rolled (in the week before since: the day partitions keep
// the read small) is read first, and since is moved back to it minus
// lookback when that is earlier, so a sink that was down long still finds
// the minutes written before it died.
func UnrolledMinutes(ctx context.Context, conn Conn, since time.Time, lookback time.Duration) ([]time.Time, error) {
	var newest time.Time
	if err := conn.QueryRow(ctx, "SELECT max(minute) FROM rollup_minute WHERE minute >= toDateTime(@floor)",
		ch.Named("floor", since.Add(-unrolledSearch).Unix())).Scan(&newest); err != nil {
		return nil, fmt.Errorf("newest rolled minute: %w", err)
	}
	if !newest.IsZero() && newest.Unix() > 0 && newest.Add(-lookback).Before(since) {
		since = newest.Add(-lookback)
	}
	rows, err := conn.Query(ctx, "SELECT DISTINCT toStartOfMinute(ts) AS m FROM port_samples WHERE ts >= toDateTime(@since) AND first = 0 ORDER BY m",
		ch.Named("since", since.Unix()))
	if err != nil {
		return nil, fmt.Errorf("minutes with samples since %s: %w", since.UTC().Format(time.RFC3339), err)
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var m time.Time
		if err := rows.Scan(&m); err != nil {
			return nil, fmt.Errorf("minutes with samples: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("minutes with samples: %w", err)
	}
	return out, nil
}
