package natsutil

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// FuzzPartitionsOf: whatever transform a stream carries, reading the
// partition count never panics, and a count it accepts is in range and is
// exactly what the code's transform for that count says.
func FuzzPartitionsOf(f *testing.F) {
	f.Add("rdmawatch.counters.*", "rdmawatch.counters.{{partition(16,1)}}.{{wildcard(1)}}")
	f.Add("rdmawatch.counters.*", "rdmawatch.counters.{{ partition( 7 , 1 ) }}.{{wildcard(1)}}")
	f.Add("rdmawatch.counters.*", "rdmawatch.counters.{{partition(0,1)}}.{{wildcard(1)}}")
	f.Add("rdmawatch.counters.*", "rdmawatch.counters.{{partition(99999999999999999999,1)}}.{{wildcard(1)}}")
	f.Add("rdmawatch.counters.>", "rdmawatch.counters.{{partition(4,1)}}.x")
	f.Fuzz(func(t *testing.T, src, dest string) {
		cfg := jetstream.StreamConfig{SubjectTransform: &jetstream.SubjectTransformConfig{Source: src, Destination: dest}}
		n, err := partitionsOf(cfg)
		if err != nil {
			return
		}
		if n < 1 || n > maxPartitions {
			t.Fatalf("partitionsOf(%q) = %d, out of range", dest, n)
		}
		back, err := partitionsOf(schemas.CountersStream(schemas.StreamOptions{Partitions: n}))
		if err != nil || back != n {
			t.Fatalf("the code's transform for %d reads back as %d, %v", n, back, err)
		}
	})
}
