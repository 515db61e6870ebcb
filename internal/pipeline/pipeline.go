// Package pipeline runs the whole rdmawatch pipeline in one process over a
// source: an embedded NATS JetStream, the collector's delta engine and
// publisher, the processors, and the sink when a ClickHouse DSN is given.
// The replay, run and eval commands and the end-to-end benchmark use it.
//
// Start brings the parts up; Run reads the source to its end, waits until
// everything it produced was processed, written and stored, and shuts the
// parts down; Shutdown stops them early. The parts run under one errgroup:
// the first one to fail stops the others and is the run's error.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/natsembed"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/all" // every detector registers itself
	"github.com/rdmawatch/rdmawatch/processor/engine"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// Config is one in-process run of the pipeline over a source.
type Config struct {
	Source   collector.Source
	Topology *schemas.Topology // nil: the detectors work on the samples alone
	// EventsOut receives every event as one JSON object per line; nil: not
	// written.
	EventsOut io.Writer
	// ClickHouse is the sink's DSN; empty: no sink, nothing stored.
	ClickHouse string
	// Processors is the number of processor instances (default 1);
	// Partitions those of the counters stream (default
	// schemas.DefaultPartitions).
	Processors, Partitions int
	// Interval paces the source (a live simulation); 0 reads as fast as
	// the machine allows (replay).
	Interval time.Duration
	// OnEvent sees every event in the order it is written.
	OnEvent func(*schemas.Event)
	// BootID names each node's collector run for the delta engine; nil:
	// replay-<restarts>, the same on every run over the same input.
	BootID func(node string, restarts int) string
	// OnProgress, when set, is called every ProgressEvery (default 1 s)
	// while the source is read and once more, with the whole run's rate,
	// when reading ends.
	OnProgress    func(Progress)
	ProgressEvery time.Duration
	// DrainGrace bounds the wait for the pipeline to drain after the
	// context of Run was cancelled (ctrl-C): what was read is processed and
	// stored if it can be within it. Default 5 s.
	DrainGrace time.Duration
	Log        *slog.Logger // nil: slog.Default()
}

// Result is what a run produced.
type Result struct {
	Engine    collector.EngineStats
	Batches   uint64                    // counter batches published
	Events    uint64                    // events read back from the stream
	ByType    map[string]map[string]int // type -> state -> count
	Incidents map[string]*schemas.Event // id -> latest state
	Elapsed   time.Duration
}

// ErrPartFailed is returned by Run when one of the parts (a processor, the
// sink) stopped with an error; the error joins it with the part's.
var ErrPartFailed = errors.New("pipeline: a part failed")

// Pipeline is a started pipeline. Run or Shutdown must be called once.
type Pipeline struct {
	cfg   Config
	log   *slog.Logger
	start time.Time

	dir string
	ns  *natsembed.Server
	nc  *nats.Conn
	js  jetstream.JetStream

	// The parts run on work, detached from the caller's context so that a
	// cancelled Run stops the source first and lets the rest drain.
	work     context.Context
	stopWork context.CancelFunc
	group    *errgroup.Group
	groupCtx context.Context // cancelled when a part fails (or at shutdown)

	events    *eventWriter
	procs     []*engine.Processor
	sink      *sink.Sink
	closeSink func()
	src       *trackingSource

	shutdownOnce sync.Once
	partErr      error // the first part's failure
	eventsErr    error // events that could not be written
}

// Start brings up the embedded server, the streams, the events reader, the
// processors and, with a DSN, the sink. On error everything started is
// stopped again.
func Start(ctx context.Context, cfg Config) (p *Pipeline, err error) {
	if cfg.Source == nil {
		return nil, errors.New("pipeline: no source")
	}
	cfg = cfg.withDefaults()
	p = &Pipeline{cfg: cfg, log: cfg.Log, start: time.Now(), src: &trackingSource{Source: cfg.Source}}
	p.work, p.stopWork = context.WithCancel(context.WithoutCancel(ctx))
	p.group, p.groupCtx = errgroup.WithContext(p.work)
	defer func() {
		if err != nil {
			_ = p.Shutdown()
			p = nil
		}
	}()
	if err := p.startBroker(ctx); err != nil {
		return p, err
	}
	if p.events, err = startEventWriter(ctx, p.js, cfg, p.log); err != nil {
		return p, err
	}
	if err := p.startProcessors(); err != nil {
		return p, err
	}
	if cfg.ClickHouse != "" {
		p.sink, p.closeSink, err = OpenSink(ctx, p.js, cfg.ClickHouse, cfg.Topology, p.log.With("part", "sink"))
		if err != nil {
			return p, err
		}
		p.goPart("sink", p.sink.Run)
	}
	return p, nil
}

