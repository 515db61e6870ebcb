package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// chCluster returns the ClickHouse cluster the tests share (ZooKeeper and
// two replicas take ~20 s to start and stop): its name and the replicas'
// DSNs (database default). Each test uses a database of its own. The first
// call starts it in a temporary state directory; every call runs `up`,
// which starts what is not running, so a replica a test killed is back for
// the next one. TestMain stops it.
func chCluster(t *testing.T) (env []string, name string, dsns []string) {
	t.Helper()
	sharedCH.mu.Lock()
	defer sharedCH.mu.Unlock()
	if sharedCH.dir == "" {
		dir, err := os.MkdirTemp("", "rdmawatch-ch-cluster-")
		if err != nil {
			t.Fatal(err)
		}
		sharedCH.dir = dir
	}
	env = []string{"RDMAWATCH_CLUSTER_DIR=" + sharedCH.dir}
	dir := sharedCH.dir
	t.Cleanup(func() {
		if t.Failed() {
			dumpClickHouse(t, dir)
		}
	})
	out := strings.Fields(script(t, env, "clickhouse-cluster.sh", "up"))
	if len(out) != 3 {
		t.Fatalf("clickhouse-cluster.sh up printed %q, want the name and two DSNs", out)
	}
	return env, out[0], out[1:]
}

// dumpClickHouse logs the ends of the replicas' and ZooKeeper's logs: a
// failure's evidence (the state directory is removed when the tests end).
func dumpClickHouse(t *testing.T, dir string) {
	for _, f := range []string{"ch-1/log/clickhouse-server.err.log", "ch-1/log/stdout.log",
		"ch-2/log/clickhouse-server.err.log", "ch-2/log/stdout.log", "zookeeper/stdout.log"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		t.Logf("%s, last lines:\n%s", f, strings.Join(lines[max(len(lines)-30, 0):], "\n"))
	}
}

var sharedCH struct {
	mu  sync.Mutex
	dir string
}

// stopSharedCH stops the shared ClickHouse cluster, if one was started, and
// removes its state.
func stopSharedCH() error {
	sharedCH.mu.Lock()
	defer sharedCH.mu.Unlock()
	if sharedCH.dir == "" {
		return nil
	}
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command(filepath.Join(filepath.Dir(file), "..", "..", "deploy", "cluster", "clickhouse-cluster.sh"), "down")
	cmd.Env = append(os.Environ(), "RDMAWATCH_CLUSTER_DIR="+sharedCH.dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("clickhouse-cluster.sh down: %v\n%s", err, out)
	}
	return os.RemoveAll(sharedCH.dir)
}

func rdmawatchBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("RDMAWATCH_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "rdmawatch")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rdmawatch")
	cmd.Dir = root(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build rdmawatch: %v\n%s", err, out)
	}
	return bin
}

// zkPath keeps the replicated tables of each test's database apart in
// the shared cluster's ZooKeeper.
func zkPath(db string) string { return "/clickhouse/tables/{shard}/" + db }

// withDB swaps the database of a clickhouse://host:port/db DSN.
func withDB(dsn, db string) string {
	return dsn[:strings.LastIndex(dsn, "/")+1] + db
}

