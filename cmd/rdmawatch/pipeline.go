package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/processor/runtime"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// pipelineConfig is one in-process run of the whole pipeline over a source:
// embedded JetStream, the delta engine and publisher, processors, and the
// sink when a ClickHouse DSN is given.
type pipelineConfig struct {
	source     collector.Source
	topology   *schemas.Topology
	eventsOut  io.Writer // JSON lines; nil: not written
	clickhouse string
	processors int
	partitions int
	// interval paces the source (live simulation); 0 runs as fast as the
	// machine allows (replay).
	interval time.Duration
	// onEvent sees every event in the order it is written.
	onEvent func(*schemas.Event)
	// bootID names each node's collector run for the delta engine; nil:
	// replay-<restarts>, the same on every run over the same input.
	bootID func(node string, restarts int) string
	// onStart is called once the embedded server is up, with a connection
	// to it (live runs serve requests on it); nil: nothing.
	onStart func(nc *nats.Conn, url string) error
	// onProgress, when set, is called every progressEvery (default 1 s)
	// while the source is read and once more when the run ends.
	onProgress    func(pipelineProgress)
	progressEvery time.Duration
	// drainGrace bounds the wait for the pipeline to drain after ctx was
	// cancelled (ctrl-C): what was read is processed and stored if it can be
	// within it. Default 5 s.
	drainGrace time.Duration
	log        *slog.Logger
}

// pipelineProgress is a snapshot of a running pipeline.
type pipelineProgress struct {
	// Published is the data time of the newest reading the source gave the
	// collector, Processed that of the newest one the processors handled.
	Published, Processed time.Time
	// Samples counts port samples read from the source; SamplesPerSec is
	// their rate since the previous snapshot.
	Samples       uint64
	SamplesPerSec float64
	// Backlog is the number of batches read but not yet processed.
	Backlog uint64
	Events  uint64
	Wall    time.Duration
	// ProcessedSamples counts port samples the processors handled.
	ProcessedSamples uint64
}

// Lag is how far processing is behind the source, in data time.
func (p pipelineProgress) Lag() time.Duration {
	if p.Processed.IsZero() || p.Published.IsZero() {
		return 0
	}
	return max(0, p.Published.Sub(p.Processed))
}

// trackingSource remembers the data time of each reading that carries
// ports, in order: with one publisher, the n-th counters message is the n-th
// such reading, so the processors' message count gives the data time they
// have reached. (A trace reading made only of duplicates publishes nothing
// and skews this a little; the simulator never sends one.)
type trackingSource struct {
	collector.Source
	mu      sync.Mutex
	times   []int64 // unix ms, one per reading with ports
	samples atomic.Uint64
}

func (t *trackingSource) Next(ctx context.Context) (*collector.Reading, error) {
	r, err := t.Source.Next(ctx)
	if err == nil && r != nil && len(r.Ports) > 0 {
		t.samples.Add(uint64(len(r.Ports)))
		t.mu.Lock()
		t.times = append(t.times, r.Time.UnixMilli())
		t.mu.Unlock()
	}
	return r, err
}

// at returns the data time of the n-th reading (1-based) and how many
// readings there are.
func (t *trackingSource) at(n uint64) (time.Time, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	total := uint64(len(t.times))
	if n == 0 || total == 0 {
		return time.Time{}, total
	}
	n = min(n, total)
	return time.UnixMilli(t.times[n-1]).UTC(), total
}

func (t *trackingSource) newest() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.times) == 0 {
		return time.Time{}
	}
	return time.UnixMilli(t.times[len(t.times)-1]).UTC()
}

type pipelineResult struct {
	engine    collector.EngineStats
	batches   uint64
	events    uint64
	byType    map[string]map[string]int // type -> state -> count
	incidents map[string]*schemas.Event // id -> latest state
	elapsed   time.Duration
}

