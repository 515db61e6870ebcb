package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
)

// What rdmawatch's ClickHouse users may do, measured on the real 18.16
// server with the shipped users files (deploy/clickhouse/README.md has the
// table these tests keep true). Ports: this file's 14590-14593.

// outcome is what a statement must do for a user.
type outcome int

const (
	// allowed: the role needs it; it must succeed.
	allowed outcome = iota
	// refused: the server must refuse it for lack of rights.
	refused
	// gap: 18.16 cannot refuse it with a users file. The test logs what
	// happened and the release feature that refuses it (docs say what to
	// do there); it asserts nothing, the outcome is the server's.
	gap
)

type chCase struct {
	name, query string
	want        outcome
	feature     string // for gap: what refuses it on current releases
}

// The refusals of a users file: READONLY, DATABASE_ACCESS_DENIED,
// QUERY_IS_PROHIBITED (allow_ddl) and, on current releases, ACCESS_DENIED.
// Any other error (a syntax error, a missing file, a broken connection) is
// not a refusal, so a test cannot pass by failing for another reason.
var refusalCodes = map[int32]string{164: "READONLY", 291: "DATABASE_ACCESS_DENIED", 392: "QUERY_IS_PROHIBITED", 497: "ACCESS_DENIED"}

func isRefusal(err error) bool {
	var exc *ch.Exception
	if !errors.As(err, &exc) {
		return false
	}
	_, ok := refusalCodes[exc.Code]
	return ok
}

// chRun runs q to its end: a SELECT reads every row, anything else is
// executed.
func chRun(ctx context.Context, conn driver.Conn, q string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if !strings.HasPrefix(strings.ToUpper(strings.TrimSpace(q)), "SELECT") {
		return conn.Exec(ctx, q)
	}
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
	}
	return rows.Err()
}

func runChCases(t *testing.T, ctx context.Context, user string, conn driver.Conn, cases []chCase) {
	t.Helper()
	for _, c := range cases {
		err := chRun(ctx, conn, c.query)
		switch c.want {
		case allowed:
			if err != nil {
				t.Errorf("%s: %s (%s) needs to work: %v", user, c.name, c.query, err)
			}
		case refused:
			if !isRefusal(err) {
				t.Errorf("%s: %s (%s): %v, want a refusal for lack of rights", user, c.name, c.query, err)
			}
		case gap:
			got := "ALLOWED"
			if err != nil {
				got = "failed: " + err.Error()
			}
			t.Logf("18.16 cannot refuse %s: %s (%s): %s; refused on current releases by %s", user, c.name, c.query, got, c.feature)
		}
	}
}

// confinedClickHouse is a private server with the shipped users, the
// schema migrated by rdmawatch_admin through `rdmawatch migrate`, and
// another application's data beside it: a database sec_other and a table
// in default. It skips on a server other than 18.x: the cases pin what the
// 18.16 users file measurably does.
type confinedClickHouse struct {
	admin, sink, reader, root driver.Conn
	tcp                       int
}

