package chdb

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

var update = flag.Bool("update", false, "rewrite testdata/cluster golden files")

// goldenCluster is the cluster the golden files are written for.
var goldenCluster = Cluster{Name: "rdmawatch_test"}

const goldenDB = "rdmawatch"

func goldenRewriter(t *testing.T) *clusterRewriter {
	t.Helper()
	rw, err := newRewriter(migrationFS, "migrations", goldenCluster, goldenDB)
	if err != nil {
		t.Fatal(err)
	}
	return rw
}

func renderStmts(stmts []string) string {
	var b strings.Builder
	for i, s := range stmts {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(s + ";\n")
	}
	return b.String()
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "cluster", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestClusterRewriteGolden -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s: rewrite differs from the golden file (go test -run TestClusterRewriteGolden -update rewrites it):\n--- got\n%s", path, got)
	}
}

// TestClusterRewriteGolden rewrites every shipped migration file, every
// variant, and the schema_migrations table, and compares with
// testdata/cluster/<file>.
func TestClusterRewriteGolden(t *testing.T) {
	all, err := parseAll(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	rw := goldenRewriter(t)
	seen := map[string]bool{}
	for _, m := range all {
		t.Run(m.file, func(t *testing.T) {
			var out []string
			for _, s := range m.stmts {
				r, err := rw.rewrite(s)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, r...)
			}
			checkGolden(t, m.file, renderStmts(out))
		})
		seen[m.file] = true
	}
	t.Run(migrationsTable, func(t *testing.T) {
		r, err := rw.rewrite(createMigrationsTable)
		if err != nil {
			t.Fatal(err)
		}
		checkGolden(t, migrationsTable+".sql", renderStmts(r))
	})
	seen[migrationsTable+".sql"] = true
	// No stale golden file for a migration that is gone.
	files, _ := filepath.Glob(filepath.Join("testdata", "cluster", "*.sql"))
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s has no migration file", f)
		}
	}
}

// TestClusterRewriteProperties checks what every rewritten statement must
// have, independent of the golden text.
func TestClusterRewriteProperties(t *testing.T) {
	all, err := parseAll(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	rw := goldenRewriter(t)
	for _, m := range all {
		for i, s := range m.stmts {
			out, err := rw.rewrite(s)
			if err != nil {
				t.Fatalf("%s statement %d: %v", m.file, i+1, err)
			}
			for _, o := range out {
				head, _, _ := strings.Cut(o, "\n")
				if strings.HasPrefix(head, "INSERT INTO ") {
					// Rows carried over go through the Distributed table.
					if strings.Contains(o, "_local") {
						t.Errorf("%s: an INSERT reads or writes a local table:\n%s", m.file, o)
					}
					continue
				}
				if !strings.Contains(head, " ON CLUSTER rdmawatch_test") {
					t.Errorf("%s: %q has no ON CLUSTER on its first line", m.file, head)
				}
				if strings.Contains(o, "ENGINE = ") && !strings.Contains(o, "ENGINE = Replicated") && !strings.Contains(o, "ENGINE = Distributed(") {
					t.Errorf("%s: unreplicated engine in\n%s", m.file, o)
				}
				if strings.Contains(o, "MATERIALIZED VIEW") && (!strings.Contains(o, "_local AS") || !strings.Contains(o, "FROM rdmawatch.port_samples_local")) {
					t.Errorf("%s: materialized view not on the local tables:\n%s", m.file, head)
				}
			}
		}
	}
}

func TestClusterRewriteCases(t *testing.T) {
	rw := goldenRewriter(t)
	for _, tc := range []struct {
		name, in string
		want     []string
		err      string
	}{
		{
			name: "engine with version column and settings",
			in:   "CREATE TABLE inventory\n(\n    node String\n)\nENGINE = ReplacingMergeTree(last_seen)\nORDER BY node\nSETTINGS index_granularity = 8192",
			want: []string{
				"CREATE TABLE rdmawatch.inventory_local ON CLUSTER rdmawatch_test\n(\n    node String\n)\nENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rdmawatch/inventory', '{replica}', last_seen)\nORDER BY node\nSETTINGS index_granularity = 8192",
				"CREATE TABLE rdmawatch.inventory ON CLUSTER rdmawatch_test AS rdmawatch.inventory_local\nENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'inventory_local', cityHash64(node))",
			},
		},
		{
			name: "alter mixes column and table clauses",
			in:   "ALTER TABLE events MODIFY TTL detected_at_ts + INTERVAL 1 DAY, ADD COLUMN x Array(UInt8) DEFAULT [1, 2] CODEC(ZSTD(1)), DROP COLUMN y",
			want: []string{
				"ALTER TABLE rdmawatch.events_local ON CLUSTER rdmawatch_test MODIFY TTL detected_at_ts + INTERVAL 1 DAY, ADD COLUMN x Array(UInt8) DEFAULT [1, 2] CODEC(ZSTD(1)), DROP COLUMN y",
				"DROP TABLE IF EXISTS rdmawatch.events ON CLUSTER rdmawatch_test",
				"CREATE TABLE rdmawatch.events ON CLUSTER rdmawatch_test AS rdmawatch.events_local\nENGINE = Distributed('rdmawatch_test', 'rdmawatch', 'events_local', cityHash64(id))",
			},
		},
		{
			name: "view: array join, qualified and table functions stay",
			in:   "CREATE VIEW v AS SELECT a FROM events LEFT ARRAY JOIN affected AS a JOIN system.one USING dummy JOIN numbers(3) USING number",
			want: []string{"CREATE VIEW rdmawatch.v ON CLUSTER rdmawatch_test AS SELECT a FROM rdmawatch.events LEFT ARRAY JOIN affected AS a JOIN system.one USING dummy JOIN numbers(3) USING number"},
		},
		{name: "new table needs a sharding key", in: "CREATE TABLE foo (x UInt8) ENGINE = MergeTree() ORDER BY x", err: "no sharding key"},
		{name: "non-MergeTree engine", in: "CREATE TABLE events (x UInt8) ENGINE = Memory", err: "MergeTree-family"},
		{name: "unknown statement", in: "INSERT INTO events (x) SELECT 1", err: "no rewrite"},
		{
			name: "drop of a view, to create it again",
			in:   "DROP TABLE IF EXISTS events_latest",
			want: []string{"DROP TABLE IF EXISTS rdmawatch.events_latest ON CLUSTER rdmawatch_test"},
		},
		{name: "drop of a table", in: "DROP TABLE IF EXISTS events", err: "migrations drop only views"},
		{name: "alter of another table", in: "ALTER TABLE foo ADD COLUMN x UInt8", err: "not a table rdmawatch distributes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rw.rewrite(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "\n;;\n") != strings.Join(tc.want, "\n;;\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n;;\n"), strings.Join(tc.want, "\n;;\n"))
			}
		})
	}
}