// runPipeline runs until the source ends and everything it produced has been
// processed, written as events and, with ClickHouse, stored. A source error
// (a malformed trace line) stops reading; what was accepted before it is
// still processed and written, then the error is returned. Cancelling ctx
// stops reading; what was read is drained within drainGrace, then ctx's
// error is returned.
func runPipeline(ctx context.Context, cfg pipelineConfig) (*pipelineResult, error) {
	start := time.Now()
	log := cfg.log
	dir, err := os.MkdirTemp("", "rdmawatch-nats-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// The parts run on their own context so that a cancelled ctx (ctrl-C)
	// stops the source first and lets the rest drain what it read.
	workCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	ns, err := natsutil.StartEmbedded(dir, 0)
	if err != nil {
		return nil, err
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.URL(), nats.Name("rdmawatch-pipeline"))
	if err != nil {
		return nil, fmt.Errorf("connect to embedded nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	sopts := schemas.StreamOptions{Partitions: cfg.partitions, Memory: true}
	if err := natsutil.EnsureStreams(ctx, js, sopts); err != nil {
		return nil, err
	}
	if cfg.onStart != nil {
		if err := cfg.onStart(nc, ns.URL()); err != nil {
			return nil, err
		}
	}

	runCtx := workCtx
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	goRun := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}

	res := &pipelineResult{byType: map[string]map[string]int{}, incidents: map[string]*schemas.Event{}}
	var written atomic.Uint64
	var writeMu sync.Mutex
	out := bufio.NewWriterSize(nopWriter(cfg.eventsOut), 1<<16)
	ec, err := js.OrderedConsumer(ctx, schemas.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{schemas.EventsAllFilter}})
	if err != nil {
		return nil, fmt.Errorf("events consumer: %w", err)
	}
	cc, err := ec.Consume(func(m jetstream.Msg) {
		ev, err := schemas.DecodeEvent(m.Data())
		if err != nil {
			log.Error("undecodable event on the stream", "subject", m.Subject(), "err", err)
			written.Add(1)
			return
		}
		line, _ := json.Marshal(ev)
		writeMu.Lock()
		out.Write(line)
		out.WriteByte('\n')
		if res.byType[ev.Type] == nil {
			res.byType[ev.Type] = map[string]int{}
		}
		res.byType[ev.Type][ev.State]++
		res.incidents[ev.ID] = ev
		writeMu.Unlock()
		if cfg.onEvent != nil {
			cfg.onEvent(ev)
		}
		written.Add(1)
	})
	if err != nil {
		return nil, fmt.Errorf("events consumer: %w", err)
	}
	defer cc.Stop()

	n := max(cfg.processors, 1)
	procs := make([]*runtime.Processor, n)
	for i := range procs {
		p, err := runtime.New(js, runtime.Config{
			Partitions: sopts.Partitions,
			Instances:  n,
			Instance:   i,
			Topology:   cfg.topology,
			Start:      runtime.StartAll,
		}, log.With("processor", i))
		if err != nil {
			return nil, err
		}
		procs[i] = p
		goRun(fmt.Sprintf("processor %d", i), p.Run)
	}

	var sk *sink.Sink
	if cfg.clickhouse != "" {
		var closeSink func()
		sk, closeSink, err = openSink(ctx, js, cfg.clickhouse, sink.Config{FlushInterval: 200 * time.Millisecond}, cfg.topology, log.With("part", "sink"))
		if err != nil {
			return nil, err
		}
		defer closeSink()
		goRun("sink", sk.Run)
	}

	bootID := cfg.bootID
	if bootID == nil {
		bootID = func(node string, restarts int) string { return fmt.Sprintf("replay-%d", restarts) }
	}
	eng := collector.NewEngine(bootID)
	pub := collector.NewPublisher(js, 1024, log)
	src := &trackingSource{Source: cfg.source}
	snapshot := func(prev *pipelineProgress) pipelineProgress {
		var processed, samples uint64
		for _, p := range procs {
			processed += p.Processed()
			samples += p.Stats().Samples
		}
		pt, total := src.at(processed)
		p := pipelineProgress{Published: src.newest(), Processed: pt, Samples: src.samples.Load(),
			Events: written.Load(), Wall: time.Since(start), ProcessedSamples: samples}
		if total > processed {
			p.Backlog = total - processed
		}
		if prev != nil && p.Wall > prev.Wall {
			p.SamplesPerSec = float64(p.Samples-prev.Samples) / (p.Wall - prev.Wall).Seconds()
		}
		return p
	}
	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	if cfg.onProgress != nil {
		every := cfg.progressEvery
		if every <= 0 {
			every = time.Second
		}
		progressWG.Add(1)
		go func() {
			defer progressWG.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			prev := snapshot(nil)
			for {
				select {
				case <-progressDone:
					return
				case <-t.C:
				}
				p := snapshot(&prev)
				cfg.onProgress(p)
				prev = p
			}
		}()
	}
	srcErr := collector.New(src, eng, pub, collector.Config{Interval: cfg.interval, Log: log}).Run(ctx)
	res.engine = eng.Stats()
	res.batches = pub.Published()

	// Wait until everything published has been processed, every event written
	// and every row stored. After ctrl-C, only for a little while.
	drainCtx := workCtx
	if ctx.Err() != nil {
		grace := cfg.drainGrace
		if grace <= 0 {
			grace = 5 * time.Second
		}
		var cancelDrain context.CancelFunc
		drainCtx, cancelDrain = context.WithTimeout(workCtx, grace)
		defer cancelDrain()
	}
	err = waitDrained(drainCtx, js, procs, &written, errc)
	if err == nil && sk != nil {
		err = sk.WaitDrained(drainCtx)
	}
	close(progressDone)
	progressWG.Wait()
	if cfg.onProgress != nil {
		// The last line's rate is the whole run's.
		cfg.onProgress(snapshot(&pipelineProgress{}))
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		cancel()
		wg.Wait()
		cc.Stop()
		writeMu.Lock()
		out.Flush()
		writeMu.Unlock()
		res.events = written.Load()
		res.elapsed = time.Since(start)
		return res, err
	}
	cancel()
	wg.Wait()
	cc.Stop()
	writeMu.Lock()
	ferr := out.Flush()
	res.events = written.Load()
	writeMu.Unlock()
	res.elapsed = time.Since(start)
	if srcErr != nil {
		return res, srcErr
	}
	select {
	case err := <-errc:
		return res, err
	default:
	}
	return res, ferr
}

func waitDrained(ctx context.Context, js jetstream.JetStream, procs []*runtime.Processor, written *atomic.Uint64, errc <-chan error) error {
	stable := 0
	for stable < 3 {
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		done, err := drained(ctx, js, procs, written)
		if err != nil {
			return err
		}
		if done {
			stable++
		} else {
			stable = 0
		}
	}
	return nil
}

func drained(ctx context.Context, js jetstream.JetStream, procs []*runtime.Processor, written *atomic.Uint64) (bool, error) {
	counters, err := js.Stream(ctx, schemas.StreamCounters)
	if err != nil {
		return false, err
	}
	ci, err := counters.Info(ctx)
	if err != nil {
		return false, err
	}
	var processed uint64
	for _, p := range procs {
		processed += p.Processed()
	}
	if processed < ci.State.Msgs {
		return false, nil
	}
	events, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		return false, err
	}
	ei, err := events.Info(ctx)
	if err != nil {
		return false, err
	}
	if written.Load() < ei.State.Msgs {
		return false, nil
	}
	return true, nil
}

func nopWriter(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
