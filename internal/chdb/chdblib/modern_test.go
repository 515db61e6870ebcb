//go:build chdb

package chdblib

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/pipeline"
	"github.com/rdmawatch/rdmawatch/report"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/schemas/trace"
	"github.com/rdmawatch/rdmawatch/sink"
)

// Environment: RDMAWATCH_CHDB_LIB is libchdb.so (`make test-modern` fetches
// it). Without it the tier skips, except in CI (CI=true) or with
// RDMAWATCH_REQUIRE_CHDB=1, where a missing library is a failure.
const envLib = "RDMAWATCH_CHDB_LIB"

var dataDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rdmawatch-chdb-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dataDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func libPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv(envLib)
	if p == "" {
		msg := envLib + " is not set: `make test-modern` fetches the chDB library (ClickHouse 26.x) and sets it"
		if os.Getenv("CI") == "true" || os.Getenv("RDMAWATCH_REQUIRE_CHDB") == "1" {
			t.Fatal(msg + " (CI=true or RDMAWATCH_REQUIRE_CHDB=1 makes this a failure)")
		}
		t.Skip(msg)
	}
	return p
}

// open returns a connection into a database of this test's own.
func open(t *testing.T) *Conn {
	t.Helper()
	db := "t_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(t.Name()))
	c, err := Open(libPath(t), dataDir, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS `"+db+"`")
		c.Close()
	})
	return c
}

func TestModernMigrations(t *testing.T) {
	c := open(t)
	ctx := context.Background()
	v, err := chdb.ServerVersion(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if !v.AtLeast(chdb.Version{Major: 24}) {
		t.Fatalf("the chDB library is ClickHouse %s, want 24 or later", v)
	}
	t.Logf("ClickHouse %s (chDB)", v)
	applied, err := chdb.Migrate(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) < 14 {
		t.Errorf("applied %v, want every migration through 0014", applied)
	}
	if again, err := chdb.Migrate(ctx, c); err != nil || len(again) != 0 {
		t.Errorf("second migrate: %v, %v; want nothing applied", again, err)
	}
	if err := chdb.CheckSchema(ctx, c); err != nil {
		t.Error(err)
	}
	for _, want := range []string{"counter_dictionary", "rollup_minute", "rollup_hour", "rollup_day", "events_latest", "port_minute_v", "port_hour_v", "topology_ports"} {
		var n uint64
		if err := c.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = @n", ch.Named("n", want)).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s: %d, %v", want, n, err)
		}
	}
}

