package chdb_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
)

const testCluster = "rdmawatch_test"

// TestClusterOneNode runs cluster mode on a private server configured with a
// one-node cluster. The server has no ZooKeeper, so the test runs what can
// run: the whole cluster schema with unreplicated engines and without ON
// CLUSTER (Distributed tables over *_local MergeTree tables, materialized
// views on the local tables), writes and reads through it; then it sends
// every real cluster statement (ON CLUSTER, Replicated engines) and checks
// the server got past parsing to the point where it needs ZooKeeper.
func TestClusterOneNode(t *testing.T) {
	t.Parallel()
	srv := chtest.StartPrivateCluster(t, testCluster)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("distributed over unreplicated tables", func(t *testing.T) {
		dsn := chtest.NewDatabase(t, srv.DSN)
		conn := chtest.Open(t, dsn)
		c := chdb.LocalCluster(testCluster, true, true)
		applied, err := chdb.MigrateCluster(ctx, conn, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(applied) < 7 {
			t.Fatalf("applied %v", applied)
		}
		engines := map[string]string{}
		rows, err := conn.Query(ctx, "SELECT name, engine FROM system.tables WHERE database = currentDatabase()")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var n, e string
			if err := rows.Scan(&n, &e); err != nil {
				t.Fatal(err)
			}
			engines[n] = e
		}
		rows.Close()
		for name, want := range map[string]string{
			"port_samples": "Distributed", "port_samples_local": "ReplacingMergeTree",
			"events": "Distributed", "events_local": "ReplacingMergeTree",
			"inventory": "Distributed", "port_minute": "Distributed", "port_minute_local": "AggregatingMergeTree",
			"port_hour": "Distributed", "topology_ports": "Distributed", "topology_links_local": "ReplacingMergeTree",
			"schema_migrations": "Distributed", "schema_migrations_local": "MergeTree",
			"rollup_minute": "Distributed", "rollup_minute_local": "ReplacingMergeTree",
			"rollup_hour": "Distributed", "rollup_hour_local": "ReplacingMergeTree",
			"rollup_day": "Distributed", "rollup_day_local": "ReplacingMergeTree",
			"rollup_day_group": "Distributed", "rollup_day_group_local": "ReplacingMergeTree",
			"port_minute_mv": "", "port_hour_mv": "", "events_latest": "View",
		} {
			if engines[name] != want {
				t.Errorf("%s: engine %q, want %q (all: %v)", name, engines[name], want, engines)
			}
		}

		// Write through the Distributed tables as the sink does (explicit
		// column lists), twice: a redelivered batch collapses under FINAL.
		sync := ch.Context(ctx, ch.WithSettings(ch.Settings{"insert_distributed_sync": 1}))
		ts := time.Date(2024, 5, 1, 10, 0, 30, 0, time.UTC)
		for i := 0; i < 2; i++ {
			b, err := conn.PrepareBatch(sync, "INSERT INTO port_samples (ts, time_ms, node, device, port, interval_ms, rcv_bytes, first)")
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Append(ts, ts.UnixMilli(), "n1", "mlx5_0", uint16(1), int64(1000), uint64(125000000), uint8(0)); err != nil {
				t.Fatal(err)
			}
			if err := b.Send(); err != nil {
				t.Fatal(err)
			}
			b, err = conn.PrepareBatch(sync, "INSERT INTO events (type, id, revision, state, detected_at_ms, detected_at_ts)")
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Append("pfc_storm", "e1", uint32(i+1), "open", ts.UnixMilli(), ts); err != nil {
				t.Fatal(err)
			}
			if err := b.Send(); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := chtest.Count(ctx, conn, "port_samples", ""); err != nil || n != 1 {
			t.Errorf("port_samples FINAL through Distributed: %d rows, %v; want 1", n, err)
		}
		// Rolled twice through the Distributed tables, as a restarted sink
		// does: the newer roll replaces the first. (The roll reads without
		// FINAL, like the views before it: the sink never inserts a sample
		// twice; this test did, so the copies are merged first.)
		if err := conn.Exec(ctx, "OPTIMIZE TABLE port_samples_local FINAL"); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			for _, r := range chdb.Rollups {
				if err := chdb.Roll(ctx, conn, r, ts, ts.Add(time.Second)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, view := range []string{"port_minute_v", "port_hour_v"} {
			var bytes, samples uint64
			if err := conn.QueryRow(ctx, "SELECT rcv_bytes, samples FROM "+view+" WHERE node = 'n1'").Scan(&bytes, &samples); err != nil {
				t.Fatalf("%s: %v", view, err)
			}
			if bytes != 125000000 || samples != 1 {
				t.Errorf("%s rcv_bytes %d samples %d, want 125000000 and 1 (rolled once, not summed with the first roll)", view, bytes, samples)
			}
		}
		var rev uint32
		if err := conn.QueryRow(ctx, "SELECT revision FROM events_latest WHERE id = 'e1'").Scan(&rev); err != nil || rev != 2 {
			t.Errorf("events_latest revision %d, %v; want 2", rev, err)
		}

		// Every shipped query runs on the cluster schema.
		qs, err := chdb.Queries()
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			rows, err := conn.Query(ctx, q.SQL, ch.Named("from", ts.Add(-time.Hour).Unix()), ch.Named("to", ts.Add(time.Hour).Unix()),
				ch.Named("node", "n1"), ch.Named("device", ""), ch.Named("port", uint16(0)), ch.Named("limit", uint64(10)),
				ch.Named("type", ""), ch.Named("severity", ""), ch.Named("state", ""), ch.Named("layer", ""),
				ch.Named("by", "leaf"), ch.Named("bucket", "day"))
			if err != nil {
				t.Errorf("query %s: %v", q.Name, err)
				continue
			}
			for rows.Next() {
			}
			if err := rows.Err(); err != nil {
				t.Errorf("query %s: %v", q.Name, err)
			}
			rows.Close()
		}

		if again, err := chdb.MigrateCluster(ctx, conn, c); err != nil || len(again) != 0 {
			t.Errorf("second cluster run applied %v, %v; want nothing", again, err)
		}
		if _, err := chdb.Migrate(ctx, conn); err == nil || !strings.Contains(err.Error(), "cluster mode") {
			t.Errorf("single-server Migrate on a cluster database: %v, want a refusal", err)
		}
	})

	t.Run("single-server database refused", func(t *testing.T) {
		conn := chtest.Open(t, chtest.NewDatabase(t, srv.DSN))
		if _, err := chdb.Migrate(ctx, conn); err != nil {
			t.Fatal(err)
		}
		if _, err := chdb.MigrateCluster(ctx, conn, chdb.LocalCluster(testCluster, true, true)); err == nil || !strings.Contains(err.Error(), "single-server") {
			t.Errorf("cluster Migrate on a single-server database: %v, want a refusal", err)
		}
	})

	t.Run("ON CLUSTER and Replicated statements parse", func(t *testing.T) {
		// The private server's default database: on 18.16 a CREATE of a
		// Replicated table that failed for want of ZooKeeper leaves its
		// directory behind and DROP DATABASE then fails; the server and its
		// folder go away with the test.
		conn := chtest.Open(t, srv.DSN)
		var db string
		if err := conn.QueryRow(ctx, "SELECT currentDatabase()").Scan(&db); err != nil {
			t.Fatal(err)
		}
		server, err := chdb.ServerVersion(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		stmts, err := chdb.ClusterStatements(chdb.Cluster{Name: testCluster}, db, server)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("no ZooKeeper here: ON CLUSTER statements are checked up to %q, Replicated engines up to %q", "DDL background thread is not initialized", "Can't create replicated table without ZooKeeper")
		const (
			codeSyntax      = 62
			codeDDLNotReady = 49  // LOGICAL_ERROR: DDL background thread is not initialized
			codeNoZooKeeper = 225 // NO_ZOOKEEPER
		)
		for _, stmt := range stmts {
			head, _, _ := strings.Cut(stmt, "\n")
			if strings.HasPrefix(head, "INSERT INTO ") {
				continue // DML, no ON CLUSTER: run by the unreplicated test above
			}
			err := conn.Exec(ctx, stmt)
			var exc *ch.Exception
			if err == nil || !errors.As(err, &exc) || exc.Code != codeDDLNotReady {
				// A server with distributed DDL configured would run it:
				// not this private one.
				t.Errorf("%s: %v, want code %d (parsed, cluster found, no DDL worker)", head, err, codeDDLNotReady)
				continue
			}
			if !strings.Contains(stmt, "ENGINE = Replicated") {
				continue
			}
			// The same CREATE on this server alone: the engine's arguments,
			// macros and version column are checked before ZooKeeper is.
			single := strings.Replace(stmt, " ON CLUSTER "+testCluster, "", 1)
			err = conn.Exec(ctx, single)
			if err == nil || !errors.As(err, &exc) || exc.Code != codeNoZooKeeper {
				t.Errorf("%s without ON CLUSTER: %v, want code %d (no ZooKeeper)", head, err, codeNoZooKeeper)
			}
			if exc != nil && exc.Code == codeSyntax {
				t.Errorf("%s: syntax error", head)
			}
		}
	})
}
