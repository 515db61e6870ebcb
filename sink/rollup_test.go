package sink_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/sink"
)

// A sink killed after it inserted and acked rows but before it rolled
// them leaves minutes no later sink stores rows of. The next sink rolls
// them at its start: the minutes since the newest rolled one, minus the
// lookback.
func TestSinkRollsWhatTheLastSinkLeft(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Two hours ago (so the wall clock's lookback alone would not reach
	// it): the first minute was rolled, the two after it were not.
	t0 := time.Now().Add(-2 * time.Hour).Truncate(time.Hour).Add(10 * time.Minute)
	for i, d := range []time.Duration{0, time.Minute, 3 * time.Minute} {
		b := batchAt("gpu-dead", uint64(i+1), 3, t0.Add(d+5*time.Second).UnixMilli())
		insertRows(t, conn, sink.SampleRows(b))
		if i == 0 {
			if err := chdb.Roll(ctx, conn, chdb.Minute, t0, t0.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	runSink(t, js, conn, fastConfig(dsn))

	const fromRaw = `SELECT %s AS bucket, node, device, port, count(), sum(interval_ms), sum(rcv_bytes), sum(xmit_bytes), sum(symbol_error), sum(tx_pause_duration_us)
		FROM port_samples FINAL WHERE first = 0 GROUP BY node, device, port, bucket ORDER BY node, device, port, bucket`
	const fromRollup = `SELECT %s, node, device, port, samples, interval_ms, rcv_bytes, xmit_bytes, symbol_errors, tx_pause_us
		FROM %s ORDER BY node, device, port, %s`
	for _, c := range []struct{ bucket, view, col string }{
		{"toStartOfMinute(ts)", "port_minute_v", "minute"},
		{"toStartOfHour(ts)", "port_hour_v", "hour"},
	} {
		want := rollupBuckets(t, conn, fmt.Sprintf(fromRaw, c.bucket))
		chtest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
			got := rollupBuckets(t, conn, fmt.Sprintf(fromRollup, c.col, c.view, c.col))
			if len(want) == 0 || !reflect.DeepEqual(got, want) {
				return fmt.Errorf("%s differs from port_samples FINAL:\n%s\nwant\n%s", c.view, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			return nil
		})
	}
}
