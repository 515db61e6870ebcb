package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// rdmawatch runs the binary against dsn and returns its stdout.
func rdmawatch(t *testing.T, dsn string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--clickhouse", dsn)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("rdmawatch %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// queryRows runs a shipped query through the binary, JSON output.
func queryRows(t *testing.T, dsn, name string, args ...string) []map[string]any {
	t.Helper()
	out := rdmawatch(t, dsn, append([]string{"query", name, "--format", "json"}, args...)...)
	var rows []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("query %s: %q: %v", name, line, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestShippedQueries replays the pfc-storm scenario into ClickHouse once,
// then checks every shipped query against what the events file and the raw
// rows say, the rollups against the raw rows they summarise, and the
// postmortem report.
func TestShippedQueries(t *testing.T) {
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	const scenario = "pfc-storm"
	evs, _ := replay(t, scenario, "--clickhouse", dsn)
	out := rdmawatch(t, dsn, "migrate", "--topology", filepath.Join("..", "scenarios", scenario, "topology.json"))
	if !strings.Contains(out, "nothing applied") || !strings.Contains(out, "loaded topology") {
		t.Errorf("migrate after replay printed %q, want nothing applied and the topology loaded", out)
	}
	conn := chtest.Open(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	scalar := func(q string) float64 {
		t.Helper()
		var v float64
		if err := conn.QueryRow(ctx, "SELECT toFloat64(("+q+"))").Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	ins := incidents(evs)
	if len(ins) == 0 {
		t.Fatal("the scenario gave no incidents")
	}
	rng := []string{"--from", "2000-01-01", "--to", "2100-01-01"}

	t.Run("events", func(t *testing.T) {
		rows := queryRows(t, dsn, "events", rng...)
		if len(rows) != len(ins) {
			t.Fatalf("%d rows, %d incidents in the events file", len(rows), len(ins))
		}
		for i, in := range ins {
			if rows[i]["id"] != in.id || rows[i]["state"] != in.last.State {
				t.Errorf("row %d: %v %v, want %s %s", i, rows[i]["id"], rows[i]["state"], in.id, in.last.State)
			}
		}
	})
	t.Run("storm_spread", func(t *testing.T) {
		want := 0
		for _, in := range ins {
			if in.typ == schemas.TypePFCStorm {
				want += max(1, len(in.last.Affected))
			}
		}
		rows := queryRows(t, dsn, "storm_spread", rng...)
		if len(rows) != want || want == 0 {
			t.Fatalf("%d rows, want %d (affected ports of every storm's last state)", len(rows), want)
		}
		for i := 1; i < len(rows); i++ {
			if rows[i]["id"] == rows[i-1]["id"] && rows[i]["hops"].(float64) < rows[i-1]["hops"].(float64) {
				t.Errorf("row %d: hops %v after %v: not ordered by hop", i, rows[i]["hops"], rows[i-1]["hops"])
			}
		}
	})
	t.Run("port_timeline", func(t *testing.T) {
		in := ins[0]
		rows := queryRows(t, dsn, "port_timeline", "--event", in.id)
		s := in.first.Subject
		want := scalar(fmt.Sprintf("SELECT count() FROM port_samples FINAL WHERE node = '%s' AND device = '%s' AND port = %d AND time_ms >= %d AND time_ms <= %d",
			s.Node, s.Device, s.Port, int64(in.first.Start)-5*60*1000, int64(*in.last.End)+5*60*1000))
		if len(rows) == 0 || float64(len(rows)) < want-2 || float64(len(rows)) > want+2 {
			t.Fatalf("%d rows for %s around %s, the raw table has %v", len(rows), s, in.id, want)
		}
		for _, r := range rows {
			if r["node"] != s.Node || r["device"] != s.Device {
				t.Fatalf("row of %v/%v in %s's timeline", r["node"], r["device"], s)
			}
		}
	})
	t.Run("cnp_balance", func(t *testing.T) {
		rows := queryRows(t, dsn, "cnp_balance", rng...)
		nodes := scalar("SELECT uniqExact(node) FROM port_samples FINAL WHERE first = 0")
		if float64(len(rows)) != nodes+1 {
			t.Fatalf("%d rows, want %v nodes and the fabric", len(rows), nodes)
		}
		fabric := rows[len(rows)-1]
		if fabric["level"] != "fabric" || fabric["cnp_sent"].(float64) != scalar("SELECT sum(np_cnp_sent) FROM port_samples FINAL") {
			t.Errorf("fabric row %v, raw CNPs sent %v", fabric, scalar("SELECT sum(np_cnp_sent) FROM port_samples FINAL"))
		}
	})
	t.Run("leaf_capacity", func(t *testing.T) {
		rows := queryRows(t, dsn, "leaf_capacity", rng...)
		var bytes float64
		for _, r := range rows {
			if !strings.HasPrefix(r["leaf_group"].(string), "leaf-") {
				t.Errorf("leaf group %v: the loaded topology knows every port", r["leaf_group"])
			}
			bytes += r["rcv_bytes"].(float64)
		}
		if want := scalar("SELECT count() FROM (SELECT DISTINCT switch FROM topology_ports WHERE tier = 'leaf')"); float64(len(rows)) < want {
			t.Errorf("%d rows, want at least the %v leaves", len(rows), want)
		}
		if raw := scalar("SELECT sum(rcv_bytes) FROM port_samples FINAL"); bytes != raw {
			t.Errorf("leaves received %v bytes, the raw rows %v", bytes, raw)
		}
	})
	t.Run("saturation_flaps", func(t *testing.T) {
		rows := queryRows(t, dsn, "saturation_flaps", append(rng, "--limit", "100000")...)
		if top := queryRows(t, dsn, "saturation_flaps", append(rng, "--limit", "1")...); len(rows) > 0 && (len(top) != 1 || top[0]["node"] != rows[0]["node"]) {
			t.Errorf("--limit 1 gave %v, want the first of %d rows", top, len(rows))
		}
		want := scalar("SELECT uniqExact(node, device, port) FROM port_samples FINAL WHERE first = 0 AND (utilisation >= 0.9 OR link_downed > 0 OR link_error_recovery > 0 OR link_down_events_phy > 0)")
		if float64(len(rows)) != want {
			t.Errorf("%d rows, the raw rows have %v ports saturating or flapping", len(rows), want)
		}
	})
	t.Run("ber_trend", func(t *testing.T) {
		rows := queryRows(t, dsn, "ber_trend", append(rng, "--limit", "5")...)
		if len(rows) == 0 || len(rows) > 5 {
			t.Fatalf("%d rows, want 1..5", len(rows))
		}
		for i := 1; i < len(rows); i++ {
			if rows[i]["ber_slope_per_hour"].(float64) > rows[i-1]["ber_slope_per_hour"].(float64) {
				t.Errorf("row %d steeper than row %d", i, i-1)
			}
		}
	})
	t.Run("rollups equal raw", func(t *testing.T) {
		for _, r := range []struct{ view, bucket string }{{"port_minute_v", "toStartOfMinute(ts)"}, {"port_hour_v", "toStartOfHour(ts)"}} {
			q := `SELECT count() FROM (
  SELECT ` + r.bucket + ` AS b, node, device, port, count() AS samples, sum(rcv_bytes) AS rcv, sum(xmit_bytes) AS xmit,
    sum(tx_pause_duration_us) AS txp, sum(np_cnp_sent) AS cnp, sum(symbol_error) AS se, max(utilisation) AS umax,
    quantiles(0.5, 0.95)(utilisation) AS uq
  FROM port_samples FINAL WHERE first = 0 GROUP BY b, node, device, port
) ANY FULL OUTER JOIN (
  SELECT ` + strings.TrimPrefix(strings.TrimSuffix(r.view, "_v"), "port_") + ` AS b, node, device, port, samples AS r_samples, rcv_bytes AS r_rcv, xmit_bytes AS r_xmit,
    tx_pause_us AS r_txp, cnp_sent AS r_cnp, symbol_errors AS r_se, utilisation_max AS r_umax, utilisation_p50_p95 AS r_uq
  FROM ` + r.view + `
) USING (b, node, device, port)
WHERE samples != r_samples OR rcv != r_rcv OR xmit != r_xmit OR txp != r_txp OR cnp != r_cnp OR se != r_se OR umax != r_umax OR uq != r_uq`
			if n := scalar(q); n != 0 {
				t.Errorf("%s: %v buckets differ from the raw rows", r.view, n)
			}
		}
		if n := scalar("SELECT count() FROM port_minute_v"); n == 0 {
			t.Error("port_minute_v is empty")
		}
	})
	t.Run("postmortem", func(t *testing.T) {
		dir := t.TempDir()
		out := rdmawatch(t, dsn, append([]string{"postmortem", "--out", dir}, rng...)...)
		if !strings.Contains(out, fmt.Sprintf("%d incidents", len(ins))) {
			t.Errorf("postmortem printed %q, want %d incidents", out, len(ins))
		}
		md, err := os.ReadFile(filepath.Join(dir, "report.md"))
		if err != nil {
			t.Fatal(err)
		}
		for i, in := range ins {
			if !strings.Contains(string(md), in.id) {
				t.Errorf("report.md does not name incident %s", in.id)
			}
			plotPath := filepath.Join(dir, fmt.Sprintf("incident-%02d.svg", i+1))
			if in.first.Subject.Device == "" {
				// Node or fabric scope (a silent host whose port cannot be
				// told): no single port to plot.
				if _, err := os.Stat(plotPath); err == nil {
					t.Errorf("incident-%02d.svg written for %s scope %s", i+1, in.first.Scope, in.id)
				}
				continue
			}
			svg, err := os.ReadFile(plotPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := xml.Unmarshal(svg, new(struct{})); err != nil || !bytes.Contains(svg, []byte("<path")) {
				t.Errorf("incident-%02d.svg: not SVG with a series (%v)", i+1, err)
			}
		}
	})
}

// TestRetention fills port_samples with one row per port per hour over 40
// days, rolls them with `rdmawatch rollup` (so the command is tested too),
// then checks that `rdmawatch
// retention` drops exactly the partitions past each table's limit.
func TestRetention(t *testing.T) {
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	rdmawatch(t, dsn, "migrate")
	conn := chtest.Open(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// 2026-01-01 .. 2026-02-09, hourly, 3 ports.
	const start = 1767225600
	if err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO port_samples (ts, time_ms, node, device, port, interval_ms, rcv_bytes)
SELECT toDateTime(%d + intDiv(number, 3) * 3600) AS t, toInt64(toUInt32(t)) * 1000, concat('n', toString(number %% 3)), 'mlx5_0', 1, 10000, 1000
FROM numbers(%d)`, start, 40*24*3)); err != nil {
		t.Fatal(err)
	}
	if out := rdmawatch(t, dsn, "rollup", "--from", "2026-01-01", "--to", "2026-02-10"); strings.Count(out, "rolled minute rollup") != 40 || strings.Count(out, "rolled hour rollup") != 40 {
		t.Errorf("rollup printed %q, want 40 days of each rollup", out)
	}
	days := func(table, col string) (lo, hi string, n uint64) {
		t.Helper()
		if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT toString(toDate(min(%s))), toString(toDate(max(%s))), count() FROM %s", col, col, table)).Scan(&lo, &hi, &n); err != nil {
			t.Fatal(err)
		}
		return lo, hi, n
	}
	// Now: 2026-02-10 12:00. Raw keeps 14 days: partitions ending by
	// 2026-01-27 12:00 go, so the first day kept is 2026-01-27. Minute keeps
	// 30 days here: the first day kept is 2026-01-11. Hour keeps 20 days, but
	// January ends after now minus 20 days: the month stays.
	out := rdmawatch(t, dsn, "retention", "--now", "2026-02-10T12:00:00Z", "--raw", "336h", "--minute", "720h", "--hour", "480h")
	for _, tc := range []struct {
		table, col, lo, hi string
		rows               uint64
	}{
		{"port_samples", "ts", "2026-01-27", "2026-02-09", 14 * 24 * 3},
		{"rollup_minute FINAL", "minute", "2026-01-11", "2026-02-09", 30 * 24 * 3},
		{"rollup_hour FINAL", "hour", "2026-01-01", "2026-02-09", 40 * 24 * 3},
	} {
		lo, hi, n := days(tc.table, tc.col)
		if lo != tc.lo || hi != tc.hi || n != tc.rows {
			t.Errorf("%s after retention: %s..%s, %d rows; want %s..%s, %d rows\n%s", tc.table, lo, hi, n, tc.lo, tc.hi, tc.rows, out)
		}
	}
	// A second run drops nothing more.
	if out := rdmawatch(t, dsn, "retention", "--now", "2026-02-10T12:00:00Z", "--raw", "336h", "--minute", "720h", "--hour", "480h"); !strings.Contains(out, "dropped 0 of") {
		t.Errorf("second run: %s", out)
	}
}

// TestBERTrendWithoutRxBitsPhy: on the realnic-upstream scenario (mlx5 as
// upstream kernels before 2026 and MLNX_OFED 5.x list it: no rx_bits_phy),
// ber_trend still ranks the drifting port first, its BER measured over the
// link rate, and the sink's pre_fec_ber column holds the same figure.
func TestBERTrendWithoutRxBitsPhy(t *testing.T) {
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	replay(t, "realnic-upstream", "--clickhouse", dsn)
	rows := queryRows(t, dsn, "ber_trend", "--from", "2000-01-01", "--to", "2100-01-01", "--limit", "3")
	if len(rows) == 0 {
		t.Fatal("ber_trend: no rows on a fabric without rx_bits_phy")
	}
	if rows[0]["node"] != "gpu-002" || rows[0]["device"] != "mlx5_0" {
		t.Errorf("ber_trend's first row %v, want the drifting gpu-002/mlx5_0", rows[0])
	}
	if last, _ := rows[0]["ber_last"].(float64); last < 1e-7 || last > 1e-4 {
		t.Errorf("gpu-002's last minute BER %v: not a pre-FEC BER near the critical 1e-6", rows[0]["ber_last"])
	}
	conn := chtest.Open(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var withBits, maxBER float64
	if err := conn.QueryRow(ctx, "SELECT toFloat64(sum(rx_bits_phy)), toFloat64(max(pre_fec_ber)) FROM port_samples WHERE node = 'gpu-002' AND device = 'mlx5_0'").Scan(&withBits, &maxBER); err != nil {
		t.Fatal(err)
	}
	if withBits != 0 || maxBER <= 0 {
		t.Errorf("gpu-002: rx_bits_phy sum %v, max pre_fec_ber %v; want no rx_bits_phy and a pre-FEC BER from the link rate", withBits, maxBER)
	}
}
