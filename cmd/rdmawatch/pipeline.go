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
	log     *slog.Logger
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
// still processed and written, then the error is returned.
func runPipeline(ctx context.Context, cfg pipelineConfig) (*pipelineResult, error) {
	start := time.Now()
	log := cfg.log
	dir, err := os.MkdirTemp("", "rdmawatch-nats-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
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

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
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
		sk, closeSink, err = openSink(ctx, js, cfg.clickhouse, sink.Config{FlushInterval: 200 * time.Millisecond}, log.With("part", "sink"))
		if err != nil {
			return nil, err
		}
		defer closeSink()
		goRun("sink", sk.Run)
	}

	eng := collector.NewEngine(func(node string, restarts int) string { return fmt.Sprintf("replay-%d", restarts) })
	pub := collector.NewPublisher(js, 1024, log)
	srcErr := collector.New(cfg.source, eng, pub, collector.Config{Interval: cfg.interval, Log: log}).Run(runCtx)
	res.engine = eng.Stats()
	res.batches = pub.Published()

	// Wait until everything published has been processed, every event written
	// and every row stored.
	err = waitDrained(ctx, js, procs, &written, errc)
	if err == nil && sk != nil {
		err = sk.WaitDrained(ctx)
	}
	if err != nil {
		cancel()
		wg.Wait()
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
