package engine

// Benchmarks processor-throughput and processor-port-memory of BENCHMARKS.md.
//
//	go test -run '^$' -bench '^Benchmark(ProcessorThroughput|PortMemory)$' ./processor/engine
//
// processor-throughput: port-samples per CPU second through decode and
// every registered detector (the real Processor on a real embedded
// JetStream), against a bare consume-and-decode of the same stream by an
// ordered consumer. CPU time is the whole process's (getrusage), so the
// embedded server's share of delivering the messages is in both; the two
// are measured alternately.
//
// processor-port-memory: heap per tracked port after 2 hours of 10 s
// samples through every detector.

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/test/bench"
)

func benchCPUNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

type throughput struct {
	refCPU, oursCPU   time.Duration
	refWall, oursWall time.Duration
}

func BenchmarkProcessorThroughput(b *testing.B) {
	const (
		ports  = 1000
		ticks  = 60 // 1 s interval: a minute of a 1000-port fleet
		rounds = 3
	)
	ctx := context.Background()
	js, samples := bench.PublishFleet(b, ports, ticks)
	stream, err := js.Stream(ctx, schemas.StreamCounters)
	if err != nil {
		b.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	msgs := info.State.Msgs

	bare := func() (cpu, wall time.Duration) {
		runtime.GC()
		c0, w0 := benchCPUNanos(), time.Now()
		// As the processor's own consumer when it owns every partition: no filter.
		cons, err := js.OrderedConsumer(ctx, schemas.StreamCounters, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverAllPolicy})
		if err != nil {
			b.Fatal(err)
		}
		it, err := cons.Messages()
		if err != nil {
			b.Fatal(err)
		}
		defer it.Stop()
		got, decoded := uint64(0), 0
		for got < msgs {
			m, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			bt, err := schemas.DecodeBatch(m.Data())
			if err != nil {
				b.Fatal(err)
			}
			decoded += len(bt.Ports)
			got++
		}
		if decoded != samples {
			b.Fatalf("bare consumer decoded %d port-samples, published %d", decoded, samples)
		}
		return time.Duration(benchCPUNanos() - c0), time.Since(w0)
	}
	ours := func() (cpu, wall time.Duration) {
		runtime.GC()
		c0, w0 := benchCPUNanos(), time.Now()
		p, err := New(js, Config{Start: StartAll}, nil)
		if err != nil {
			b.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(rctx) }()
		for p.Processed() < msgs {
			select {
			case err := <-done:
				cancel()
				b.Fatalf("processor stopped: %v", err)
			case <-time.After(time.Millisecond):
			}
		}
		cpu, wall = time.Duration(benchCPUNanos()-c0), time.Since(w0)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if st := p.Stats(); st.Samples != uint64(samples) || st.DecodeErrors != 0 {
			b.Fatalf("processor stats %+v, published %d port-samples", st, samples)
		}
		return cpu, wall
	}

	var r throughput
	b.ResetTimer()
	for range b.N {
		for range rounds {
			c, w := bare()
			r.refCPU, r.refWall = r.refCPU+c, r.refWall+w
			c, w = ours()
			r.oursCPU, r.oursWall = r.oursCPU+c, r.oursWall+w
		}
	}
	b.StopTimer()
	n := float64(b.N * rounds * samples)
	refRate := n / r.refCPU.Seconds()
	oursRate := n / r.oursCPU.Seconds()
	b.ReportMetric(refRate, "bare-samples/cpu-s")
	b.ReportMetric(oursRate, "processor-samples/cpu-s")
	b.ReportMetric(oursRate/refRate, "processor/bare")
	b.ReportMetric(n/r.oursWall.Seconds(), "processor-samples/wall-s")
	b.ReportMetric(float64(samples)/float64(msgs), "samples/msg")
}

// BenchmarkPortMemory feeds 2 hours of 10 s samples of a simulated fleet
// through every registered detector (the runtime's own processing path,
// without the stream) and reports the live heap per tracked port.
func BenchmarkPortMemory(b *testing.B) {
	const ports = 200
	cfg := bench.FleetConfig(ports, 10*time.Second, 2*time.Hour)
	// Decode what would come off the stream, so the detectors see what
	// they see in production (strings not shared with the generator).
	var wire [][]byte
	err := bench.Run(cfg, func(t *bench.Tick) error {
		for _, bt := range t.Batches {
			data, err := schemas.EncodeBatch(bt)
			if err != nil {
				return err
			}
			wire = append(wire, data)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	var perPort float64
	var tracked int
	for range b.N {
		// Every registered detector, as the processor command builds them;
		// no stream is needed for the processing path, and a call into
		// the JetStream stand-in would panic.
		p, err := New(noJetStream{}, Config{Start: StartAll}, nil)
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ctx := context.Background()
		for _, data := range wire {
			bt, err := schemas.DecodeBatch(data)
			if err != nil {
				b.Fatal(err)
			}
			p.process(ctx, bt, 0, -1)
			p.pending = p.pending[:0]
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		tracked = len(p.fabric.ports)
		perPort = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(tracked)
		runtime.KeepAlive(p)
	}
	if tracked != bench.PortsPerHost*((ports+bench.PortsPerHost-1)/bench.PortsPerHost) {
		b.Fatalf("%d ports tracked", tracked)
	}
	b.ReportMetric(perPort, "heap-B/port")
	b.ReportMetric(perPort/8192, "heap/8KiB")
	b.ReportMetric(float64(len(wire)), "batches")
}

// noJetStream is a non-nil JetStream for New; the memory benchmark never
// calls it.
type noJetStream struct{ jetstream.JetStream }
