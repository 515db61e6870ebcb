package collector

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// lostFuture is a publish the stream never stored: what a client sees when
// the stream's leader dies with the message in flight (its ack times out or
// the request has no responders).
type lostFuture struct {
	msg *nats.Msg
	err chan error
}

func (f *lostFuture) Ok() <-chan *jetstream.PubAck { return nil }
func (f *lostFuture) Err() <-chan error            { return f.err }
func (f *lostFuture) Msg() *nats.Msg               { return f.msg }

// leaderDeath passes every publish to a real JetStream except the first
// attempt of the message IDs in lose, which it drops and fails.
type leaderDeath struct {
	jetstream.JetStream
	mu   sync.Mutex
	lose map[string]bool
}

func (l *leaderDeath) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	id := m.Header.Get(jetstream.MsgIDHeader)
	l.mu.Lock()
	lost := l.lose[id]
	delete(l.lose, id)
	l.mu.Unlock()
	if !lost {
		return l.JetStream.PublishMsgAsync(m, opts...)
	}
	f := &lostFuture{msg: m, err: make(chan error, 1)}
	f.err <- fmt.Errorf("%s: %w", id, nats.ErrNoResponders)
	return f, nil
}

func orderBatch(node string, seq uint64) *schemas.CounterBatch {
	t := 1773446400000 + int64(seq)*1000
	return &schemas.CounterBatch{Node: node, BootID: "b1", Seq: seq, TimeMs: t,
		Ports: []schemas.PortSample{{Device: "mlx5_0", Port: 1, TimeMs: t}}}
}

// A node's batch whose publish failed reaches the stream before the node's
// later batches: every reader drops a port's sample older than its last
// one, so a batch stored after its successor is lost to the detectors.
// Other nodes' batches are not held back by it.
func TestPublisherKeepsANodesBatchesInOrder(t *testing.T) {
	js := startJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pub := NewPublisher(js, 256, nil)
	// Under the publisher's own JetStream context (it sets the ack timeout).
	pub.js = &leaderDeath{JetStream: pub.js, lose: map[string]bool{
		orderBatch("gpu-a", 2).MsgID(): true,
		orderBatch("gpu-a", 5).MsgID(): true,
	}}
	for seq := uint64(1); seq <= 8; seq++ {
		for _, node := range []string{"gpu-a", "gpu-b"} {
			if err := pub.PublishBatch(ctx, orderBatch(node, seq)); err != nil {
				t.Fatal(err)
			}
		}
		// The next batch is read an interval later: the acks are back.
		time.Sleep(20 * time.Millisecond)
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	byNode := map[string][]string{}
	for _, id := range streamIDs(t, js) {
		node, seq, _ := strings.Cut(strings.Replace(id, "/b1/", " ", 1), " ")
		byNode[node] = append(byNode[node], seq)
	}
	want := []string{"1", "2", "3", "4", "5", "6", "7", "8"}
	for _, node := range []string{"gpu-a", "gpu-b"} {
		if !slices.Equal(byNode[node], want) {
			t.Errorf("%s's batches stored in the order %v, want %v", node, byNode[node], want)
		}
	}
}

// Without failures the stream holds the messages in the order they were
// sent, across nodes too: a replay's events depend on that order, and a
// node's batch waiting for its predecessor's ack must hold back the
// batches sent after it.
func TestPublisherKeepsSendOrder(t *testing.T) {
	js := startJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pub := NewPublisher(js, 64, nil)
	var want []string
	for seq := uint64(1); seq <= 200; seq++ {
		for _, node := range []string{"gpu-a", "gpu-b", "gpu-c"} {
			if seq%7 == 0 && node == "gpu-b" {
				continue // nodes do not all report every round
			}
			b := orderBatch(node, seq)
			want = append(want, b.MsgID())
			if err := pub.PublishBatch(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := streamIDs(t, js); !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("stream order differs from send order at %d: %s, sent %s (%d stored, %d sent)", i, got[i], want[i], len(got), len(want))
			}
		}
		t.Fatalf("%d stored, %d sent", len(got), len(want))
	}
}