func newConfinedClickHouse(t *testing.T, ctx context.Context, tcp, httpPort int) *confinedClickHouse {
	t.Helper()
	admin, sink, reader := securedClickHouse(t, tcp, httpPort)
	c := &confinedClickHouse{tcp: tcp}
	// local.sh keeps the passwordless default user on loopback: it plays
	// the other application and the server's own administrator.
	c.root = chtest.Open(t, fmt.Sprintf("clickhouse://127.0.0.1:%d/default", tcp))
	v, err := chdb.ServerVersion(ctx, c.root)
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != 18 {
		t.Skipf("ClickHouse %s: these cases pin what rdmawatch-users.xml does on 18.16; on current releases use rdmawatch-users-grants.xml", v)
	}
	mustRun(t, []string{"RDMAWATCH_CLICKHOUSE=" + admin}, "migrate")
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS sec_other",
		"CREATE TABLE IF NOT EXISTS sec_other.secrets (s String) ENGINE = Memory",
		"INSERT INTO sec_other.secrets (s) SELECT 'other app secret'",
		"CREATE TABLE IF NOT EXISTS default.sec_other_app (s String) ENGINE = Memory",
		"INSERT INTO default.sec_other_app (s) SELECT 'other app secret'",
	} {
		if err := chRun(ctx, c.root, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	c.admin, c.sink, c.reader = chtest.Open(t, admin), chtest.Open(t, sink), chtest.Open(t, reader)
	return c
}

// outbound counts what the server reaches outside itself: HTTP requests
// (url()) and TCP connections (remote() to another server), both on
// listeners of this test on loopback.
type outbound struct {
	httpURL        string
	tcpAddr        string
	requests, dial atomic.Int64
}

func newOutbound(t *testing.T) *outbound {
	t.Helper()
	o := &outbound{}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.requests.Add(1)
		fmt.Fprintln(w, "fetched")
	})}
	go func() { _ = srv.Serve(hl) }()
	t.Cleanup(func() { srv.Close() })
	o.httpURL = "http://" + hl.Addr().String() + "/ssrf"
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tl.Close() })
	go func() {
		for {
			conn, err := tl.Accept()
			if err != nil {
				return
			}
			o.dial.Add(1)
			conn.Close()
		}
	}()
	o.tcpAddr = tl.Addr().String()
	return o
}

// TestSecurityClickHouseUsers runs each of rdmawatch's ClickHouse users
// against what its role needs and what it must not do, on one server.
func TestSecurityClickHouseUsers(t *testing.T) {
	ctx := ctxT(t, 4*time.Minute)
	c := newConfinedClickHouse(t, ctx, 14590, 14591)
	t.Run("sink", func(t *testing.T) { testClickHouseSink(t, ctx, c) })
	t.Run("reader", func(t *testing.T) { testClickHouseReader(t, ctx, c) })
	t.Run("admin", func(t *testing.T) {
		out := newOutbound(t)
		runChCases(t, ctx, "rdmawatch_admin", c.admin, []chCase{
			{"retention's parts", "SELECT count() FROM system.parts WHERE database = currentDatabase()", allowed, ""},
			{"read another database", "SELECT * FROM sec_other.secrets", refused, ""},
			{"create another database", "CREATE DATABASE evil", refused, ""},
			{"read default", "SELECT * FROM default.sec_other_app", gap,
				"rdmawatch-users-grants.xml (current releases let migrate connect through default without rights on it)"},
			{"url()", "SELECT * FROM url('" + out.httpURL + "', TSV, 'x String')", gap,
				"rdmawatch-users-grants.xml (no URL source grant)"},
			{"system", "SYSTEM DROP MARK CACHE", gap, "rdmawatch-users-grants.xml (no SYSTEM grant)"},
		})
	})
}

