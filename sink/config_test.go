package sink_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/sink"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  sink.Config
		ok   bool
	}{
		{"zero is defaults", sink.Config{}, true},
		{"dsn", sink.Config{DSN: "clickhouse://127.0.0.1:19000/default"}, true},
		{"bad dsn", sink.Config{DSN: "clickhouse://[::1"}, false},
		{"negative rows", sink.Config{BatchRows: -1}, false},
		{"negative pending", sink.Config{MaxAckPending: -5}, false},
		{"dotted prefix", sink.Config{ConsumerPrefix: "sink.a"}, false},
		{"negative flush", sink.Config{FlushInterval: -time.Second}, false},
		{"retry min above max", sink.Config{RetryMin: time.Minute, RetryMax: time.Second}, false},
		{"ack wait too short", sink.Config{AckWait: 100 * time.Millisecond}, false},
		{"short ack wait, long inserts", sink.Config{AckWait: 2 * time.Second, InsertTimeout: time.Minute}, true},
		{"negative block rows", sink.Config{BlockRows: -1}, false},
		{"negative refuse attempts", sink.Config{RefuseAttempts: -1}, false},
		{"rolling off", sink.Config{RollupEvery: -time.Second}, true},
		{"negative rollup delay", sink.Config{RollupDelay: -time.Second}, false},
		{"lookback shorter than the delay", sink.Config{RollupDelay: 10 * time.Minute, RollupLookback: 5 * time.Minute}, false},
		{"short lookback, rolling off", sink.Config{RollupEvery: -1, RollupDelay: 10 * time.Minute, RollupLookback: 5 * time.Minute}, true},
		{"time bounds", sink.Config{MaxAhead: time.Minute, MaxBehind: 24 * time.Hour}, true},
		{"negative max ahead", sink.Config{MaxAhead: -time.Minute}, false},
		{"negative max behind", sink.Config{MaxBehind: -time.Hour}, false},
		{"negative probe interval", sink.Config{ProbeEvery: -time.Second}, false},
		{"small and fast", sink.Config{BatchRows: 10, FlushInterval: 10 * time.Millisecond, AckWait: 3 * time.Second, InsertTimeout: time.Second, RetryMax: time.Second}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, sink.ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}
