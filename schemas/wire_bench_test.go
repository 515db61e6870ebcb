package schemas_test

// Benchmark wire-bytes of BENCHMARKS.md: wire size per port-sample, the msgpack
// CounterBatch the collector publishes against the JSON of the raw reading
// (its trace-v1 sample line), on a simulated RoCE fleet after the baseline
// round.
//
//	go test -run '^$' -bench '^BenchmarkWireSize$' ./schemas

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/test/bench"
)

func BenchmarkWireSize(b *testing.B) {
	// 64 ports on 32 nodes, 5 s interval, 12 rounds.
	cfg := bench.FleetConfig(64, 5*time.Second, time.Minute)
	var batches []*schemas.CounterBatch
	var jsonBytes, samples, counters int
	first := true
	err := bench.Run(cfg, func(t *bench.Tick) error {
		if first { // baseline round: no deltas yet
			first = false
			return nil
		}
		var line []byte
		for _, node := range t.Lines {
			for i := range node {
				line = node[i].AppendJSON(line[:0])
				jsonBytes += len(line) + 1 // the newline of JSON Lines
			}
		}
		for _, bt := range t.Batches {
			samples += len(bt.Ports)
			for _, p := range bt.Ports {
				counters += len(p.Counters)
			}
		}
		batches = append(batches, t.Batches...)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	var wireBytes int
	b.ResetTimer()
	for i := range b.N {
		wireBytes = 0
		for _, bt := range batches {
			data, err := schemas.EncodeBatch(bt)
			if err != nil {
				b.Fatal(err)
			}
			wireBytes += len(data)
		}
		_ = i
	}
	b.StopTimer()
	compact := 0
	for _, bt := range batches {
		compact += compactSize(bt)
	}
	b.ReportMetric(float64(compact)/float64(jsonBytes), "proposal/json")
	b.ReportMetric(float64(wireBytes)/float64(samples), "msgpack-B/port-sample")
	b.ReportMetric(float64(jsonBytes)/float64(samples), "json-B/port-sample")
	b.ReportMetric(float64(wireBytes)/float64(jsonBytes), "msgpack/json")
	b.ReportMetric(float64(counters)/float64(samples), "counters/port-sample")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "encode-ns/port-sample")
}

// compactSize is the size a batch would have in a stateful encoding that
// sends a port's strings once per boot id (proposal/json in wire-bytes; not
// implemented: each message stands alone). It is a measurement of the
// proposal, not a codec:
//
//   - counter names, sources and the port's strings (link layer, state,
//     rate, netdev) go once per boot id in the inventory, as a dictionary;
//     a port-sample refers to its port and counters by index;
//   - a port-sample is: port index, time offset from the batch time,
//     interval (varints), a bitmap of the counters whose delta is not 0, the
//     non-zero deltas (uvarints), and a sparse (index, flags) list;
//   - raw values are not repeated every interval: the consumer rebuilds
//     them from the baseline sample (FlagFirst carries the value) and the
//     deltas, with the reset/wrap flags;
//   - gauges only when they change (here: never, lifespan is fixed).
func compactSize(bt *schemas.CounterBatch) int {
	hdr := *bt
	hdr.Ports = nil
	data, _ := schemas.EncodeBatch(&hdr)
	n := len(data)
	var tmp [binary.MaxVarintLen64]byte
	uv := func(v uint64) int { return binary.PutUvarint(tmp[:], v) }
	for i, p := range bt.Ports {
		n += uv(uint64(i)) + binary.PutVarint(tmp[:], p.TimeMs-bt.TimeMs) + uv(uint64(p.IntervalMs))
		n += (len(p.Counters) + 7) / 8
		flagged := 0
		for j, c := range p.Counters {
			if c.Delta != 0 {
				n += uv(c.Delta)
			}
			if c.Flags != 0 {
				flagged++
				n += uv(uint64(j)) + 1
				if c.Flags&schemas.FlagFirst != 0 {
					n += uv(c.Value)
				}
			}
		}
		n += uv(uint64(flagged))
	}
	return n
}
