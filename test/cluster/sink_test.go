package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// proc is an rdmawatch role running as its own process, its output in a
// file the test logs (all of it when the test failed, else warnings).
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan error
	log  string
}

func startRole(t *testing.T, ctx context.Context, name string, args ...string) *proc {
	t.Helper()
	logFile, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, rdmawatchBin(t), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A clean stop drains; the kill -9 of a test is Kill.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan error, 1), log: logFile.Name()}
	go func() { p.done <- cmd.Wait(); logFile.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		<-p.done
		b, _ := os.ReadFile(p.log)
		for _, line := range strings.Split(string(b), "\n") {
			if t.Failed() || strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				t.Logf("%s: %s", name, line)
			}
		}
	})
	return p
}

// kill9 kills the process as a crash would, and waits for it.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %s: %v", p.name, err)
	}
	<-p.done
	p.done <- nil // for the cleanup
}

func (p *proc) running() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return false
	default:
		return true
	}
}

// TestSinksShareDurableOnClusters runs two sinks on the same durable
// consumers over the R3 streams of the 3-node NATS cluster, writing
// through the Distributed tables of the 2-replica ClickHouse shard. Mid-
// stream one sink is killed -9 and so is the counters stream's leader
// (restarted later): the other sink takes over the dead one's unacked
// messages after AckWait, and port_samples holds every sample sent exactly
// once under FINAL, on both replicas.
func TestSinksShareDurableOnClusters(t *testing.T) {
	requireCluster(t)
	natsEnv, urls := natsCluster(t)
	_, name, dsns := chCluster(t)
	const db = "rdmawatch_sinks"
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	host := func(dsn string) string {
		return strings.TrimPrefix(dsn[:strings.LastIndex(dsn, "/")], "clickhouse://")
	}
	both := "clickhouse://" + host(dsns[0]) + "," + host(dsns[1]) + "/" + db
	if out, err := exec.CommandContext(ctx, rdmawatchBin(t), "migrate", "--clickhouse", withDB(dsns[0], db), "--cluster", name,
		"--cluster-zookeeper-path", zkPath(db)).CombinedOutput(); err != nil {
		t.Fatalf("rdmawatch migrate --cluster: %v\n%s", err, out)
	}

	nc, err := natsutil.Connect(natsutil.ConnectOptions{URL: urls, Name: "sink-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := natsutil.EnsureStreams(ctx, js, schemas.StreamOptions{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	// --max-behind 0: the batches are dated 2026-05-28 (counterBatch).
	sinkArgs := []string{"sink", "--nats", urls, "--clickhouse", both, "--flush-interval", "200ms", "--batch-rows", "200", "--max-behind", "0"}
	sinks := []*proc{startRole(t, ctx, "sink-a", sinkArgs...), startRole(t, ctx, "sink-b", sinkArgs...)}

	stream, err := js.Stream(ctx, schemas.StreamCounters)
	if err != nil {
		t.Fatal(err)
	}
	leader := stream.CachedInfo().Cluster.Leader
	const nodes, perNode = 40, 60
	total := nodes * perNode
	pub := collector.NewPublisher(js, 256, slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	start := time.Now()
	var killedAt time.Time
	for seq := 0; seq < perNode; seq++ {
		switch seq {
		case perNode / 3:
			sinks[0].kill9(t)
			script(t, natsEnv, "nats-cluster.sh", "kill", strings.TrimPrefix(leader, "n"))
			killedAt = time.Now()
			t.Logf("killed -9 sink-a and %s (counters leader) after %d batches (%v)", leader, seq*nodes, time.Since(start))
		case 2 * perNode / 3:
			script(t, natsEnv, "nats-cluster.sh", "start", strings.TrimPrefix(leader, "n"))
			t.Logf("restarted %s after %d batches (%v)", leader, seq*nodes, time.Since(start))
		}
		for n := 0; n < nodes; n++ {
			if err := pub.PublishBatch(ctx, counterBatch(fmt.Sprintf("node-%03d", n), seq)); err != nil {
				t.Fatal(err)
			}
		}
		if err := pub.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // an interval: the kills land mid-stream
	}
	t.Logf("published %d batches in %v", total, time.Since(start))

	conns := make([]driver.Conn, len(dsns))
	for i, dsn := range dsns {
		if conns[i], err = chdb.Open(ctx, withDB(dsn, db)); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
	}
	final := "SELECT count() FROM port_samples FINAL"
	testwait.For(t, 90*time.Second, "every row under FINAL, on both replicas", func() error {
		if !sinks[1].running() {
			t.Fatalf("sink-b exited")
		}
		got := count(t, ctx, conns[1], final)
		l1 := count(t, ctx, conns[0], "SELECT count() FROM port_samples_local FINAL")
		l2 := count(t, ctx, conns[1], "SELECT count() FROM port_samples_local FINAL")
		if got < uint64(total) || l1 < uint64(total) || l2 < uint64(total) {
			return fmt.Errorf("%d rows under FINAL through the Distributed table, replicas %d and %d, want %d", got, l1, l2, total)
		}
		return nil
	})
	t.Logf("all rows in %v after the kills", time.Since(killedAt))

	// The survivor acked everything: nothing pending on the shared durable.
	testwait.For(t, 30*time.Second, "nothing pending on the shared durable", func() error {
		c, err := js.Consumer(ctx, schemas.StreamCounters, "rdmawatch-sink-counters")
		if err != nil {
			return err
		}
		info := c.CachedInfo()
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("shared durable: %d pending, %d unacked", info.NumPending, info.NumAckPending)
		}
		return nil
	})
	for i, conn := range conns {
		dist := count(t, ctx, conn, final)
		uniq := count(t, ctx, conn, "SELECT uniqExact(node, device, port, time_ms) FROM port_samples")
		raw := count(t, ctx, conn, "SELECT count() FROM port_samples_local")
		t.Logf("replica %d: %d rows under FINAL, %d distinct samples, %d rows before merges; sent %d", i+1, dist, uniq, raw, total)
		if dist != uint64(total) || uniq != uint64(total) {
			t.Errorf("replica %d: FINAL %d, distinct %d; want %d each (0 lost, 0 duplicated)", i+1, dist, uniq, total)
		}
	}
	var missing int64
	q := fmt.Sprintf("SELECT toInt64(%d) - toInt64(uniqExact(node, time_ms)) FROM port_samples WHERE node LIKE 'node-%%'", total)
	if err := conns[1].QueryRow(ctx, q).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if missing != 0 {
		t.Errorf("%d batches missing", missing)
	}
	b, _ := os.ReadFile(sinks[1].log)
	t.Logf("sink-b took over: %d redelivered messages' rows found already written and skipped",
		strings.Count(string(b), "skipped rows already in the table"))
}
