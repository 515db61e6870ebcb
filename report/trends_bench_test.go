package report_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/report"
)

// EnvBenchTrends sizes BenchmarkTrends: PORTSxDAYS of hourly rollups
// ("10000x365"). Unset, the benchmark is skipped: generating a year for
// 10 000 ports takes minutes, more than `make bench` allows every package;
// `make bench-trends` sets it.
const EnvBenchTrends = "RDMAWATCH_BENCH_TRENDS"

// BenchmarkTrends times `rdmawatch query trends --by leaf --bucket day`
// over the last 30, 90 and 365 days of PORTSxDAYS hourly rollups in a
// private database (8 ports a node, 32 ports a leaf, as a GPU fabric), one
// port-hour a row as the sink's hour roll writes it, with incidents, and
// the day and group-day rollups rolled from those hours by the sink's own
// day roll (chdb.Roll: schemas/ddl/rollups/day.sql, day_group.sql), which
// the day buckets read. The time to generate the rows and to roll the
// days is logged: the figures in BENCHMARKS.md carry both. Each window also
// runs the query as it was before the group-days of migration 0020
// (testdata/trends_port_days.sql: the port-days' histogram bins) and before
// the histograms of 0019 (testdata/trends_exact_days.sql: the exact quantile
// states the roll still writes) on the same rows, in rotation, so the
// speed-ups are measured side by side in one run.
func BenchmarkTrends(b *testing.B) {
	spec := os.Getenv(EnvBenchTrends)
	if spec == "" {
		b.Skipf("%s unset (PORTSxDAYS, e.g. 10000x365; make bench-trends)", EnvBenchTrends)
	}
	ps, ds, ok := strings.Cut(spec, "x")
	ports, errP := strconv.Atoi(ps)
	days, errD := strconv.Atoi(ds)
	if !ok || errP != nil || errD != nil || ports < 8 || days < 1 {
		b.Fatalf("%s=%q: want PORTSxDAYS, e.g. 10000x365", EnvBenchTrends, spec)
	}
	conn := chtest.Open(b, chtest.NewDatabase(b, chtest.DSN(b)))
	ctx := context.Background()
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		b.Fatal(err)
	}
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	start := end.AddDate(0, 0, -days)
	// Port i: node gpu-(i/8), zero-padded (18.16 has no leftPad), device mlx5_(i%8), port 1, on leaf-(i/32).
	portExpr := func(n string) (node, device, leaf string) {
		return fmt.Sprintf("concat('gpu-', substring(toString(100000 + intDiv(%s, 8)), 2))", n),
			fmt.Sprintf("concat('mlx5_', toString(%s %% 8))", n),
			fmt.Sprintf("concat('leaf-', substring(toString(10000 + intDiv(%s, 32)), 2))", n)
	}
	node, device, leaf := portExpr("number")
	if err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO topology_ports (fabric, node, device, port, switch, switch_port, tier, rack, loaded_at)
SELECT 'bench', %s, %s, toUInt16(1), %s, concat('swp', toString(number %% 32 + 1)), 'leaf', '', now() FROM numbers(%d)`, node, device, leaf, ports)); err != nil {
		b.Fatal(err)
	}
	// One INSERT a month keeps each within one partition and its memory
	// bounded; a row's values vary with the port and the hour so the
	// sums and quantiles do real work.
	t0 := time.Now()
	rows := 0
	for m := start; m.Before(end); {
		next := time.Date(m.Year(), m.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		if next.After(end) {
			next = end
		}
		hours := int(next.Sub(m) / time.Hour)
		node, device, _ := portExpr(fmt.Sprintf("(number %% %d)", ports))
		sql := fmt.Sprintf(`INSERT INTO rollup_hour (hour, node, device, port, rate_gbps, samples, interval_ms, rcv_bytes, xmit_bytes,
  port_xmit_discards, out_of_buffer, rx_bits_phy, rx_corrected_bits_phy, rx_pcs_symbol_err_phy,
  np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_handled, tx_pause_duration_us, rx_pause_duration_us, rolled_at)
SELECT toDateTime(%d + intDiv(number, %d) * 3600) AS hour, %s, %s, toUInt16(1),
  arrayReduce('maxState', [toFloat64(400)]), toUInt64(360), arrayReduce('sumState', [toInt64(3600000)]),
  arrayReduce('sumState', [toUInt64(cityHash64(number) %% 90000000000000)]), arrayReduce('sumState', [toUInt64(cityHash64(number, 1) %% 90000000000000)]),
  arrayReduce('sumState', [toUInt64(cityHash64(number, 2) %% 3)]), arrayReduce('sumState', [toUInt64(cityHash64(number, 3) %% 5)]),
  arrayReduce('sumState', [toUInt64(1440000000000000)]), arrayReduce('sumState', [toUInt64(cityHash64(number, 4) %% 100000000)]),
  arrayReduce('sumState', [toUInt64(cityHash64(number, 5) %% 2)]), arrayReduce('sumState', [toUInt64(cityHash64(number, 6) %% 100000)]),
  arrayReduce('sumState', [toUInt64(cityHash64(number, 7) %% 1000)]), arrayReduce('sumState', [toUInt64(cityHash64(number, 8) %% 1000)]),
  arrayReduce('sumState', [toUInt64(cityHash64(number, 9) %% 10000000)]), arrayReduce('sumState', [toUInt64(cityHash64(number, 10) %% 10000000)]),
  toDateTime(%d)
