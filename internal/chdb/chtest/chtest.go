// Package chtest gives integration tests a ClickHouse: the shared server
// named by RDMAWATCH_CLICKHOUSE with a private database per test, or a
// private server started with deploy/clickhouse/local.sh.
package chtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
)

// Environment variables the integration tests read.
const (
	EnvDSN     = "RDMAWATCH_CLICKHOUSE"
	EnvRequire = "RDMAWATCH_REQUIRE_CLICKHOUSE"
)

func required() bool { return os.Getenv(EnvRequire) == "1" }

// DSN returns the shared server's DSN, or skips the test (fails it when
// RDMAWATCH_REQUIRE_CLICKHOUSE=1) when none is configured.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		msg := EnvDSN + " is not set: start one with `deploy/clickhouse/local.sh up` and set " + EnvDSN + " to the DSN it prints"
		if required() {
			t.Fatal(msg + " (" + EnvRequire + "=1 makes this a failure)")
		}
		t.Skip(msg)
	}
	return dsn
}

// WithDatabase returns dsn with its database replaced.
func WithDatabase(t testing.TB, dsn, db string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("clickhouse dsn %q: %v", dsn, err)
	}
	u.Path = "/" + db
	return u.String()
}

// NewDatabase creates a database only this test uses on the server dsn
// names, drops it when the test ends, and returns a DSN that points into it,
// so tests run in parallel with each other and with other packages.
func NewDatabase(t testing.TB, dsn string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := chdb.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := "test_" + sanitize(t.Name()) + "_" + hex.EncodeToString(b[:])
	if err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		admin.Close()
		t.Fatalf("create database %s: %v", db, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			t.Errorf("drop database %s: %v", db, err)
		}
		admin.Close()
	})
	return WithDatabase(t, dsn, db)
}

func sanitize(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return b.String()
}

// Open connects to dsn and closes the connection when the test ends.
func Open(t testing.TB, dsn string) driver.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := chdb.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Count returns SELECT count() FROM table FINAL WHERE where (where may be
// empty): FINAL collapses rows ReplacingMergeTree has not merged yet.
func Count(ctx context.Context, conn driver.Conn, table, where string) (uint64, error) {
	q := "SELECT count() FROM " + table + " FINAL"
	if where != "" {
		q += " WHERE " + where
	}
	var n uint64
	if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w", q, err)
	}
	return n, nil
}

// Strings runs a query whose rows are one String each (table or column
// names, mostly) and returns them in order, failing the test on any error.
func Strings(t testing.TB, conn driver.Conn, query string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return out
}

// Server is a private ClickHouse run by deploy/clickhouse/local.sh.
type Server struct {
	DSN     string
	dir     string
	tcp     int
	http    int
	cluster string // RDMAWATCH_CH_CLUSTER: a one-node cluster of this name
}

// LocalScript is deploy/clickhouse/local.sh of this checkout.
func LocalScript() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "clickhouse", "local.sh")
}

// HaveBinary reports whether local.sh can start a server without installing.
func HaveBinary() bool {
	for _, b := range []string{"clickhouse", "clickhouse-server"} {
		if _, err := exec.LookPath(b); err == nil {
			return true
		}
	}
	return false
}

// StartPrivate starts a ClickHouse of its own for tests that stop and start
// the server, on free ports with its data in a temporary folder; it is
// stopped when the test ends. Without a clickhouse binary the test is
// skipped (failed under RDMAWATCH_REQUIRE_CLICKHOUSE=1, where local.sh may
// install one).
func StartPrivate(t testing.TB) *Server {
	t.Helper()
	return startPrivate(t, "")
}

// StartPrivateCluster is StartPrivate with a one-node cluster of this name
// (and the macros {shard}, {replica}) in the server's config, for cluster
// mode's DDL. The server has no ZooKeeper: ON CLUSTER and Replicated tables
// fail on it, Distributed tables over plain MergeTree work.
func StartPrivateCluster(t testing.TB, cluster string) *Server {
	t.Helper()
	return startPrivate(t, cluster)
}

func startPrivate(t testing.TB, cluster string) *Server {
	t.Helper()
	if !HaveBinary() && !required() {
		t.Skip("no clickhouse or clickhouse-server on PATH: the private-server test needs one (deploy/clickhouse/local.sh installs it on Debian as root; " + EnvRequire + "=1 makes this a failure)")
	}
	s := &Server{dir: t.TempDir(), tcp: freePort(t), http: freePort(t), cluster: cluster}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop private clickhouse: %v", err)
		}
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// Start runs local.sh up; a running server is left alone.
func (s *Server) Start() error {
	out, err := s.run("up")
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	s.DSN = lines[len(lines)-1]
	return nil
}

// Stop runs local.sh down and waits for the server to exit.
func (s *Server) Stop() error {
	_, err := s.run("down")
	return err
}

func (s *Server) run(verb string) (string, error) {
	cmd := exec.Command("bash", LocalScript(), verb)
	cmd.Env = append(os.Environ(),
		"RDMAWATCH_CH_DIR="+s.dir,
		"RDMAWATCH_CH_TCP_PORT="+strconv.Itoa(s.tcp),
		"RDMAWATCH_CH_HTTP_PORT="+strconv.Itoa(s.http),
		"RDMAWATCH_CH_CLUSTER="+s.cluster,
	)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("local.sh %s (dir %s): %v\n%s", verb, s.dir, err, stderr.String())
	}
	return string(out), nil
}

// freePort asks the kernel for a port nobody listens on. Another process
// could take it before the server binds it; local.sh then fails loudly.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