// testClickHouseSink: rdmawatch_sink does what the sink and `rdmawatch
// rollup` do, and nothing outside its database or DDL.
func testClickHouseSink(t *testing.T, ctx context.Context, c *confinedClickHouse) {
	out := newOutbound(t)

	// What the sink runs (sink/, internal/chdb): the schema check, its
	// INSERTs, the rolls, the rows-already-there check with its external
	// table, and the wait for its own failed inserts.
	now := time.Now()
	needs := []struct {
		name string
		run  func() error
	}{
		{"check the schema", func() error { return chdb.CheckSchema(ctx, c.sink) }},
		{"insert a batch into each table it writes", func() error {
			for table, col := range map[string]string{"port_samples": "node", "events": "id", "inventory": "node",
				"port_config": "node", "rollup_minute": "node", "rollup_hour": "node", "rollup_day": "node", "rollup_day_group": "grp"} {
				b, err := c.sink.PrepareBatch(ctx, "INSERT INTO "+table+" ("+col+")")
				if err != nil {
					return fmt.Errorf("%s: %w", table, err)
				}
				if err := b.Append("sec-probe"); err != nil {
					return fmt.Errorf("%s: %w", table, err)
				}
				if err := b.Send(); err != nil {
					return fmt.Errorf("%s: %w", table, err)
				}
			}
			return nil
		}},
		{"roll", func() error {
			for _, r := range chdb.Rollups {
				if err := chdb.Roll(ctx, c.sink, r, now.Add(-2*time.Hour), now); err != nil {
					return err
				}
			}
			return nil
		}},
		{"find unrolled minutes", func() error {
			_, err := chdb.UnrolledMinutes(ctx, c.sink, now.Add(-time.Hour), 15*time.Minute)
			return err
		}},
		{"rows already there", func() error {
			keys, err := ext.NewTable("_keys", ext.Column("node", "String"))
			if err != nil {
				return err
			}
			if err := keys.Append("gpu-001"); err != nil {
				return err
			}
			return chRun(ch.Context(ctx, ch.WithExternalTable(keys)), c.sink,
				"SELECT node FROM port_samples WHERE ts >= toDateTime(0) AND node IN (SELECT node FROM _keys)")
		}},
	}
	for _, n := range needs {
		if err := n.run(); err != nil {
			t.Errorf("sink: %s: %v", n.name, err)
		}
	}

	runChCases(t, ctx, "rdmawatch_sink", c.sink, []chCase{
		{"its failed inserts", "SELECT count() FROM system.processes WHERE query_id IN ('rdmawatch-sink-x')", allowed, ""},

		{"read another database", "SELECT * FROM sec_other.secrets", refused, ""},
		{"write another database", "INSERT INTO sec_other.secrets (s) SELECT 'x'", refused, ""},
		{"read default", "SELECT * FROM default.sec_other_app", refused, ""},
		{"write default", "INSERT INTO default.sec_other_app (s) SELECT 'x'", refused, ""},
		{"merge() over another database", "SELECT * FROM merge('sec_other', '.*')", refused, ""},
		{"remote() to this server's other database", fmt.Sprintf("SELECT * FROM remote('127.0.0.1:%d', sec_other.secrets)", c.tcp), refused, ""},
		{"create table", "CREATE TABLE evil (x UInt8) ENGINE = Memory", refused, ""},
		{"create database", "CREATE DATABASE evil", refused, ""},
		{"drop table", "DROP TABLE topology_links", refused, ""},
		{"truncate", "TRUNCATE TABLE topology_links", refused, ""},
		{"alter", "ALTER TABLE events ADD COLUMN evil UInt8", refused, ""},
		{"mutation", "ALTER TABLE port_samples DELETE WHERE 1", refused, ""},
		{"rename", "RENAME TABLE topology_links TO evil", refused, ""},
		{"optimize", "OPTIMIZE TABLE port_samples FINAL", refused, ""},
		{"detach", "DETACH TABLE port_samples", refused, ""},
		{"system", "SYSTEM DROP MARK CACHE", refused, ""},
		{"system merges", "SYSTEM STOP MERGES", refused, ""},
		{"lift allow_ddl", "SELECT 1 SETTINGS allow_ddl = 1", refused, ""},

		{"insert schema_migrations", "INSERT INTO schema_migrations (version, name, applied_at) SELECT 9999, 'sec-probe', now()", gap,
			"rdmawatch-users-grants.xml (ClickHouse 23.5+: INSERT granted on the eight tables the sink writes only)"},
		{"insert a table it does not write", "INSERT INTO topology_links (fabric) SELECT 'sec-probe'", gap,
			"rdmawatch-users-grants.xml (per-table INSERT grants)"},
		{"read a table it does not read", "SELECT count() FROM events", gap,
			"rdmawatch-users-grants.xml (per-table SELECT grants)"},
		{"url()", "SELECT * FROM url('" + out.httpURL + "', TSV, 'x String')", gap,
			"rdmawatch-users-grants.xml (no URL source grant; readonly 1 would refuse every table function, but INSERT needs readonly 0)"},
		{"remote() to another server", "SELECT * FROM remote('" + out.tcpAddr + "', system.one)", gap,
			"rdmawatch-users-grants.xml (no REMOTE source grant)"},
		{"file()", "SELECT * FROM file('sec-probe.tsv', TSV, 'x String')", gap,
			"rdmawatch-users-grants.xml (no FILE source grant)"},
	})
	t.Logf("18.16: the sink's url() made the server send %d HTTP request(s) to %s, its remote() %d connection(s) to %s",
		out.requests.Load(), out.httpURL, out.dial.Load(), out.tcpAddr)

	t.Run("kill another user's query", func(t *testing.T) {
		victim := startVictim(t, ctx, c.root)
		var seen string
		if err := c.sink.QueryRow(ctx, "SELECT query FROM system.processes WHERE query_id = '"+victim.id+"'").Scan(&seen); err == nil {
			t.Logf("18.16 cannot hide other users' queries from the sink (system.processes shows %q); on current releases rdmawatch-users-grants.xml grants it only the query_id column, which hides them where select_from_system_db_requires_grant is on", seen)
		}
		err := chRun(ctx, c.sink, "KILL QUERY WHERE query_id = '"+victim.id+"' SYNC")
		got := "ALLOWED"
		if err != nil {
			got = "failed: " + err.Error()
		}
		t.Logf("18.16 cannot refuse rdmawatch_sink KILL QUERY of another user's query: %s, the victim ended: %v; "+
			"refused on current releases by rdmawatch-users-grants.xml (no KILL QUERY grant)", got, victim.ended(5*time.Second))
	})
}