func (c Config) withDefaults() Config {
	c.Processors = max(c.Processors, 1)
	if c.Partitions <= 0 {
		c.Partitions = schemas.DefaultPartitions
	}
	if c.BootID == nil {
		c.BootID = func(node string, restarts int) string { return fmt.Sprintf("replay-%d", restarts) }
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = time.Second
	}
	if c.DrainGrace <= 0 {
		c.DrainGrace = 5 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return c
}

// startBroker starts the embedded JetStream server in a temporary
// directory, connects and creates the streams (in memory: a run keeps
// nothing).
func (p *Pipeline) startBroker(ctx context.Context) error {
	var err error
	if p.dir, err = os.MkdirTemp("", "rdmawatch-nats-"); err != nil {
		return err
	}
	if p.ns, err = natsembed.Start(p.dir, 0); err != nil {
		return err
	}
	if p.nc, err = nats.Connect(p.ns.URL(), nats.Name("rdmawatch-pipeline")); err != nil {
		return fmt.Errorf("connect to embedded nats: %w", err)
	}
	if p.js, err = jetstream.New(p.nc); err != nil {
		return err
	}
	return natsutil.EnsureStreams(ctx, p.js, schemas.StreamOptions{Partitions: p.cfg.Partitions, Memory: true})
}

func (p *Pipeline) startProcessors() error {
	n := p.cfg.Processors
	p.procs = make([]*engine.Processor, n)
	for i := range p.procs {
		proc, err := engine.New(p.js, engine.Config{
			Partitions: p.cfg.Partitions,
			Instances:  n,
			Instance:   i,
			Topology:   p.cfg.Topology,
			Start:      engine.StartAll,
		}, p.log.With("processor", i))
		if err != nil {
			return err
		}
		p.procs[i] = proc
		p.goPart(fmt.Sprintf("processor %d", i), proc.Run)
	}
	return nil
}

// goPart runs a part under the group. A part that stops because the work
// context ended has not failed.
func (p *Pipeline) goPart(name string, run func(context.Context) error) {
	p.group.Go(func() error {
		err := run(p.groupCtx)
		if err == nil || (errors.Is(err, context.Canceled) && p.groupCtx.Err() != nil) {
			return nil
		}
		return fmt.Errorf("%s: %w", name, err)
	})
}

// URL is the embedded server's client URL.
func (p *Pipeline) URL() string { return p.ns.URL() }

// Conn is a connection to the embedded server (a live run serves requests
// on it). It is closed by Shutdown.
func (p *Pipeline) Conn() *nats.Conn { return p.nc }

// JetStream is the embedded server's JetStream context.
func (p *Pipeline) JetStream() jetstream.JetStream { return p.js }

// Run reads the source until it ends and everything it produced has been
// processed, written as events and, with ClickHouse, stored, then shuts the
// pipeline down. A source error (a malformed trace line) stops reading; what
// was accepted before it is still processed and written, then the error is
// returned. Cancelling ctx stops reading; what was read is drained within
// DrainGrace, then ctx's error is returned. The result is never nil.
func (p *Pipeline) Run(ctx context.Context) (*Result, error) {
	eng := collector.NewEngine(p.cfg.BootID)
	pub := collector.NewPublisher(p.js, 1024, p.log)
	// A failed part stops the reading too: a live source would otherwise
	// go on until its data time is over.
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	defer context.AfterFunc(p.groupCtx, stopReading)()
	stopProgress := p.startProgress()
	srcErr := collector.New(p.src, eng, pub, collector.Config{Interval: p.cfg.Interval, Log: p.log}).Run(readCtx)

	drainErr := p.drain(ctx)
	stopProgress()
	_ = p.Shutdown()

	res := p.events.result()
	res.Engine, res.Batches, res.Elapsed = eng.Stats(), pub.Published(), time.Since(p.start)
	switch {
	case ctx.Err() != nil:
		return res, ctx.Err()
	case p.partErr != nil:
		// The source error, if any, is a consequence (reading was stopped).
		return res, errors.Join(ErrPartFailed, p.partErr)
	case srcErr != nil:
		return res, errors.Join(srcErr, p.eventsErr)
	case drainErr != nil:
		return res, drainErr
	}
	return res, p.eventsErr
}

// drain waits until everything published was processed, every event
// written and every row stored. After ctx was cancelled (ctrl-C), only for
// DrainGrace.
func (p *Pipeline) drain(ctx context.Context) error {
	dctx := p.groupCtx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(dctx, p.cfg.DrainGrace)
		defer cancel()
	}
	err := p.waitDrained(dctx)
	if err == nil && p.sink != nil {
		err = p.sink.WaitDrained(dctx)
	}
	return err
}

// Shutdown stops the parts, flushes the events and closes the server. It is
// safe to call more than once and returns the first part's failure and the
// events that could not be written.
func (p *Pipeline) Shutdown() error {
	p.shutdownOnce.Do(func() {
		p.stopWork()
		p.partErr = p.group.Wait()
		if p.events != nil {
			p.eventsErr = p.events.close()
		}
		if p.closeSink != nil {
			p.closeSink()
		}
		if p.nc != nil {
			p.nc.Close()
		}
		if p.ns != nil {
			p.ns.Shutdown()
		}
		if p.dir != "" {
			os.RemoveAll(p.dir)
		}
	})
	return errors.Join(p.partErr, p.eventsErr)
}

// Run starts a pipeline and runs it (Start, then Pipeline.Run).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	p, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return p.Run(ctx)
}
