package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// natsCluster starts the 3-node cluster in a temporary state directory
// and stops it when the test ends.
func natsCluster(t *testing.T) (env []string, urls string) {
	t.Helper()
	env = []string{"RDMAWATCH_CLUSTER_DIR=" + t.TempDir()}
	urls = script(t, env, "nats-cluster.sh", "up")
	t.Cleanup(func() { script(t, env, "nats-cluster.sh", "down") })
	t.Cleanup(func() {
		if t.Failed() {
			dumpNATS(t, env)
		}
	})
	return env, urls
}

// dumpNATS logs what each node holds of every stream (its own view, from
// its monitoring port) and the warnings in its log: a failure's evidence.
func dumpNATS(t *testing.T, env []string) {
	dir := strings.TrimPrefix(env[0], "RDMAWATCH_CLUSTER_DIR=")
	base := 14950 // nats-cluster.sh's default
	if b, err := strconv.Atoi(os.Getenv("NATS_CLUSTER_BASE_PORT")); err == nil {
		base = b
	}
	for n := 1; n <= 3; n++ {
		url := fmt.Sprintf("http://127.0.0.1:%d/jsz?streams=true", base+20+n-1)
		if resp, err := http.Get(url); err == nil {
			var jsz struct {
				AccountDetails []struct {
					Streams []struct {
						Name    string                                       `json:"name"`
						State   struct{ Messages, FirstSeq, LastSeq uint64 } `json:"state"`
						Cluster struct {
							Leader string `json:"leader"`
						} `json:"cluster"`
					} `json:"stream_detail"`
				} `json:"account_details"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&jsz)
			resp.Body.Close()
			for _, a := range jsz.AccountDetails {
				for _, s := range a.Streams {
					t.Logf("n%d holds %s: %+v leader %s", n, s.Name, s.State, s.Cluster.Leader)
				}
			}
		}
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("nats-%d.log", n)))
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "[WRN]") || strings.Contains(line, "[ERR]") || strings.Contains(line, "leader") {
				t.Logf("n%d: %s", n, line)
			}
		}
	}
}

// counterBatch is node's batch seq, one port, data time seq seconds.
func counterBatch(node string, seq int) *schemas.CounterBatch {
	tm := int64(1_780_000_000_000) + int64(seq)*1000
	return &schemas.CounterBatch{Node: node, BootID: "boot-1", Seq: uint64(seq), TimeMs: tm,
		Ports: []schemas.PortSample{{Device: "mlx5_0", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", TimeMs: tm, IntervalMs: 1000,
			Counters: []schemas.CounterDelta{{Name: "port_rcv_data", Source: schemas.SourceCounters, Value: uint64(seq) * 100, Delta: 100}}}}}
}

// TestNATSClusterNodeKilled publishes counter batches through the
// collector's publisher to R3 streams, kills -9 the counters stream's
// leader mid-stream and restarts it: every batch is stored exactly once.
func TestNATSClusterNodeKilled(t *testing.T) {
	requireCluster(t)
	env, urls := natsCluster(t)
	nc, err := natsutil.Connect(natsutil.ConnectOptions{URL: urls, Name: "cluster-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := natsutil.EnsureStreams(ctx, js, schemas.StreamOptions{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, schemas.StreamCounters)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("counters stream not R3: replicas %d cluster %+v", info.Config.Replicas, info.Cluster)
	}
	leader := info.Cluster.Leader

	const nodes, perNode = 50, 60
	total := nodes * perNode
	pub := collector.NewPublisher(js, 256, slog.New(slog.NewTextHandler(testLog{t}, nil)))
	var killedAt, restartedAt time.Duration
	start := time.Now()
	for seq := 0; seq < perNode; seq++ {
		switch seq {
		case perNode / 3:
			// Kill the stream leader mid-stream: the other two elect a
			// new one while batches are in flight.
			n := strings.TrimPrefix(leader, "n")
			script(t, env, "nats-cluster.sh", "kill", n)
			killedAt = time.Since(start)
			t.Logf("killed -9 %s (counters leader) after %d batches", leader, seq*nodes)
		case 2 * perNode / 3:
			script(t, env, "nats-cluster.sh", "start", strings.TrimPrefix(leader, "n"))
			restartedAt = time.Since(start)
			t.Logf("restarted %s after %d batches", leader, seq*nodes)
		}
		for n := 0; n < nodes; n++ {
			if err := pub.PublishBatch(ctx, counterBatch(fmt.Sprintf("node-%03d", n), seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("published %d batches in %v (kill at %v, restart at %v)", total, time.Since(start), killedAt, restartedAt)

	// The restarted node catches up: every replica current.
	testwait.For(t, 60*time.Second, "every replica current", func() error {
		info, err = stream.Info(ctx)
		if err != nil {
			return err
		}
		if info.Cluster == nil || len(info.Cluster.Replicas) != 2 ||
			!info.Cluster.Replicas[0].Current || !info.Cluster.Replicas[1].Current {
			return fmt.Errorf("stream %+v", info)
		}
		return nil
	})

	lost, dups := countBatches(t, ctx, js, info.State.Msgs, nodes, perNode)
	t.Logf("stream holds %d messages; %d batches lost, %d duplicated", info.State.Msgs, lost, dups)
	if info.State.Msgs != uint64(total) || lost != 0 || dups != 0 {
		t.Errorf("stream holds %d of %d; lost %d, duplicated %d", info.State.Msgs, total, lost, dups)
	}
}

// countBatches reads the counters stream (stored messages) and counts the batches
// missing and those stored more than once, by (node, seq). Right after a
// node's return a fetch can come back empty although the stream holds the
// messages (the consumer landed on a replica still catching up): a short
// read is tried again with a fresh consumer, for up to 30 s.
func countBatches(t *testing.T, ctx context.Context, js jetstream.JetStream, stored uint64, nodes, perNode int) (lost, dups int) {
	t.Helper()
	var seen map[string]int
	read := 0
	testwait.For(t, 30*time.Second, "the whole counters stream read", func() error {
		seen, read = map[string]int{}, 0
		c, err := js.OrderedConsumer(ctx, schemas.StreamCounters, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return err
		}
		for uint64(read) < stored {
			msgs, err := c.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				return err
			}
			got := 0
			for m := range msgs.Messages() {
				got++
				b, err := schemas.DecodeBatch(m.Data())
				if err != nil {
					t.Fatal(err)
				}
				seen[b.MsgID()]++
			}
			if got == 0 {
				return fmt.Errorf("read %d messages of the counters stream, then nothing", read)
			}
			read += got
		}
		return nil
	})
	for n := 0; n < nodes; n++ {
		for s := 0; s < perNode; s++ {
			switch k := seen[counterBatch(fmt.Sprintf("node-%03d", n), s).MsgID()]; {
			case k == 0:
				lost++
			case k > 1:
				dups += k - 1
			}
		}
	}
	return lost, dups
}

type testLog struct{ t *testing.T }

func (w testLog) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
