package sink

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// A message whose decoding panics (issue 8.1: a bitmap past the counter
// dictionary indexed out of range) is dead-lettered with the panic as its
// reason; the sink goes on with the next message.
func TestDecodePanicDeadLettered(t *testing.T) {
	t.Parallel()
	js := natstest.Start(t, &schemas.StreamOptions{Memory: true, Partitions: 2}).JS
	conn := chtest.Open(t, chtest.DSN(t))
	s, err := New(js, conn, Config{ConsumerPrefix: "panic", FlushInterval: 50 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var decoded []string
	p, err := newTable(s, source[string]{
		stream: schemas.StreamInventory, consumer: "panic-inventory",
		decode: func(_ string, data []byte) ([]string, error) {
			if string(data) == "boom" {
				var dict []int
				_ = dict[len(data)] // index out of range, as the codec did
			}
			decoded = append(decoded, string(data))
			return nil, nil // nothing to write: acked at once
		},
	}, tableSpec[string]{name: "nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.init(ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"before", "boom", "after"} {
		if _, err := js.Publish(ctx, schemas.InventorySubject("gpu-1"), []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.run(runCtx) }()
	defer func() {
		stop()
		<-done
	}()
	cons, err := js.OrderedConsumer(ctx, schemas.StreamDeadLetter, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(20 * time.Second))
	if err != nil {
		t.Fatalf("no dead letter: %v", err)
	}
	if reason := m.Headers().Get(schemas.HeaderDeadReason); string(m.Data()) != "boom" || !strings.Contains(reason, "panic while decoding") || !strings.Contains(reason, "index out of range") {
		t.Errorf("dead letter %q, reason %q", m.Data(), reason)
	}
	testwait.For(t, 10*time.Second, "the poison counted and dead-lettered", func() error {
		if _, st := p.snapshot(); st.Poison != 1 || st.DeadLettered != 1 {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
	stop()
	<-done
	done <- nil
	if strings.Join(decoded, ",") != "before,after" {
		t.Errorf("decoded %v, want before and after the poison", decoded)
	}
}
