package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
)

// TestRetentionAndTopologyOnCluster runs `rdmawatch migrate --cluster
// --topology` twice (the second topology drops a cable) and `rdmawatch
// retention` (no cluster flag: the database says it is in cluster mode)
// against the shard of two replicas, and reads each replica's *_local
// tables: the fabric is replaced on both, and retention drops exactly the
// partitions past each table's limit on both.
func TestRetentionAndTopologyOnCluster(t *testing.T) {
	requireCluster(t)
	bin := rdmawatchBin(t)
	_, name, dsns := chCluster(t)
	const db = "rdmawatch_storage"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("rdmawatch %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	conns := make([]driver.Conn, len(dsns))
	open := func() {
		for i, dsn := range dsns {
			c, err := chdb.Open(ctx, withDB(dsn, db))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			conns[i] = c
		}
	}

	// Topology: three host ports and two uplinks, then the same fabric
	// without host-c's cable.
	dir := t.TempDir()
	full := `{"fabric": "pod-a",
 "switches": [{"name": "leaf-01", "tier": "leaf"}, {"name": "leaf-02", "tier": "leaf"}, {"name": "spine-01", "tier": "spine"}],
 "links": [
  {"a": "host-a/mlx5_0/1", "b": "leaf-01/swp1"},
  {"a": "host-b/mlx5_0/1", "b": "leaf-01/swp2"},
  {"a": "host-c/mlx5_0/1", "b": "leaf-02/swp1"},
  {"a": "leaf-01/swp49", "b": "spine-01/swp1"},
  {"a": "leaf-02/swp49", "b": "spine-01/swp2"}]}`
	smaller := strings.Replace(full, `
  {"a": "host-c/mlx5_0/1", "b": "leaf-02/swp1"},`, "", 1)
	for i, topo := range []struct {
		json         string
		ports, links uint64
	}{{full, 3, 5}, {smaller, 2, 4}} {
		file := filepath.Join(dir, fmt.Sprintf("topology-%d.json", i))
		if err := os.WriteFile(file, []byte(topo.json), 0o644); err != nil {
			t.Fatal(err)
		}
		out := run("migrate", "--clickhouse", withDB(dsns[0], db), "--cluster", name, "--cluster-zookeeper-path", zkPath(db), "--topology", file)
		t.Logf("migrate --cluster --topology:\n%s", out)
		if conns[0] == nil {
			open()
		}
		for r, conn := range conns {
			for _, q := range []struct {
				query string
				want  uint64
			}{
				{"SELECT count() FROM topology_ports_local FINAL WHERE fabric = 'pod-a'", topo.ports},
				{"SELECT count() FROM topology_links_local FINAL WHERE fabric = 'pod-a'", topo.links},
				{"SELECT count() FROM topology_ports FINAL WHERE fabric = 'pod-a'", topo.ports},
			} {
				// The other replica gets the rows by replication.
				testwait.For(t, 30*time.Second, "the rows replicated", func() error {
					if n := count(t, ctx, conn, q.query); n != q.want {
						return fmt.Errorf("replica %d, topology %d: %s: %d, want %d", r+1, i+1, q.query, n, q.want)
					}
					return nil
				})
			}
		}
	}

	// Retention: 2026-01-20 .. 2026-02-09, hourly, 3 ports, written
	// through the Distributed table and rolled by `rdmawatch rollup`
	// through the Distributed rollup tables. Few partitions: each drop ON
	// CLUSTER is a round through ZooKeeper.
	const start = 1768867200
	const rows = 21 * 24 * 3
	sync := ch.Context(ctx, ch.WithSettings(ch.Settings{"insert_distributed_sync": 1}))
	if err := conns[0].Exec(sync, fmt.Sprintf(`INSERT INTO port_samples (ts, time_ms, node, device, port, interval_ms, rcv_bytes)
SELECT toDateTime(%d + intDiv(number, 3) * 3600) AS t, toInt64(toUInt32(t)) * 1000, concat('n', toString(number %% 3)), 'mlx5_0', 1, 10000, 1000
FROM numbers(%d)`, start, rows)); err != nil {
		t.Fatal(err)
	}
	for r, conn := range conns {
		testwait.For(t, 30*time.Second, "the rows on both replicas", func() error {
			if n := count(t, ctx, conn, "SELECT count() FROM port_samples_local"); n != rows {
				return fmt.Errorf("replica %d holds %d rows, want %d", r+1, n, rows)
			}
			return nil
		})
	}
	if out := run("rollup", "--clickhouse", withDB(dsns[0], db), "--from", "2026-01-20", "--to", "2026-02-10"); strings.Count(out, "rolled ") != 3*21 {
		t.Errorf("rollup: want 21 days of each rollup (minute, hour, day)\n%s", out)
	}
	// Now: 2026-02-10 12:00. Raw keeps 14 days: the first day kept is
	// 2026-01-27. Minute keeps 20 days: partitions ending by 2026-01-21
	// 12:00 go, so only 2026-01-20. Hour keeps 20 days, but January ends
	// after now minus 20 days: both months stay, and the day and group-day
	// rollups' two months each stay (they keep five years).
	args := []string{"retention", "--clickhouse", withDB(dsns[0], db), "--now", "2026-02-10T12:00:00Z", "--raw", "336h", "--minute", "480h", "--hour", "480h"}
	if out := run(append(args, "--dry-run")...); !strings.Contains(out, "would drop 8 of 48 partitions") {
		t.Errorf("dry run: want 8 of 48 partitions to drop (7 raw, 1 minute)\n%s", out)
	}
	out := run(args...)
	t.Logf("retention: %s", lastLine(out))
	for r, conn := range conns {
		for _, tc := range []struct {
			table, col, lo, hi string
			rows               uint64
			where              string
		}{
			{"port_samples_local", "ts", "2026-01-27", "2026-02-09", 14 * 24 * 3, ""},
			{"rollup_minute_local", "minute", "2026-01-21", "2026-02-09", 20 * 24 * 3, ""},
			{"rollup_hour_local", "hour", "2026-01-20", "2026-02-09", 21 * 24 * 3, ""},
			{"rollup_day_local", "day", "2026-01-20", "2026-02-09", 21 * 3, ""},
			// The group-days by fabric: one a day.
			{"rollup_day_group_local", "day", "2026-01-20", "2026-02-09", 21, "group_by = 'fabric'"},
			{"port_samples", "ts", "2026-01-27", "2026-02-09", 14 * 24 * 3, ""},
		} {
			// The drop reaches the other replica through replication.
			testwait.For(t, 30*time.Second, "the drop replicated", func() error {
				var lo, hi string
				var n uint64
				where := tc.where
				if where == "" {
					where = "1"
				}
				q := fmt.Sprintf("SELECT toString(toDate(min(%s))), toString(toDate(max(%s))), count() FROM (SELECT * FROM %s FINAL WHERE %s)", tc.col, tc.col, tc.table, where)
				if err := conn.QueryRow(ctx, q).Scan(&lo, &hi, &n); err != nil {
					return err
				}
				if lo != tc.lo || hi != tc.hi || n != tc.rows {
					return fmt.Errorf("replica %d, %s after retention: %s..%s, %d rows; want %s..%s, %d rows\n%s", r+1, tc.table, lo, hi, n, tc.lo, tc.hi, tc.rows, out)
				}
				return nil
			})
		}
	}
	if out := run(args...); !strings.Contains(out, "dropped 0 of") {
		t.Errorf("second run dropped more:\n%s", out)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}
