package collector

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestStoreErrorClassification(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		store bool
	}{
		{"insufficient resources", &jetstream.APIError{Code: 503, ErrorCode: 10023, Description: "insufficient resources"}, true},
		{"storage exceeded", &jetstream.APIError{Code: 500, ErrorCode: 10047, Description: "insufficient storage resources available"}, true},
		{"memory exceeded", &jetstream.APIError{Code: 500, ErrorCode: 10028, Description: "insufficient memory resources available"}, true},
		{"max bytes, discard new", fmt.Errorf("publish: %w", &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum bytes exceeded"}), true},
		{"no stream", &jetstream.APIError{Code: 503, ErrorCode: 10076, Description: "no response from stream"}, false},
		{"timeout", jetstream.ErrAsyncPublishTimeout, false},
		{"no responders", jetstream.ErrNoStreamResponse, false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := storeError(tc.err) != nil; got != tc.store {
				t.Fatalf("storeError(%v) = %v, want a store error %v", tc.err, got, tc.store)
			}
		})
	}
}

// A stream whose store refuses publishes (here its byte limit with discard
// new, as a full disk would) is named in the log and makes StoreError, the
// collector's readiness, fail; the first ack after room was made clears it.
func TestPublisherReportsStoreErrors(t *testing.T) {
	srv := natstest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := srv.JS.CreateStream(ctx, jetstream.StreamConfig{
		Name: "TEST_FULL", Subjects: []string{"rdmawatch.counters.>"}, Storage: jetstream.MemoryStorage,
		MaxBytes: 2048, Discard: jetstream.DiscardNew,
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	pub, err := NewPublisherConfig(srv.JS, PublisherConfig{MaxInFlight: 4, Log: slog.New(slog.NewTextHandler(&logs, nil)), AckWarnAfter: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(seq uint64) *schemas.CounterBatch {
		b := &schemas.CounterBatch{Node: "gpu-001", BootID: "b1", Seq: seq, TimeMs: 1773446400000 + int64(seq)*1000}
		for p := range 4 {
			b.Ports = append(b.Ports, schemas.PortSample{Device: "mlx5_0", Port: p + 1, TimeMs: b.TimeMs, State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)"})
		}
		return b
	}
	if pub.StoreError() != nil {
		t.Fatalf("StoreError %v before any publish", pub.StoreError())
	}
	// Past 2 KiB the stream refuses; the publisher retries, and gives up
	// only when its context ends (a send waits once 2 x MaxInFlight
	// messages are unacknowledged).
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	for seq := uint64(1); seq <= 20; seq++ {
		if err := pub.PublishBatch(pctx, batch(seq)); err != nil {
			break
		}
	}
	err = pub.Flush(pctx)
	pcancel()
	if err == nil {
		t.Fatal("Flush into a full stream returned nil")
	}
	serr := pub.StoreError()
	if serr == nil || !strings.Contains(serr.Error(), "maximum bytes exceeded") {
		t.Fatalf("StoreError = %v, want the store's reason", serr)
	}
	out := logs.String()
	if n := strings.Count(out, "JetStream refuses publishes"); n != 1 || !strings.Contains(out, "maximum bytes exceeded") {
		t.Errorf("want one ERROR naming the store error, got %d:\n%s", n, out)
	}
	if !strings.Contains(out, "NATS does not acknowledge publishes") || !strings.Contains(out, "store_error=") {
		t.Errorf("the outage WARN does not name the store error:\n%s", out)
	}

	if err := stream.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishBatch(ctx, batch(21)); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pub.StoreError(); err != nil {
		t.Fatalf("StoreError = %v after an ack", err)
	}
	if !strings.Contains(logs.String(), "JetStream stores publishes again") {
		t.Errorf("no INFO when the stream stores again:\n%s", logs.String())
	}
	if testing.Verbose() {
		t.Log(logs.String())
	}
}