func count(t *testing.T, ctx context.Context, conn driver.Conn, query string) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(ctx, query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestClickHouseReplicaKilled runs `rdmawatch migrate --cluster` and
// `rdmawatch sink --cluster` against a shard of two replicas, publishes
// counter batches, kills -9 the replica the sink writes through mid-stream
// and restarts it, and counts the rows under FINAL through the Distributed
// table and on each replica: none lost, none duplicated.
func TestClickHouseReplicaKilled(t *testing.T) {
	requireCluster(t)
	bin := rdmawatchBin(t)
	env, name, dsns := chCluster(t)
	const db = "rdmawatch_cluster"
	// Both hosts in one DSN: the sink fails over to the second replica.
	both := "clickhouse://" + strings.TrimPrefix(dsns[0][:strings.LastIndex(dsns[0], "/")], "clickhouse://") + "," +
		strings.TrimPrefix(dsns[1][:strings.LastIndex(dsns[1], "/")], "clickhouse://") + "/" + db

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	migrate := exec.CommandContext(ctx, bin, "migrate", "--clickhouse", withDB(dsns[0], db), "--cluster", name, "--cluster-zookeeper-path", zkPath(db))
	out, err := migrate.CombinedOutput()
	t.Logf("migrate --cluster:\n%s", out)
	if err != nil {
		t.Fatalf("rdmawatch migrate --cluster %s: %v", name, err)
	}

	srv := natstest.Start(t, &schemas.StreamOptions{})
	sinkLog, err := os.Create(filepath.Join(t.TempDir(), "sink.log"))
	if err != nil {
		t.Fatal(err)
	}
	sinkCtx, stopSink := context.WithCancel(ctx)
	// --max-behind 0: the batches are dated 2026-05-28 (counterBatch),
	// which the sink's default bound refuses as a flood of old days.
	sink := exec.CommandContext(sinkCtx, bin, "sink", "--nats", srv.URL, "--clickhouse", both, "--cluster", name,
		"--flush-interval", "200ms", "--batch-rows", "500", "--max-behind", "0")
	sink.Stdout, sink.Stderr = sinkLog, sinkLog
	sink.Cancel = func() error { return sink.Process.Signal(os.Interrupt) }
	sink.WaitDelay = 20 * time.Second
	if err := sink.Start(); err != nil {
		t.Fatal(err)
	}
	sinkDone := make(chan error, 1)
	go func() { sinkDone <- sink.Wait() }()
	t.Cleanup(func() {
		stopSink()
		<-sinkDone
		b, _ := os.ReadFile(sinkLog.Name())
		for _, line := range strings.Split(string(b), "\n") {
			if t.Failed() || strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				t.Logf("sink: %s", line)
			}
		}
	})

	const nodes, perNode = 40, 60
	total := nodes * perNode
	pub := collector.NewPublisher(srv.JS, 256, slog.New(slog.NewTextHandler(testLog{t}, nil)))
	start := time.Now()
	for seq := 0; seq < perNode; seq++ {
		switch seq {
		case perNode / 3:
			script(t, env, "clickhouse-cluster.sh", "kill", "1")
			t.Logf("killed -9 replica 1 after %d batches (%v)", seq*nodes, time.Since(start))
		case 2 * perNode / 3:
			script(t, env, "clickhouse-cluster.sh", "start", "1")
			t.Logf("restarted replica 1 after %d batches (%v)", seq*nodes, time.Since(start))
		}
		for n := 0; n < nodes; n++ {
			if err := pub.PublishBatch(ctx, counterBatch(fmt.Sprintf("node-%03d", n), seq)); err != nil {
				t.Fatal(err)
			}
		}
		if err := pub.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		// A collection interval: the kill lands while the sink writes.
		time.Sleep(100 * time.Millisecond)
	}
	lastPublish := time.Now()
	t.Logf("published %d batches in %v", total, time.Since(start))

	conns := make([]driver.Conn, len(dsns))
	for i, dsn := range dsns {
		if conns[i], err = chdb.Open(ctx, withDB(dsn, db)); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
	}
	// Read through the Distributed table of the replica that was not
	// killed, and wait for replication to bring both local tables level.
	final := fmt.Sprintf("SELECT count() FROM %s.port_samples FINAL", db)
	testwait.For(t, 90*time.Second, "every row under FINAL, on both replicas", func() error {
		got := count(t, ctx, conns[1], final)
		l1 := count(t, ctx, conns[0], fmt.Sprintf("SELECT count() FROM %s.port_samples_local FINAL", db))
		l2 := count(t, ctx, conns[1], fmt.Sprintf("SELECT count() FROM %s.port_samples_local FINAL", db))
		if got < uint64(total) || l1 < uint64(total) || l2 < uint64(total) {
			return fmt.Errorf("%d rows under FINAL through the Distributed table, replicas %d and %d, want %d", got, l1, l2, total)
		}
		return nil
	})
	t.Logf("all rows visible %v after the last publish", time.Since(lastPublish))
	for i, conn := range conns {
		dist := count(t, ctx, conn, final)
		uniq := count(t, ctx, conn, fmt.Sprintf("SELECT uniqExact(node, device, port, time_ms) FROM %s.port_samples", db))
		raw := count(t, ctx, conn, fmt.Sprintf("SELECT count() FROM %s.port_samples_local", db))
		local := count(t, ctx, conn, fmt.Sprintf("SELECT count() FROM %s.port_samples_local FINAL", db))
		t.Logf("replica %d: %d rows under FINAL through Distributed, %d distinct samples, local %d (%d before FINAL); sent %d",
			i+1, dist, uniq, local, raw, total)
		if dist != uint64(total) || uniq != uint64(total) || local != uint64(total) {
			t.Errorf("replica %d: FINAL %d, distinct %d, local FINAL %d; want %d each (0 lost, 0 duplicated)", i+1, dist, uniq, local, total)
		}
	}
	// The batches sent, one by one: every (node, seq) is there.
	var missing int64
	q := fmt.Sprintf("SELECT toInt64(%d) - toInt64(uniqExact(node, time_ms)) FROM %s.port_samples WHERE node LIKE 'node-%%'", total, db)
	if err := conns[1].QueryRow(ctx, q).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if missing != 0 {
		t.Errorf("%d batches missing", missing)
	}
}
