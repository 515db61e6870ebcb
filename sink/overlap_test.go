package sink_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// While one flush is being inserted the sink keeps pulling: with the first
// INSERT held up, the consumer hands out more than one pull's worth
// (fetchMax, 500 messages), up to half of MaxAckPending beyond the flush.
// Pulling and inserting one after the other, the sink ran at 0.4 of
// clickhouse-client on a backlog.
func TestSinkPullsWhileInserting(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	const msgs = 1500
	for i := range msgs {
		publishBatch(t, js, batchAt(fmt.Sprintf("gpu-%04d", i), 1, 1, 1767225600000+int64(i)))
	}
	cfg := fastConfig(dsn)
	cfg.BatchRows, cfg.MaxAckPending, cfg.FlushInterval = 100, 4000, time.Minute
	release := make(chan struct{})
	releaseFirst := sync.OnceFunc(func() { close(release) })
	var first sync.Once
	cfg.ObserveInsert = func(table string, rows int, took time.Duration, err error) {
		if table == "port_samples" {
			first.Do(func() { <-release }) // the first INSERT "takes" until released
		}
	}
	_, stop := runSink(t, js, conn, cfg)
	defer func() {
		releaseFirst()
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	chtest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		info, err := consumerInfo(js, schemas.StreamCounters, "test-sink-counters")
		if err != nil {
			return err
		}
		if info.NumAckPending != msgs {
			return fmt.Errorf("%d messages handed out during the first insert, want all %d", info.NumAckPending, msgs)
		}
		return nil
	})
	releaseFirst()
	waitCount(t, conn, "port_samples", "1", msgs)
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
}
