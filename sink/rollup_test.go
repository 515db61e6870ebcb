package sink_test

import (
	"context"
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

	waitRollupsEqualRaw(t, conn)
}
