package chdb_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
)

// insertHours writes one rollup_hour row per node and hour, as the sink's
// hour roll would: 100 Gb/s ports at util of capacity, a pre-FEC BER of
// corrected/1e12.
func insertHours(ctx context.Context, t *testing.T, conn driver.Conn, from time.Time, n int, nodes []string, util float64, corrected uint64) {
	t.Helper()
	for i := 0; i < n; i++ {
		for _, node := range nodes {
			bytes := uint64(util * 100e9 / 8 * 3600)
			if err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO rollup_hour (hour, node, device, port, rate_gbps, samples, interval_ms, rcv_bytes, xmit_bytes,
  rx_bits_phy, rx_corrected_bits_phy, rolled_at)
SELECT toDateTime(%d), '%s', 'mlx5_0', toUInt16(1), arrayReduce('maxState', [toFloat64(100)]), toUInt64(360),
  arrayReduce('sumState', [toInt64(3600000)]), arrayReduce('sumState', [toUInt64(%d)]), arrayReduce('sumState', [toUInt64(0)]),
  arrayReduce('sumState', [toUInt64(1000000000000)]), arrayReduce('sumState', [toUInt64(%d)]), toDateTime(1)`,
				from.Add(time.Duration(i)*time.Hour).Unix(), node, bytes, corrected)); err != nil {
				t.Fatalf("rollup_hour %s: %v", node, err)
			}
		}
	}
}

// TestTrendsDaysRolledBeforeHistograms: a database whose day rollup was
// rolled before migration 0019 has port-days without histograms. Their
// buckets' quantiles read NULL (never the quantiles of the other port-days
// alone), the other columns as before; rolled again (the sink rolls a day
// after each of its hours; `rdmawatch rollup`), a day has numbers.
func TestTrendsDaysRolledBeforeHistograms(t *testing.T) {
	t.Parallel()
	conn := chtest.Open(t, chtest.NewDatabase(t, chtest.DSN(t)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := chdb.MigrateUpTo(ctx, conn, 16); err != nil {
		t.Fatal(err)
	}
	// Monday 2026-03-02 and Tuesday: 0017 rolls them into rollup_day as
	// the release before 0019 did.
	mon := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	tue := mon.Add(24 * time.Hour)
	insertHours(ctx, t, conn, mon, 48, []string{"n1", "n2"}, 0.25, 1000)
	if _, err := chdb.MigrateUpTo(ctx, conn, 18); err != nil {
		t.Fatal(err)
	}
	applied, err := chdb.MigrateUpTo(ctx, conn, 19)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) == 0 || !strings.HasPrefix(applied[len(applied)-1], "0019_") {
		t.Fatalf("applied %v, want 0019 last", applied)
	}
	// 0020 rolls the group-days from those port-days: their fewest hours
	// are 0, so the buckets read from it are NULL alike.
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	q, err := chdb.QueryByName("trends")
	if err != nil {
		t.Fatal(err)
	}
	// Bucket, ports, pre-FEC BER worst and the four quantiles ("NULL"
	// where NULL), per node.
	read := func(bucket string) []string {
		t.Helper()
		rows, err := conn.Query(ctx, q.SQL,
			ch.Named("from", mon.Unix()), ch.Named("to", mon.Add(72*time.Hour).Unix()),
			ch.Named("node", ""), ch.Named("by", "node"), ch.Named("bucket", bucket))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols := rows.Columns()
		idx := map[string]int{}
		for i, c := range cols {
			idx[c] = i
		}
		var out []string
		for rows.Next() {
			vals := make([]any, len(cols))
			for i, ct := range rows.ColumnTypes() {
				vals[i] = reflect.New(ct.ScanType()).Interface()
			}
			if err := rows.Scan(vals...); err != nil {
				t.Fatal(err)
			}
			f := func(c string) string {
				switch v := vals[idx[c]].(type) {
				case **float64:
					if *v == nil {
						return "NULL"
					}
					return fmt.Sprint(**v)
				case *float64:
					return fmt.Sprint(*v)
				}
				return fmt.Sprintf("%T", vals[idx[c]])
			}
			out = append(out, fmt.Sprintf("%s %s ports %d worst %s p50 %s p95 %s ber %s post %s",
				(*vals[idx["bucket"]].(*time.Time)).UTC().Format("01-02"), *vals[idx["group"]].(*string), *vals[idx["ports"]].(*uint64),
				f("pre_fec_ber_worst"), f("utilisation_p50"), f("utilisation_p95"), f("pre_fec_ber_median"), f("post_fec_ber_median")))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(when, bucket string, want []string) {
		t.Helper()
		if got := read(bucket); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s, per %s:\n%s\nwant\n%s", when, bucket, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	null := "p50 NULL p95 NULL ber NULL post NULL"
	num := "p50 0.25 p95 0.25 ber 1e-09 post 0"
	check("rolled before 0019", "day", []string{
		"03-02 n1 ports 1 worst 1e-09 " + null, "03-02 n2 ports 1 worst 1e-09 " + null,
		"03-03 n1 ports 1 worst 1e-09 " + null, "03-03 n2 ports 1 worst 1e-09 " + null,
	})
	// The hour buckets read the hour rollup: exact, whatever the days.
	if got := read("hour"); len(got) != 96 || !strings.HasSuffix(got[0], "p50 0.25 p95 0.25 ber 1e-09 post 0") {
		t.Errorf("per hour: %d rows, first %q", len(got), got[0])
	}
	// Tuesday rolled again: its buckets have numbers, Monday's still NULL,
	// and the week holding both NULL.
	if err := chdb.Roll(ctx, conn, chdb.Day, tue, tue.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	check("Tuesday rolled again", "day", []string{
		"03-02 n1 ports 1 worst 1e-09 " + null, "03-02 n2 ports 1 worst 1e-09 " + null,
		"03-03 n1 ports 1 worst 1e-09 " + num, "03-03 n2 ports 1 worst 1e-09 " + num,
	})
	check("Tuesday rolled again", "week", []string{"03-02 n1 ports 1 worst 1e-09 " + null, "03-02 n2 ports 1 worst 1e-09 " + null})
	if err := chdb.Roll(ctx, conn, chdb.Day, mon, tue); err != nil {
		t.Fatal(err)
	}
	check("both rolled again", "week", []string{"03-02 n1 ports 1 worst 1e-09 " + num, "03-02 n2 ports 1 worst 1e-09 " + num})
}

// TestTrendsGroupsOfTheRoll: without --node, trends' whole days come from
// rollup_day_group, grouped by the topology loaded when the day was rolled.
// A port moved to another leaf counts in its old leaf until its day is
// rolled again, and then only in the new one: a group the move emptied is
// left out (each day's newest roll only), not summed with the new.
func TestTrendsGroupsOfTheRoll(t *testing.T) {
	t.Parallel()
	conn := chtest.Open(t, chtest.NewDatabase(t, chtest.DSN(t)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	mon := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	insertHours(ctx, t, conn, mon, 24, []string{"n1", "n2"}, 0.25, 1000)
	cable := func(leaf1, leaf2 string) {
		t.Helper()
		if err := conn.Exec(ctx, "ALTER TABLE topology_ports DROP PARTITION 'f'"); err != nil {
			t.Fatal(err)
		}
		if err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO topology_ports (fabric, node, device, port, switch, switch_port, tier, rack, loaded_at)
SELECT 'f', concat('n', toString(number + 1)), 'mlx5_0', toUInt16(1), ['%s', '%s'][number + 1], concat('swp', toString(number + 1)), 'leaf', '', now()
FROM numbers(2)`, leaf1, leaf2)); err != nil {
			t.Fatal(err)
		}
	}
	q, err := chdb.QueryByName("trends")
	if err != nil {
		t.Fatal(err)
	}
	read := func(node string) string {
		t.Helper()
		rows, err := conn.Query(ctx, q.SQL,
			ch.Named("from", mon.Unix()), ch.Named("to", mon.Add(24*time.Hour).Unix()),
			ch.Named("node", node), ch.Named("by", "leaf"), ch.Named("bucket", "day"))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		idx := map[string]int{}
		for i, c := range rows.Columns() {
			idx[c] = i
		}
		var out []string
		for rows.Next() {
			vals := make([]any, len(rows.Columns()))
			for i, ct := range rows.ColumnTypes() {
				vals[i] = reflect.New(ct.ScanType()).Interface()
			}
			if err := rows.Scan(vals...); err != nil {
				t.Fatal(err)
			}
			p50 := *vals[idx["utilisation_p50"]].(**float64)
			out = append(out, fmt.Sprintf("%s ports %d p50 %v", *vals[idx["group"]].(*string), *vals[idx["ports"]].(*uint64), *p50))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, ", ")
	}
	check := func(when, node, want string) {
		t.Helper()
		if got := read(node); got != want {
			t.Errorf("%s (--node %q): %s, want %s", when, node, got, want)
		}
	}
	roll := func() {
		t.Helper()
		if err := chdb.Roll(ctx, conn, chdb.Day, mon, mon.Add(24*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	cable("leaf-a", "leaf-a")
	roll()
	check("both on leaf-a", "", "leaf-a ports 2 p50 0.25")
	cable("leaf-b", "leaf-b")
	check("moved, not rolled again", "", "leaf-a ports 2 p50 0.25")
	// --node reads the port-days, grouped by the topology loaded now.
	check("moved, not rolled again", "n1", "leaf-b ports 1 p50 0.25")
	roll()
	check("moved and rolled again", "", "leaf-b ports 2 p50 0.25")
	cable("leaf-a", "leaf-b")
	roll()
	check("split and rolled again", "", "leaf-a ports 1 p50 0.25, leaf-b ports 1 p50 0.25")
}