// testClickHouseReader: rdmawatch_reader reads its database and nothing
// else, and changes nothing.
func testClickHouseReader(t *testing.T, ctx context.Context, c *confinedClickHouse) {
	out := newOutbound(t)

	// Every table and view of the database, as `query`, `postmortem` and
	// dashboards read them.
	var db string
	if err := c.reader.QueryRow(ctx, "SELECT currentDatabase()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	rows, err := c.reader.Query(ctx, "SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	var cases []chCase
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, chCase{"read " + name, "SELECT count() FROM " + name, allowed, ""})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if len(cases) < 10 {
		t.Fatalf("the reader sees %d tables in %s after migrate: %v", len(cases), db, cases)
	}
	cases = append(cases, []chCase{
		{"read another database", "SELECT * FROM sec_other.secrets", refused, ""},
		{"read default", "SELECT * FROM default.sec_other_app", refused, ""},
		{"insert schema_migrations", "INSERT INTO schema_migrations (version, name, applied_at) SELECT 9999, 'sec-probe', now()", refused, ""},
		{"insert events", "INSERT INTO events (id) SELECT 'sec-probe'", refused, ""},
		{"write another database", "INSERT INTO sec_other.secrets (s) SELECT 'x'", refused, ""},
		{"url()", "SELECT * FROM url('" + out.httpURL + "', TSV, 'x String')", refused, ""},
		{"remote() to another server", "SELECT * FROM remote('" + out.tcpAddr + "', system.one)", refused, ""},
		{"remote() to this server", fmt.Sprintf("SELECT count() FROM remote('127.0.0.1:%d', %s.events)", c.tcp, db), refused, ""},
		{"file()", "SELECT * FROM file('sec-probe.tsv', TSV, 'x String')", refused, ""},
		{"merge()", "SELECT * FROM merge('sec_other', '.*')", refused, ""},
		{"create table", "CREATE TABLE evil (x UInt8) ENGINE = Memory", refused, ""},
		{"drop table", "DROP TABLE events", refused, ""},
		{"alter", "ALTER TABLE events DELETE WHERE 1", refused, ""},
		{"optimize", "OPTIMIZE TABLE events", refused, ""},
		{"system", "SYSTEM DROP MARK CACHE", refused, ""},
		{"lift readonly", "SELECT 1 SETTINGS readonly = 0", refused, ""},
	}...)
	runChCases(t, ctx, "rdmawatch_reader", c.reader, cases)
	if n, d := out.requests.Load(), out.dial.Load(); n+d != 0 {
		t.Errorf("the reader's table functions reached out: %d HTTP request(s), %d connection(s)", n, d)
	}

	t.Run("kill another user's query", func(t *testing.T) {
		victim := startVictim(t, ctx, c.root)
		err := chRun(ctx, c.reader, "KILL QUERY WHERE query_id = '"+victim.id+"' SYNC")
		if !isRefusal(err) {
			t.Errorf("reader KILL QUERY of the default user's query: %v, want refused", err)
		}
		if victim.ended(time.Second) {
			t.Error("the victim query ended after the reader's KILL QUERY")
		}
	})
}