// fabric is one replayed scenario loaded into both servers.
type fabric struct {
	old, modern chdb.Conn
	from, to    time.Time
	events      []schemas.Event
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// loadFabric replays scenario through the real pipeline (NATS, processors,
// sink) into a private 18.16 database, then writes the rows the sink wrote,
// with the sink's own column lists, into 26.x through the library's
// JSONCompactEachRow input; the topology and both rollups are loaded by the
// same code on each.
func loadFabric(t *testing.T, scenario string) *fabric {
	t.Helper()
	modern := open(t)
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join(repoRoot(), "test", "scenarios", scenario)
	topo, err := schemas.LoadTopology(filepath.Join(dir, "topology.json"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(filepath.Join(dir, "trace.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var evbuf bytes.Buffer
	if _, err := pipeline.Run(ctx, pipeline.Config{Source: collector.NewTraceSource(tr), Topology: topo, EventsOut: &evbuf, ClickHouse: dsn}); err != nil {
		t.Fatalf("replay %s into 18.16: %v", scenario, err)
	}
	old := chtest.Open(t, dsn)
	f := &fabric{old: old, modern: modern}
	dec := json.NewDecoder(&evbuf)
	for {
		var e schemas.Event
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		f.events = append(f.events, e)
	}
	if _, err := chdb.Migrate(ctx, modern); err != nil {
		t.Fatalf("migrate 26.x: %v", err)
	}
	// The scenario's data time (March 2026) is older than the TTLs
	// migration 0008/0013 set on 20.3+, which drop expired rows as they are
	// inserted: 18.16 has no TTL and keeps them. The comparison is of the
	// reads, so the TTLs go; retention is checked on its own below.
	ttl, err := modern.Query(ctx, "SELECT name FROM system.tables WHERE database = currentDatabase() AND engine LIKE '%MergeTree' AND create_table_query LIKE '% TTL %'")
	if err != nil {
		t.Fatal(err)
	}
	var ttlTables []string
	for ttl.Next() {
		var n string
		if err := ttl.Scan(&n); err != nil {
			t.Fatal(err)
		}
		ttlTables = append(ttlTables, n)
	}
	for _, n := range ttlTables {
		if err := modern.Exec(ctx, "ALTER TABLE "+n+" REMOVE TTL"); err != nil {
			t.Fatalf("26.x: remove the TTL of %s: %v", n, err)
		}
	}
	for _, tb := range []struct {
		table string
		cols  []string
	}{{"port_samples", sink.SampleColumns}, {"events", sink.EventColumns}, {"inventory", sink.InventoryColumns}, {"port_config", sink.ConfigColumns}} {
		n := copyRows(t, ctx, old, modern, tb.table, tb.cols)
		t.Logf("%s: %d rows", tb.table, n)
	}
	for _, c := range []chdb.Conn{old, modern} {
		if _, _, err := chdb.LoadTopology(ctx, c, topo); err != nil {
			t.Fatal(err)
		}
	}
	from, to, ok, err := report.DataRange(ctx, old)
	if err != nil || !ok {
		t.Fatalf("data range: %v %v", ok, err)
	}
	f.from, f.to = from, to
	for _, c := range []chdb.Conn{old, modern} {
		for _, r := range chdb.Rollups {
			if err := chdb.Roll(ctx, c, r, from, to); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

// copyRows reads the table's rows from 18.16 as the driver scans them and
// appends them to a batch on 26.x: the sink's INSERT, column list and Go
// values, through the library's input format.
func copyRows(t *testing.T, ctx context.Context, from, to chdb.Conn, table string, cols []string) int {
	t.Helper()
	rows, err := from.Query(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+table)
	if err != nil {
		t.Fatalf("read %s from 18.16: %v", table, err)
	}
	defer rows.Close()
	b, err := to.PrepareBatch(ctx, "INSERT INTO "+table+" ("+strings.Join(cols, ", ")+")")
	if err != nil {
		t.Fatalf("prepare %s on 26.x: %v", table, err)
	}
	n := 0
	types := rows.ColumnTypes()
	for rows.Next() {
		ptrs := make([]any, len(types))
		for i, ct := range types {
			ptrs[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		vals := make([]any, len(ptrs))
		for i, p := range ptrs {
			vals[i] = reflect.ValueOf(p).Elem().Interface()
		}
		if err := b.Append(vals...); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatalf("insert %d rows into %s on 26.x: %v", n, table, err)
	}
	return n
}

// TestSameAnswers: one replayed fabric on 18.16 and on 26.x; every shipped
// query, the postmortem's reads and the Grafana dashboard's SQL must give
// the same rows (floats within rounding).
func TestSameAnswers(t *testing.T) {
	f := loadFabric(t, "pfc-storm")
	ctx := context.Background()
	if len(f.events) == 0 {
		t.Fatal("the replay gave no events")
	}
	subject := f.events[0].Subject
	qs, err := chdb.Queries()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		t.Run("query "+q.Name, func(t *testing.T) {
			p := report.Params{From: f.from, To: f.to, Limit: 1000}
			for _, n := range q.Needs {
				if n == "node" {
					p.Node, p.Device, p.Port = subject.Node, subject.Device, subject.Port
				}
			}
			variants := []report.Params{p}
			if q.Takes("by") {
				variants = nil
				for _, by := range []string{"leaf", "rack", "node", "fabric"} {
					for _, bucket := range []string{"hour", "day", "week"} {
						v := p
						v.By, v.Bucket = by, bucket
						variants = append(variants, v)
					}
				}
			}
			for _, v := range variants {
				a, err := report.RunQuery(ctx, f.old, q, v)
				if err != nil {
					t.Fatalf("18.16 (by %q, bucket %q): %v", v.By, v.Bucket, err)
				}
				b, err := report.RunQuery(ctx, f.modern, q, v)
				if err != nil {
					t.Fatalf("26.x (by %q, bucket %q): %v", v.By, v.Bucket, err)
				}
				if len(a.Rows) == 0 {
					t.Logf("no rows on 18.16 for this scenario: only the statement and its columns are compared")
				}
				sameResult(t, a, b)
			}
		})
	}
	t.Run("postmortem", func(t *testing.T) {
		da, db := t.TempDir(), t.TempDir()
		pa, ia, err := report.Postmortem(ctx, f.old, report.Params{From: f.from, To: f.to}, da)
		if err != nil {
			t.Fatalf("18.16: %v", err)
		}
		pb, ib, err := report.Postmortem(ctx, f.modern, report.Params{From: f.from, To: f.to}, db)
		if err != nil {
			t.Fatalf("26.x: %v", err)
		}
		if len(ia) != len(ib) || len(ia) == 0 {
			t.Fatalf("%d incidents on 18.16, %d on 26.x", len(ia), len(ib))
		}
		ma, _ := os.ReadFile(pa)
		mb, _ := os.ReadFile(pb)
		if !bytes.Equal(ma, mb) {
			t.Errorf("report.md differs:\n18.16:\n%s\n26.x:\n%s", firstDiff(string(ma), string(mb)), firstDiff(string(mb), string(ma)))
		}
	})
	t.Run("grafana", func(t *testing.T) {
		stmts := grafanaSQL(t)
		if len(stmts) == 0 {
			t.Fatal("no ClickHouse panels in deploy/grafana/rdmawatch.json")
		}
		// The leaf and node variables at All (the custom all value '*')
		// and at the subject's leaf and node, as Grafana formats a
		// selection for SQL.
		var leaf string
		if err := f.old.QueryRow(ctx, "SELECT any(switch) FROM topology_ports FINAL WHERE tier = 'leaf' AND node = @n", ch.Named("n", subject.Node)).Scan(&leaf); err != nil || leaf == "" {
			t.Fatalf("the leaf of %s: %q, %v", subject.Node, leaf, err)
		}
		for _, sel := range []struct{ leaf, node string }{{"'*'", "'*'"}, {"'" + leaf + "'", "'*'"}, {"'*'", "'" + subject.Node + "'"}} {
			macros := strings.NewReplacer("$__fromTime", fmt.Sprintf("toDateTime(%d)", f.from.Unix()), "$__toTime", fmt.Sprintf("toDateTime(%d)", f.to.Unix()),
				"${leaf}", sel.leaf, "${node}", sel.node)
			for title, sql := range stmts {
				sql = macros.Replace(sql)
				a, err := run(ctx, f.old, sql)
				if err != nil {
					t.Errorf("panel %q (leaf %s, node %s) on 18.16: %v", title, sel.leaf, sel.node, err)
					continue
				}
				b, err := run(ctx, f.modern, sql)
				if err != nil {
					t.Errorf("panel %q (leaf %s, node %s) on 26.x: %v", title, sel.leaf, sel.node, err)
					continue
				}
				if len(a.Rows) == 0 && !strings.Contains(title, "Open incidents") {
					t.Errorf("panel %q (leaf %s, node %s): no rows on 18.16: the filter lost the fabric", title, sel.leaf, sel.node)
				}
				t.Run(fmt.Sprintf("%s leaf=%s node=%s", title, sel.leaf, sel.node), func(t *testing.T) { sameResult(t, a, b) })
			}
		}
	})
	t.Run("retention", func(t *testing.T) {
		r := chdb.Retention{Raw: 24 * time.Hour, Minute: 48 * time.Hour, Hour: 72 * time.Hour}
		now := f.to.Add(10 * 24 * time.Hour)
		for name, c := range map[string]chdb.Conn{"18.16": f.old, "26.x": f.modern} {
			parts, err := chdb.ApplyRetention(ctx, c, r, now, true)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			dropped := 0
			for _, p := range parts {
				if p.Dropped {
					dropped++
				}
			}
			if dropped == 0 {
				t.Errorf("%s: a dry run 10 days on drops nothing of %d partitions", name, len(parts))
			}
		}
	})
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range la {
		if i >= len(lb) || la[i] != lb[i] {
			return fmt.Sprintf("line %d: %s", i+1, la[i])
		}
	}
	return "(prefix)"
}

// run reads any statement into a report.Result, as RunQuery does.
func run(ctx context.Context, c chdb.Conn, sql string) (*report.Result, error) {
	return report.RunQuery(ctx, c, chdb.Query{Name: "grafana", SQL: sql}, report.Params{From: time.Unix(1, 0), To: time.Unix(2, 0)})
}

// grafanaSQL returns the rawSql of every ClickHouse panel, by title.
func grafanaSQL(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "grafana", "rdmawatch.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(raw []json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p struct {
				Title   string            `json:"title"`
				Panels  []json.RawMessage `json:"panels"`
				Targets []struct {
					RawSQL string `json:"rawSql"`
				} `json:"targets"`
			}
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatal(err)
			}
			for i, tg := range p.Targets {
				if tg.RawSQL != "" {
					out[fmt.Sprintf("%s#%d", p.Title, i)] = tg.RawSQL
				}
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok && v.Type == "query" && q != "" {
			out["variable "+v.Name] = q
		}
	}
	return out
}

// sameResult compares two results: columns, row count, then every cell,
// numbers as float64 within a relative 1e-9 (or 1e-12 absolute).
func sameResult(t *testing.T, a, b *report.Result) {
	t.Helper()
	if !reflect.DeepEqual(a.Columns, b.Columns) {
		t.Fatalf("columns differ:\n18.16 %v\n26.x  %v", a.Columns, b.Columns)
	}
	if len(a.Rows) != len(b.Rows) {
		t.Fatalf("18.16 %d rows, 26.x %d rows", len(a.Rows), len(b.Rows))
	}
	bad := 0
	for i := range a.Rows {
		for j, col := range a.Columns {
			if !sameValue(a.Rows[i][j], b.Rows[i][j]) {
				if bad++; bad <= 10 {
					t.Errorf("row %d column %s: 18.16 %#v, 26.x %#v", i, col, deref(a.Rows[i][j]), deref(b.Rows[i][j]))
				}
			}
		}
	}
}

func deref(v any) any {
	rv := reflect.ValueOf(v)
	for rv.IsValid() && rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return nil
	}
	return rv.Interface()
}

func sameValue(x, y any) bool {
	x, y = deref(x), deref(y)
	if fx, ok := toFloat(x); ok {
		fy, ok := toFloat(y)
		if !ok {
			return false
		}
		if math.IsNaN(fx) || math.IsNaN(fy) {
			return math.IsNaN(fx) && math.IsNaN(fy)
		}
		d := math.Abs(fx - fy)
		return d <= 1e-12 || d <= 1e-9*math.Max(math.Abs(fx), math.Abs(fy))
	}
	if tx, ok := x.(time.Time); ok {
		ty, ok := y.(time.Time)
		return ok && tx.Equal(ty)
	}
	rx, ry := reflect.ValueOf(x), reflect.ValueOf(y)
	if rx.IsValid() && ry.IsValid() && rx.Kind() == reflect.Slice && ry.Kind() == reflect.Slice {
		if rx.Len() != ry.Len() {
			return false
		}
		for i := 0; i < rx.Len(); i++ {
			if !sameValue(rx.Index(i).Interface(), ry.Index(i).Interface()) {
				return false
			}
		}
		return true
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

func toFloat(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint()), true
	}
	return 0, false
}
