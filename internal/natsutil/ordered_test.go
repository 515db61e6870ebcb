package natsutil_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
)

// TestBoundedResetsEndNext: an ordered consumer whose stream is deleted
// under it cannot be re-created. With BoundedResets its Next returns an
// error after the attempts; the library's default retries inside Next for
// ever, whatever Next's context says (the second case proves the test can
// tell the two apart).
func TestBoundedResetsEndNext(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bounded bool
	}{{"bounded", true}, {"unbounded", false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := srv.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERED_TEST", Subjects: []string{"ordered.test"}, Storage: jetstream.MemoryStorage}); err != nil {
				t.Fatal(err)
			}
			if _, err := srv.JS.Publish(ctx, "ordered.test", []byte("one")); err != nil {
				t.Fatal(err)
			}
			js := srv.JS
			if tc.bounded {
				js = natsutil.BoundedResets(js, 1)
			}
			c, err := js.OrderedConsumer(ctx, "ORDERED_TEST", jetstream.OrderedConsumerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.CachedInfo(); got == nil {
				t.Fatal("no consumer info")
			}
			it, err := c.Messages()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := it.Next(); err != nil {
				t.Fatal(err)
			}
			if err := srv.JS.DeleteStream(ctx, "ORDERED_TEST"); err != nil {
				t.Fatal(err)
			}
			next := make(chan error, 1)
			go func() {
				_, err := it.Next(jetstream.NextContext(ctx))
				next <- err
			}()
			select {
			case err := <-next:
				if !tc.bounded {
					t.Fatalf("unbounded Next returned %v: the library changed, and the bound may be moot", err)
				}
				if err == nil || errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("bounded Next returned %v, want the re-creation's error", err)
				}
				t.Logf("bounded Next: %v", err)
			case <-time.After(5 * time.Second):
				if tc.bounded {
					t.Fatal("bounded Next still waiting after 5 s")
				}
				it.Stop() // Stop is what ends the library's loop
			}
		})
	}
}