// TestSecurityClickHouseGrantsFileOn1816: rdmawatch-users-grants.xml is for
// ClickHouse 23.5 and later; 18.16 ignores <grants>, so the file makes its
// users fail at login there rather than run without limits.
func TestSecurityClickHouseGrantsFileOn1816(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	const tcp = 14592
	root := privateClickHouse(t, tcp, 14593, "RDMAWATCH_CH_USERS=grants",
		"RDMAWATCH_CH_ADMIN_PASSWORD="+chAdminPW, "RDMAWATCH_CH_SINK_PASSWORD="+chSinkPW, "RDMAWATCH_CH_READER_PASSWORD="+chReaderPW)
	v, err := chdb.ServerVersion(ctx, chtest.Open(t, root))
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != 18 {
		t.Skipf("ClickHouse %s reads <grants>: this checks 18.16's refusal", v)
	}
	for user, pw := range map[string]string{"rdmawatch_admin": chAdminPW, "rdmawatch_sink": chSinkPW, "rdmawatch_reader": chReaderPW} {
		conn, err := ch.Open(&ch.Options{Addr: []string{fmt.Sprintf("127.0.0.1:%d", tcp)},
			Auth: ch.Auth{Database: "default", Username: user, Password: pw}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = chRun(c, conn, "SELECT count() FROM system.one")
		cancel()
		conn.Close()
		if err == nil {
			t.Errorf("%s logged in to 18.16 with rdmawatch-users-grants.xml: 18.16 ignores <grants>, so it would have every right", user)
			continue
		}
		t.Logf("%s refused by 18.16 as intended: %v", user, err)
	}
}

// victimQuery is a query of the default user that runs until killed (a
// second of sleep per row, so it costs no CPU), ended at cleanup.
type victimQuery struct {
	id   string
	done chan error
}

func startVictim(t *testing.T, ctx context.Context, root driver.Conn) *victimQuery {
	t.Helper()
	v := &victimQuery{id: fmt.Sprintf("sec-victim-%d", time.Now().UnixNano()), done: make(chan error, 1)}
	go func() {
		v.done <- chRun(ch.Context(ctx, ch.WithQueryID(v.id)), root,
			"SELECT sleep(1) FROM numbers(30) SETTINGS max_block_size = 1")
	}()
	t.Cleanup(func() {
		_ = chRun(context.Background(), root, "KILL QUERY WHERE query_id = '"+v.id+"'")
		<-v.done
	})
	testwait.For(t, 10*time.Second, "the victim query running", func() error {
		var n uint64
		if err := root.QueryRow(ctx, "SELECT count() FROM system.processes WHERE query_id = '"+v.id+"'").Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return errors.New("the victim query is not running yet")
		}
		return nil
	})
	return v
}

// ended reports whether the victim query ended within d.
func (v *victimQuery) ended(d time.Duration) bool {
	select {
	case err := <-v.done:
		v.done <- err // for the cleanup
		return true
	case <-time.After(d):
		return false
	}
}
