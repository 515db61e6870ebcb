package collector

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/schemas/trace"
)

func startJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	return natstest.Start(t, &schemas.StreamOptions{Memory: true, Partitions: 4}).JS
}

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestPublisherDeduplicatesRetries(t *testing.T) {
	js := startJS(t)
	ctx := context.Background()
	pub := NewPublisher(js, 2, nil)
	for seq := uint64(1); seq <= 10; seq++ {
		b := &schemas.CounterBatch{Node: "gpu-001.pod", BootID: "b1", Seq: seq, TimeMs: 1773446400000 + int64(seq)*1000,
			Ports: []schemas.PortSample{{Device: "mlx5_0", Port: 1, TimeMs: 1773446400000 + int64(seq)*1000}}}
		if err := pub.PublishBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
		// A retry after a lost ack sends the same batch again.
		if seq%3 == 0 {
			if err := pub.PublishBatch(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := streamMsgs(t, js, schemas.StreamCounters); got != 10 {
		t.Fatalf("stream holds %d batches, want 10 (retries must not double-count)", got)
	}
	// The stream stored it under a partition, and the batch decodes.
	s, _ := js.Stream(ctx, schemas.StreamCounters)
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Subject, "rdmawatch.counters.") || !strings.HasSuffix(m.Subject, ".gpu-001%2Epod") || strings.Count(m.Subject, ".") != 3 {
		t.Errorf("stored subject %q, want rdmawatch.counters.<partition>.<node token>", m.Subject)
	}
	if _, err := schemas.DecodeBatch(m.Data); err != nil {
		t.Fatal(err)
	}
}

func TestCollectorReplaysTraceIntoStream(t *testing.T) {
	js := startJS(t)
	tr, err := trace.Open("../test/scenarios/flap-and-saturation/trace.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	eng := NewEngine(nil)
	pub := NewPublisher(js, 64, nil)
	if err := New(NewTraceSource(tr), eng, pub, Config{}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := eng.Stats()
	if st.Samples != 720 {
		t.Errorf("%d samples, want 720", st.Samples)
	}
	if got := streamMsgs(t, js, schemas.StreamCounters); got == 0 || got > 720 {
		t.Errorf("%d batches on the stream", got)
	}
	// 10 minutes of 6 nodes: each node's inventory at its first scrape and
	// again after InventoryRefresh (5 min), nothing in between.
	if got := streamMsgs(t, js, schemas.StreamInventory); got != 12 {
		t.Errorf("%d inventory records, want two per node (12)", got)
	}
}

// noDevices is a host without RDMA devices until it gets one.
type noDevices struct {
	mu    sync.Mutex
	calls int
}

func (s *noDevices) Next(ctx context.Context) (*Reading, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls < 4 {
		return &Reading{Node: "n"}, ErrNoDevices
	}
	if s.calls == 4 {
		return &Reading{Node: "n", Time: time.Unix(100, 0), Ports: []PortReading{{Device: "mlx5_0", Port: 1, Counters: map[string]uint64{"link_downed": 0}}}}, nil
	}
	return nil, io.EOF
}

func TestCollectorKeepsRunningWithoutDevices(t *testing.T) {
	js := startJS(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	src := &noDevices{}
	err := New(src, NewEngine(nil), NewPublisher(js, 4, log), Config{Interval: time.Millisecond, Log: log}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if src.calls != 5 {
		t.Errorf("source read %d times, want the collector to keep reading (5)", src.calls)
	}
	if n := strings.Count(logs.String(), "collector keeps running"); n != 1 {
		t.Errorf("'no RDMA devices' logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "RDMA devices found") {
		t.Errorf("devices appearing not logged:\n%s", logs.String())
	}
	if got := streamMsgs(t, js, schemas.StreamCounters); got != 1 {
		t.Errorf("%d batches, want 1", got)
	}
}

func TestCollectorStopsOnCancel(t *testing.T) {
	js := startJS(t)
	ctx, cancel := context.WithCancel(context.Background())
	src := &noDevices{calls: -1 << 30}
	done := make(chan error, 1)
	go func() {
		done <- New(src, NewEngine(nil), NewPublisher(js, 4, nil), Config{Interval: time.Millisecond}).Run(ctx)
	}()
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("collector did not stop on cancel")
	}
}

// restartOnly is a trace of nothing but a collector_restart line.
type restartOnly struct{ done bool }

func (s *restartOnly) Next(ctx context.Context) (*Reading, error) {
	if s.done {
		return nil, io.EOF
	}
	s.done = true
	return &Reading{Node: "n", Time: time.Unix(100, 0), Restart: true}, nil
}

func TestCollectorPublishesNothingForARestartMarker(t *testing.T) {
	js := startJS(t)
	if err := New(&restartOnly{}, NewEngine(nil), NewPublisher(js, 4, nil), Config{}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{schemas.StreamCounters, schemas.StreamInventory} {
		if got := streamMsgs(t, js, stream); got != 0 {
			t.Errorf("%s holds %d messages after a lone restart marker, want 0", stream, got)
		}
	}
}
