package chdb_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
)

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := chtest.Open(t, dsn)

	v, err := chdb.ServerVersion(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server %s", v)

	first, err := chdb.Migrate(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) < 3 {
		t.Fatalf("first run applied %v, want at least the three tables", first)
	}
	second, err := chdb.Migrate(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 0 {
		t.Fatalf("second run applied %v, want nothing", second)
	}

	// The tables are in the DSN's database, and every applied file is
	// recorded exactly once.
	tables := chtest.Strings(t, conn, "SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name")
	want := []string{"counter_dictionary", "events", "events_latest", "inventory", "inventory_latest",
		"port_config", "port_hour", "port_hour_v", "port_minute", "port_minute_v",
		"port_samples", "rollup_day", "rollup_day_group", "rollup_hour", "rollup_minute", "schema_migrations", "topology_links", "topology_ports"}
	if !reflect.DeepEqual(tables, want) {
		t.Fatalf("tables %v, want %v", tables, want)
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if int(n) != len(first) {
		t.Fatalf("schema_migrations has %d rows, applied %d files", n, len(first))
	}
}

// schemaText is every table's and view's CREATE statement in the database.
func schemaText(ctx context.Context, t *testing.T, conn interface {
	Query(context.Context, string, ...any) (driver.Rows, error)
}) string {
	t.Helper()
	rows, err := conn.Query(ctx, "SELECT name, create_table_query FROM system.tables WHERE database = currentDatabase() AND name != 'schema_migrations' ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var name, q string
		if err := rows.Scan(&name, &q); err != nil {
			t.Fatal(err)
		}
		b.WriteString(q + "\n")
	}
	return b.String()
}

// TestMigrateRerunsCutShortStep: a step whose ALTER ... ADD COLUMN ran but
// that was not recorded (the migrator died in between) runs again cleanly,
// and a second full run changes no table's definition.
func TestMigrateRerunsCutShortStep(t *testing.T) {
	t.Parallel()
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := chtest.Open(t, dsn)
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	before := schemaText(ctx, t, conn)
	// Forget every step from 0004 on, as if the run had died after its DDL.
	if err := conn.Exec(ctx, "ALTER TABLE schema_migrations DELETE WHERE version >= 4"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the forgotten steps gone from schema_migrations", func() error {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM schema_migrations WHERE version >= 4").Scan(&n); err != nil {
			return err
		}
		if n != 0 {
			return fmt.Errorf("%d rows from 0004 on still in schema_migrations", n)
		}
		return nil
	})
	again, err := chdb.Migrate(ctx, conn)
	if err != nil {
		t.Fatalf("re-running cut-short steps: %v", err)
	}
	if len(again) == 0 || !strings.HasPrefix(again[0], "0004_") {
		t.Fatalf("re-run applied %v, want 0004 first", again)
	}
	if after := schemaText(ctx, t, conn); after != before {
		t.Errorf("schema changed on re-run:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if third, err := chdb.Migrate(ctx, conn); err != nil || len(third) != 0 {
		t.Fatalf("third run applied %v, %v; want nothing", third, err)
	}
	if after := schemaText(ctx, t, conn); after != before {
		t.Errorf("schema changed on a run that applied nothing")
	}
}

func TestOpenBadDSN(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := chdb.Open(ctx, "clickhouse://127.0.0.1:1/default"); err == nil {
		t.Fatal("Open of a closed port succeeded")
	} else {
		t.Log(err)
	}
	if _, err := chdb.Open(ctx, "http://127.0.0.1:18123/default"); err == nil {
		t.Fatal("Open accepted the HTTP protocol")
	}
}

func TestOpenUnknownDatabase(t *testing.T) {
	t.Parallel()
	dsn := chtest.WithDatabase(t, chtest.DSN(t), "no_such_database_rdmawatch")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := chdb.Open(ctx, dsn)
	if err == nil {
		t.Fatal("Open of an unknown database succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Open retried a server exception for %v: %v", d, err)
	}
	t.Log(err)
}

func TestEnsureDatabaseThenMigrate(t *testing.T) {
	base := chtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := fmt.Sprintf("test_ensure_%d", time.Now().UnixNano())
	dsn := chtest.WithDatabase(t, base, db)
	admin := chtest.Open(t, base)
	t.Cleanup(func() { _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	for i := 0; i < 2; i++ {
		if err := chdb.EnsureDatabase(ctx, dsn); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	conn, err := chdb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateCarriesRollupsOver upgrades a database whose rollups were kept
// by materialized views (0005) to rolled rollups (0012): what the views had
// summed reads the same through port_minute_v and port_hour_v after the
// upgrade, and a roll afterwards replaces it (here the views had counted a
// row inserted twice once more than the roll, which reads the rows after a
// merge collapsed them).
func TestMigrateCarriesRollupsOver(t *testing.T) {
	t.Parallel()
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := chtest.Open(t, dsn)
	if _, err := chdb.MigrateUpTo(ctx, conn, 11); err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 3, 14, 8, 0, 30, 0, time.UTC)
	for i, bytes := range []uint64{100, 100, 50} { // the first one twice
		at := ts.Add(time.Duration(i/2) * 2 * time.Minute)
		b, err := conn.PrepareBatch(ctx, "INSERT INTO port_samples (ts, time_ms, node, device, port, interval_ms, rcv_bytes, utilisation, first)")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Append(at, at.UnixMilli(), "n1", "mlx5_0", uint16(1), int64(1000), bytes, 0.5, uint8(0)); err != nil {
			t.Fatal(err)
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(view string) string {
		t.Helper()
		return strings.Join(chtest.Strings(t, conn, "SELECT concat(toString(samples), ' ', toString(rcv_bytes), ' ', toString(utilisation_max)) AS s FROM "+view+" ORDER BY s"), "; ")
	}
	beforeMin, beforeHour := read("port_minute_v"), read("port_hour_v")
	if beforeMin != "1 50 0.5; 2 200 0.5" || beforeHour != "3 250 0.5" {
		t.Fatalf("before the upgrade: minute %q hour %q", beforeMin, beforeHour)
	}
	applied, err := chdb.Migrate(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) == 0 || applied[0] != "0012_rollups_from_rows.sql" {
		t.Fatalf("applied %v, want 0012 first", applied)
	}
	if m, h := read("port_minute_v"), read("port_hour_v"); m != beforeMin || h != beforeHour {
		t.Errorf("after the upgrade: minute %q hour %q, want %q and %q", m, h, beforeMin, beforeHour)
	}
	if err := conn.Exec(ctx, "OPTIMIZE TABLE port_samples FINAL"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []chdb.Rollup{chdb.Minute, chdb.Hour} {
		if err := chdb.Roll(ctx, conn, r, ts, ts.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if m, h := read("port_minute_v"), read("port_hour_v"); m != "1 100 0.5; 1 50 0.5" || h != "2 150 0.5" {
		t.Errorf("rolled: minute %q hour %q, want %q and %q", m, h, "1 100 0.5; 1 50 0.5", "2 150 0.5")
	}
}

func TestMigrationStatements(t *testing.T) {
	for _, c := range []struct {
		file    string
		prefix  string
		n, with int
		wantErr bool
	}{
		{file: "0005_rollups.sql", prefix: "CREATE MATERIALIZED VIEW", n: 4, with: 2},
		{file: "0012_rollups_from_rows.sql", prefix: "INSERT INTO", n: 10, with: 2},
		{file: "0099_missing.sql", wantErr: true},
	} {
		stmts, err := chdb.MigrationStatements(c.file)
		if (err != nil) != c.wantErr {
			t.Fatalf("%s: %v, want error %v", c.file, err, c.wantErr)
		}
		with := 0
		for _, s := range stmts {
			if strings.Contains(s, "\n--") || strings.HasPrefix(s, "--") || strings.HasSuffix(s, ";") {
				t.Errorf("%s: a statement keeps a comment or its ';': %.60q", c.file, s)
			}
			if strings.HasPrefix(s, c.prefix) && c.prefix != "" {
				with++
			}
		}
		if len(stmts) != c.n || with != c.with {
			t.Errorf("%s: %d statements, %d starting %q; want %d and %d", c.file, len(stmts), with, c.prefix, c.n, c.with)
		}
	}
}
