package sink_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestSinkConsumerPendingIsTheBacklog checks TableStats.ConsumerPending,
// which rdmawatch_sink_consumer_pending exports and the RdmawatchSinkBacklog
// alert reads: it is the consumer's undelivered messages (JetStream's
// num_pending), also while the sink is stalled. With ClickHouse away the
// sink holds MaxAckPending messages and pulls no more: what it holds
// (Pending) stays put while the backlog grows, and only the consumer's own
// count shows it.
func TestSinkConsumerPendingIsTheBacklog(t *testing.T) {
	t.Parallel()
	srv := chtest.StartPrivate(t)
	conn, dsn := migrated(t, srv.DSN)
	js := startNATS(t)
	cfg := fastConfig(dsn)
	cfg.AckWait = 3 * time.Second // a count every second (the heartbeat)
	cfg.InsertTimeout = time.Second
	cfg.RetryMax = 300 * time.Millisecond
	cfg.MaxAckPending = 4
	s, _ := runSink(t, js, conn, cfg)

	// Data times of the last minute, a second apart: a sink may refuse
	// samples far from their store time, and rows of one port and time are
	// one row in the table.
	start := time.Now().Add(-time.Minute).UnixMilli()
	batch := func(seq uint64) *schemas.CounterBatch {
		b := testBatch()
		b.Seq = seq
		b.TimeMs = start + int64(seq)*1000
		for p := range b.Ports {
			b.Ports[p].TimeMs = b.TimeMs
		}
		return b
	}
	publishBatch(t, js, batch(1))
	waitCount(t, conn, "port_samples", "", 2)
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	const batches = 20
	for i := uint64(2); i < 2+batches; i++ {
		b := batch(i)
		publishBatch(t, js, b, jetstream.WithMsgID(b.MsgID()))
	}
	want := uint64(batches - cfg.MaxAckPending)
	testwait.For(t, 20*time.Second, "the counts during the outage", func() error {
		st := s.Stats()["port_samples"]
		if st.ConsumerPending != want || st.Pending != cfg.MaxAckPending {
			return fmt.Errorf("ClickHouse away: consumer pending %d, held %d; want %d and %d", st.ConsumerPending, st.Pending, want, cfg.MaxAckPending)
		}
		info, err := consumerInfo(js, schemas.StreamCounters, "test-sink-counters")
		if err != nil {
			return err
		}
		if info.NumPending != want {
			return fmt.Errorf("the server's num_pending is %d, want %d", info.NumPending, want)
		}
		return nil
	})

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	waitCount(t, conn, "port_samples", "", 2+2*batches)
	testwait.For(t, 20*time.Second, "nothing pending on the consumer", func() error {
		if st := s.Stats()["port_samples"]; st.ConsumerPending != 0 {
			return fmt.Errorf("ClickHouse back and the rows written: consumer pending %d, want 0", st.ConsumerPending)
		}
		return nil
	})
}