func TestClusterRewriterOptions(t *testing.T) {
	if _, err := newClusterRewriter(Cluster{Name: "a-b"}, "db", nil); err == nil {
		t.Error("cluster name a-b accepted")
	}
	if _, err := newClusterRewriter(Cluster{Name: "c"}, "my-db", nil); err == nil {
		t.Error("database my-db accepted")
	}
	if _, err := newClusterRewriter(Cluster{Name: "c", ZooKeeperPath: "x'"}, "db", nil); err == nil {
		t.Error("quoted zookeeper path accepted")
	}
	rw, err := newClusterRewriter(Cluster{Name: "c", ZooKeeperPath: "/zk/{shard}/two/", unreplicated: true, local: true}, "db", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rw.rewrite("CREATE TABLE IF NOT EXISTS events (id String) ENGINE = ReplacingMergeTree() ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	want := "CREATE TABLE IF NOT EXISTS db.events_local\n(id String) ENGINE = ReplacingMergeTree() ORDER BY id"
	if got[0] != want {
		t.Errorf("unreplicated, local:\n%s\nwant\n%s", got[0], want)
	}
	rw, _ = newClusterRewriter(Cluster{Name: "c", ZooKeeperPath: "/zk/{shard}/two/"}, "db", nil)
	got, _ = rw.rewrite("CREATE TABLE events (id String) ENGINE = MergeTree() ORDER BY id")
	if !strings.Contains(got[0], "ENGINE = ReplicatedMergeTree('/zk/{shard}/two/events', '{replica}') ORDER BY id") {
		t.Errorf("zookeeper path: %s", got[0])
	}
}

// TestSingleServerUnchanged: without cluster mode every statement runs as
// the file has it.
func TestSingleServerUnchanged(t *testing.T) {
	fsys := fstest.MapFS{"m/0001_a.sql": {Data: []byte("CREATE TABLE IF NOT EXISTS events (x UInt8) ENGINE = Memory;\n")}}
	p, err := plan(fsys, "m", Version{18, 16, 1})
	if err != nil {
		t.Fatal(err)
	}
	if p[0].stmts[0] != "CREATE TABLE IF NOT EXISTS events (x UInt8) ENGINE = Memory" {
		t.Errorf("statement %q", p[0].stmts[0])
	}
}
