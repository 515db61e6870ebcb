package chdb

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Retention is how long each table keeps its rows. 18.16 has no TTL, so
// `rdmawatch retention` drops the partitions whose every row is older than
// the table's limit; newer servers also have TTL at the defaults (0008).
type Retention struct {
	Raw    time.Duration // port_samples (day partitions)
	Minute time.Duration // rollup_minute, and port_minute before 0012 (day partitions)
	Hour   time.Duration // rollup_hour, and port_hour before 0012 (month partitions)
	Day    time.Duration // rollup_day and rollup_day_group (month partitions)
}

// DefaultRetention: raw 14 days, minute rollup 90 days, hour rollup 2
// years, day rollup 5 years (the TTL of 0013 and 0018).
var DefaultRetention = Retention{Raw: 14 * 24 * time.Hour, Minute: 90 * 24 * time.Hour, Hour: 730 * 24 * time.Hour, Day: 1825 * 24 * time.Hour}

// Partition is one partition of a table retention manages.
type Partition struct {
	Table     string
	ID        string    // partition value, e.g. 20260314 or 202603
	End       time.Time // first instant after the partition's span (UTC)
	Rows      uint64
	Bytes     uint64
	Dropped   bool
	KeepUntil time.Time // when retention will drop it
}

// retained lists the tables retention manages and how their partition ids
// read: toYYYYMMDD or toYYYYMM of the row time.
var retained = []struct {
	table, layout string
	limit         func(Retention) time.Duration
}{
	{"port_samples", "20060102", func(r Retention) time.Duration { return r.Raw }},
	{"rollup_minute", "20060102", func(r Retention) time.Duration { return r.Minute }},
	{"rollup_hour", "200601", func(r Retention) time.Duration { return r.Hour }},
	{"rollup_day", "200601", func(r Retention) time.Duration { return r.Day }},
	{"rollup_day_group", "200601", func(r Retention) time.Duration { return r.Day }},
	// The rollups of releases before 0012, no longer written: their data
	// ages out like the rollups'.
	{"port_minute", "20060102", func(r Retention) time.Duration { return r.Minute }},
	{"port_hour", "200601", func(r Retention) time.Duration { return r.Hour }},
}

// ApplyRetention drops, in the connection's database, every partition of
// port_samples, the rollups (and the rollups before 0012) that ends at or before now minus
// the table's limit (a limit of 0 keeps the table whole). With dryRun it
// only reports. It returns every partition it looked at, dropped or kept,
// so the caller can print what happened.
//
// Partitions are cut on the server's time zone (toYYYYMMDD), read here as
// UTC: on a server in another zone a partition is kept up to a day longer.
//
// A database migrated in cluster mode is recognised by itself (layout.go):
// the partitions are those of every shard's <table>_local (one replica per
// shard, through the cluster() table function; rows and bytes are summed
// over the shards), and each is dropped on every shard (layout.alter):
// replication carries the drop to the other replicas of a shard, also to
// one that is down and comes back later.
func ApplyRetention(ctx context.Context, conn Conn, r Retention, now time.Time, dryRun bool) ([]Partition, error) {
	l, err := layoutOf(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	var out []Partition
	for _, t := range retained {
		parts, err := partitions(ctx, conn, l, t.table, t.layout)
		if err != nil {
			return out, err
		}
		limit := t.limit(r)
		for _, p := range parts {
			if limit > 0 {
				p.KeepUntil = p.End.Add(limit)
				if !now.Before(p.KeepUntil) {
					p.Dropped = true
					if !dryRun {
						if err := conn.Exec(ctx, l.alter(t.table)+" DROP PARTITION "+p.ID); err != nil {
							return out, fmt.Errorf("retention: drop partition %s of %s: %w", p.ID, t.table, err)
						}
					}
				}
			}
			out = append(out, p)
		}
	}
	return out, nil
}

func partitions(ctx context.Context, conn Conn, l layout, table, idLayout string) ([]Partition, error) {
	rows, err := conn.Query(ctx, `SELECT partition, sum(rows), sum(bytes_on_disk)
FROM `+l.partsSource()+`
WHERE database = @db AND table = @table AND active
GROUP BY partition ORDER BY partition`, namedArg("db", l.db), namedArg("table", l.dataTable(table)))
	if err != nil {
		return nil, fmt.Errorf("retention: partitions of %s: %w", table, err)
	}
	defer rows.Close()
	var out []Partition
	for rows.Next() {
		var p Partition
		if err := rows.Scan(&p.ID, &p.Rows, &p.Bytes); err != nil {
			return nil, fmt.Errorf("retention: partitions of %s: %w", table, err)
		}
		if _, err := strconv.ParseUint(p.ID, 10, 32); err != nil {
			return nil, fmt.Errorf("retention: %s partition %q is not a %s date: was the table created by rdmawatch?", table, p.ID, idLayout)
		}
		start, err := time.Parse(idLayout, p.ID)
		if err != nil {
			return nil, fmt.Errorf("retention: %s partition %q is not a %s date: %w", table, p.ID, idLayout, err)
		}
		p.Table = table
		if idLayout == "200601" {
			p.End = start.AddDate(0, 1, 0)
		} else {
			p.End = start.AddDate(0, 0, 1)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retention: partitions of %s: %w", table, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