FROM numbers(%d)`, m.Unix(), ports, node, device, end.Unix(), hours*ports)
		if err := conn.Exec(ctx, sql); err != nil {
			b.Fatalf("generate %s: %v", m.Format("2006-01"), err)
		}
		rows += hours * ports
		m = next
	}
	gen := time.Since(t0)
	// The days, a month a statement as the hours went in (`rdmawatch
	// rollup` rolls a day a statement; a month keeps generation shorter
	// and is the same statement).
	t1 := time.Now()
	for m := start; m.Before(end); {
		next := time.Date(m.Year(), m.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		if next.After(end) {
			next = end
		}
		if err := chdb.Roll(ctx, conn, chdb.Day, m, next); err != nil {
			b.Fatalf("roll days of %s: %v", m.Format("2006-01"), err)
		}
		m = next
	}
	rolled := time.Since(t1)
	// A few incidents a day, on ports spread over the leaves.
	if err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO events (id, type, state, severity, scope, revision, subject_node, subject_device, subject_port,
  start_ms, detected_at_ms, start_ts, detected_at_ts, layer, summary)
SELECT concat('bench/', toString(number)), ['pfc_storm', 'ber_drift', 'link_flap', 'cnp_ecn_imbalance'][number %% 4 + 1], 'resolved', 'warning', 'port', toUInt32(1),
  %s, %s, toUInt16(1), toInt64(%d + number * 21600) * 1000, toInt64(%d + number * 21600) * 1000,
  toDateTime(%d + number * 21600), toDateTime(%d + number * 21600), 'link_network', 'bench'
FROM numbers(%d)`, func() string { n, _, _ := portExpr("(number * 7919 % " + strconv.Itoa(ports) + ")"); return n }(),
		func() string { _, d, _ := portExpr("(number * 7919 % " + strconv.Itoa(ports) + ")"); return d }(),
		start.Unix(), start.Unix(), start.Unix(), start.Unix(), days*4)); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d port-hours (%d ports x %d days) in %s (%.0f rows/s), rolled %d port-days in %s",
		rows, ports, days, gen.Round(time.Second), float64(rows)/gen.Seconds(), ports*days, rolled.Round(time.Second))
	q, err := chdb.QueryByName("trends")
	if err != nil {
		b.Fatal(err)
	}
	// The query before migration 0020 (the port-days' histogram bins) and
	// before 0019 (their exact quantile states), on the same rows.
	earlier := func(file string) chdb.Query {
		data, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		e := q
		e.SQL = stripComments(string(data))
		return e
	}
	variants := []struct {
		name string
		q    chdb.Query
	}{
		{"group-days", q},
		{"port-days", earlier("testdata/trends_port_days.sql")},
		{"exact", earlier("testdata/trends_exact_days.sql")},
	}
	for _, window := range []int{30, 90, 365} {
		if window > days {
			continue
		}
		b.Run(fmt.Sprintf("%dports_%ddays_of_%d", ports, window, days), func(b *testing.B) {
			p := report.Params{From: end.AddDate(0, 0, -window), To: end, By: "leaf", Bucket: "day"}
			run := func(q chdb.Query) (time.Duration, int) {
				t1 := time.Now()
				res, err := report.RunQuery(ctx, conn, q, p)
				if err != nil {
					b.Fatal(err)
				}
				return time.Since(t1), len(res.Rows)
			}
			totals := make([]time.Duration, len(variants))
			for i := 0; i < b.N; i++ {
				// Each run starts with the next variant: none always
				// reads the others' warm cache.
				took := make([]time.Duration, len(variants))
				rows := make([]int, len(variants))
				for k := range variants {
					v := (i + k) % len(variants)
					took[v], rows[v] = run(variants[v].q)
					totals[v] += took[v]
				}
				for v := range variants {
					if rows[v] != rows[0] {
						b.Fatalf("%d days: %d rows from the %s query, %d from the %s one", window, rows[0], variants[0].name, rows[v], variants[v].name)
					}
				}
				b.Logf("%d days: %d rows in %s from the group-days, %s from the port-days' bins (%.1fx), %s from their exact states (%.1fx)",
					window, rows[0], took[0].Round(time.Millisecond), took[1].Round(time.Millisecond), took[1].Seconds()/took[0].Seconds(),
					took[2].Round(time.Millisecond), took[2].Seconds()/took[0].Seconds())
			}
			for v, name := range []string{"s/group", "s/portdays", "s/exact"} {
				b.ReportMetric(totals[v].Seconds()/float64(b.N), name)
			}
		})
	}
}
