package sink_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// While one flush is being inserted the sink keeps pulling: with the first
// INSERT held up, the consumer hands out more than one pull's worth
// (fetchMax, 500 messages), up to a second flush of rows. Pulling and
// inserting one after the other, the sink ran at 0.4 of clickhouse-client
// on a backlog. What it holds is bounded by rows as well as by messages:
// with small flushes it stops after one pull, however large MaxAckPending
// is (the default is large so that small messages still make full
// flushes).
func TestSinkPullsWhileInserting(t *testing.T) {
	t.Parallel()
	const msgs = 1500 // of one port each
	for _, tc := range []struct {
		name      string
		batchRows int
		// handedOut is how many messages the consumer hands out while the
		// first INSERT is held up; exact tells whether it must reach it
		// (pulling on) or must never pass it (the bound).
		handedOut int
		exact     bool
	}{
		{"pulls a second flush while the first is inserted", 1000, msgs, true},
		{"holds two flushes of rows, plus one pull", 100, 500, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, dsn := migrated(t, chtest.DSN(t))
			js := startNATS(t)
			for i := range msgs {
				publishBatch(t, js, batchAt(fmt.Sprintf("gpu-%04d", i), 1, 1, 1767225600000+int64(i)))
			}
			cfg := fastConfig(dsn)
			// Flushes by rows; the interval flushes the last rows after the
			// INSERT is released.
			cfg.BatchRows, cfg.MaxAckPending, cfg.FlushInterval = tc.batchRows, 4000, 2*time.Second
			release := make(chan struct{})
			releaseFirst := sync.OnceFunc(func() { close(release) })
			var first sync.Once
			started := make(chan struct{})
			cfg.ObserveInsert = func(table string, rows int, took time.Duration, err error) {
				if table == "port_samples" {
					first.Do(func() { close(started); <-release }) // the first INSERT "takes" until released
				}
			}
			_, stop := runSink(t, js, conn, cfg)
			defer func() {
				releaseFirst()
				if err := stop(); err != nil {
					t.Error(err)
				}
			}()
			handedOut := func() (int, error) {
				info, err := consumerInfo(js, schemas.StreamCounters, "test-sink-counters")
				if err != nil {
					return 0, err
				}
				return info.NumAckPending, nil
			}
			if tc.exact {
				testwait.For(t, 30*time.Second, "the messages handed out during the first insert", func() error {
					n, err := handedOut()
					if err == nil && n != tc.handedOut {
						err = fmt.Errorf("%d messages handed out during the first insert, want %d", n, tc.handedOut)
					}
					return err
				})
			} else {
				select {
				case <-started:
				case <-time.After(30 * time.Second):
					t.Fatal("no INSERT began in 30 s")
				}
				// The fetcher would have pulled the whole backlog in this
				// time without the bound (the case above does in well under
				// a second). Sleeps between the checks, not a wait: the
				// loop proves the bound holds for two seconds.
				for range 20 {
					n, err := handedOut()
					if err != nil {
						t.Fatal(err)
					}
					if n > tc.handedOut {
						t.Fatalf("%d messages handed out during the first insert, want at most %d", n, tc.handedOut)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			releaseFirst()
			waitCount(t, conn, "port_samples", "1", msgs)
			waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
		})
	}
}
