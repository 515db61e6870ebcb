// Package sink writes what flows on JetStream into ClickHouse: counter
// batches into port_samples, incident state changes into events, node
// inventories into inventory. A message is acked only after ClickHouse
// accepted its rows; while ClickHouse is down the sink retries with backoff
// and keeps its messages in progress, so nothing accepted by JetStream is
// lost. A message the sink cannot use (it does not decode, its node is not
// its subject's, a sample's time is far from the time JetStream stored it,
// ClickHouse refuses its values) goes to the dead-letter stream with the
// reason, never stops the rest, never vanishes. A counters message that may
// be in port_samples already (redelivered, or part of an INSERT that
// failed) only adds the rows that are not, so the rollups the materialized
// views keep stay equal to port_samples FINAL.
package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/jsbatch"
	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Role is the name the sink's dead letters carry (rdmawatch.deadletter.sink.<stream>).
const Role = "sink"

// Sink consumes the rdmawatch streams into ClickHouse.
type Sink struct {
	js   jetstream.JetStream
	conn driver.Conn
	cfg  Config
	log  *slog.Logger

	// notReady is why the sink is not consuming yet ("" once it is).
	notReady atomic.Pointer[string]
	// probeErr is why the last probe found that the sink cannot write
	// ("" or nil: it can; see probe).
	probeErr atomic.Pointer[string]
	// dataClock is the newest counter data time (unix ms) this sink
	// accepted, or found in port_samples when it started: the data clock
	// of schemas.TimeBounds.
	dataClock atomic.Int64
	// suspect is the window in which every message counts as possibly
	// inserted already: after the sink starts and after each NATS
	// reconnect (Config.SuspectWindow).
	suspect *jsbatch.Window
	pipesMu sync.Mutex
	pipes   []statser
	// roll rolls the rollups (nil: RollupEvery < 0).
	roll *roller
}

// New checks cfg and returns a sink; nothing runs until Run. The tables must
// exist (schemas/chdb.Migrate, run by an admin: `rdmawatch migrate`)
// in the connection's database; the sink itself needs only SELECT and INSERT.
func New(js jetstream.JetStream, conn driver.Conn, cfg Config, log *slog.Logger) (*Sink, error) {
	if js == nil || conn == nil {
		return nil, fmt.Errorf("%w: sink needs a JetStream context and a ClickHouse connection", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{js: js, conn: conn, cfg: cfg.withDefaults(), log: log.With("component", "sink")}
	s.suspect = jsbatch.NewWindow(js.Conn(), s.cfg.SuspectWindow)
	if s.cfg.RollupEvery > 0 {
		s.roll = newRoller(conn, s.cfg, s.log)
	}
	reason := "not started"
	s.notReady.Store(&reason)
	return s, nil
}

// Ready returns nil while the sink can write, else why not: for a /readyz
// handler. The sink is not ready before it consumes (ClickHouse not
// answering, the schema not at the version it needs, the consumers not
// created), while the last probe of ClickHouse failed or found its user
// read-only (every Config.ProbeEvery), and while a table's last write
// failed (an INSERT, or the check before it, failed as ClickHouse's or the
// connection's error, not as a refusal of one message's values): that
// lasts until a write of the table succeeds again.
func (s *Sink) Ready() error {
	if r := s.notReady.Load(); r != nil && *r != "" {
		return errors.New(*r)
	}
	var errs []error
	if r := s.probeErr.Load(); r != nil && *r != "" {
		errs = append(errs, errors.New(*r))
	}
	s.pipesMu.Lock()
	pipes := s.pipes
	s.pipesMu.Unlock()
	for _, p := range pipes {
		if r := p.writeError(); r != "" {
			errs = append(errs, errors.New(r))
		}
	}
	return errors.Join(errs...)
}

func (s *Sink) setNotReady(reason string) { s.notReady.Store(&reason) }

// Run waits until the schema is migrated (retrying with backoff, not ready
// meanwhile), consumes until ctx is cancelled, then writes what it holds
// (within ShutdownTimeout), acks it and returns. It returns an error when a
// consumer cannot be created, or when the last flush failed (those messages
// are left for redelivery).
func (s *Sink) Run(ctx context.Context) error {
	s.suspect.Open()
	runners, err := s.tables()
	if err != nil {
		s.setNotReady(err.Error())
		return err
	}
	s.pipesMu.Lock()
	s.pipes = s.pipes[:0]
	for _, r := range runners {
		s.pipes = append(s.pipes, r)
	}
	s.pipesMu.Unlock()

	if !s.waitSchema(ctx) {
		return nil
	}
	for _, r := range runners {
		if err := r.init(ctx); err != nil {
			s.setNotReady(err.Error())
			return err
		}
	}
	s.setNotReady("")
	defer s.setNotReady("stopped")
	defer background(ctx, s.probeLoop)()
	if s.roll != nil {
		// The roller stops after the tables' last flush, then rolls what
		// they stored.
		defer background(context.WithoutCancel(ctx), func(ctx context.Context) { s.roll.run(ctx, s.cfg.ShutdownTimeout) })()
	}
	err = runAll(ctx, runners)
	// Acks are fire-and-forget publishes: push them out before returning so a
	// clean shutdown does not cause redeliveries.
	if err := s.js.Conn().FlushTimeout(5 * time.Second); err != nil && !s.js.Conn().IsClosed() {
		s.log.Warn("sink: flushing acks to nats", "err", err)
	}
	return err
}

// background runs f in a goroutine with a context of its own under parent,
// and returns what stops it and waits for it to return.
func background(parent context.Context, f func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// runAll runs every runner until ctx ends and each returned.
func runAll(ctx context.Context, runners []runner) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, r := range runners {
		wg.Go(func() {
			if err := r.run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runner is one stream-to-table pipeline as Run drives it (a table).
type runner interface {
	statser
	init(context.Context) error
	run(context.Context) error
}

// tables builds the sink's four tables.
func (s *Sink) tables() ([]runner, error) {
	counters, err1 := s.countersPipeline()
	events, err2 := s.eventsPipeline()
	inventory, err3 := s.inventoryPipeline()
	config, err4 := s.configPipeline() // sink/config_rows.go
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, err
	}
	return []runner{counters, events, inventory, config}, nil
}

// countersPipeline writes counter batches into port_samples, column by
// column, checking redelivered rows against the table first.
func (s *Sink) countersPipeline() (*table[SampleRow], error) {
	// SampleRows copies what it keeps: the fetcher, the table's only
	// decoding goroutine, decodes into reused memory.
	var dec schemas.BatchDecoder
	blocks, order := newSampleBlocks(), &sampleOrder{}
	return newTable(s, source[SampleRow]{
		stream: schemas.StreamCounters, consumer: s.cfg.ConsumerPrefix + "-counters",
		decode: func(subject string, data []byte) ([]SampleRow, error) {
			b, err := dec.Decode(data)
			if err != nil {
				return nil, err
			}
			if err := schemas.CheckBatchSubject(subject, b); err != nil {
				return nil, fmt.Errorf("%w: %w", errSpoofed, err)
			}
			return SampleRows(b), nil
		},
		check: s.checkSampleTimes,
	}, tableSpec[SampleRow]{
		name: "port_samples", columns: SampleColumns,
		values:  (*SampleRow).Values,
		block:   blocks.fill,
		present: s.samplesPresent,
		order:   order.sort,
		stored:  s.noteStored,
	})
}

// eventsPipeline writes incident state changes into events.
func (s *Sink) eventsPipeline() (*table[EventRow], error) {
	return newTable(s, source[EventRow]{
		stream: schemas.StreamEvents, consumer: s.cfg.ConsumerPrefix + "-events",
		decode: func(_ string, data []byte) ([]EventRow, error) {
			e, err := schemas.DecodeEvent(data)
			if err != nil {
				return nil, err
			}
			r, err := NewEventRow(e)
			if err != nil {
				return nil, err
			}
			return []EventRow{r}, nil
		},
	}, tableSpec[EventRow]{name: "events", columns: EventColumns, values: (*EventRow).Values})
}

// inventoryPipeline writes node inventories into inventory.
func (s *Sink) inventoryPipeline() (*table[InventoryRow], error) {
	return newTable(s, source[InventoryRow]{
		stream: schemas.StreamInventory, consumer: s.cfg.ConsumerPrefix + "-inventory",
		decode: func(subject string, data []byte) ([]InventoryRow, error) {
			inv, err := schemas.DecodeInventory(data)
			if err != nil {
				return nil, err
			}
			if err := schemas.CheckInventorySubject(subject, inv); err != nil {
				return nil, fmt.Errorf("%w: %w", errSpoofed, err)
			}
			return InventoryRows(inv), nil
		},
	}, tableSpec[InventoryRow]{name: "inventory", columns: InventoryColumns, values: (*InventoryRow).Values})
}

// waitSchema polls schema_migrations until every migration the sink needs
// is there, and reads the data clock port_samples holds; the sink never runs
// DDL itself. It returns false when ctx ended first.
func (s *Sink) waitSchema(ctx context.Context) bool {
	b := retry.NewBackoff(retry.Policy{Initial: s.cfg.RetryMin, Max: s.cfg.RetryMax})
	for {
		err := chdb.CheckSchema(ctx, s.conn)
		if err == nil {
			err = s.seedDataClock(ctx)
		}
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		s.setNotReady(err.Error())
		wait := b.Next()
		s.log.Warn("sink: waiting for the clickhouse schema (an admin runs `rdmawatch migrate`)", "err", err, "retry_in", wait)
		_ = retry.Sleep(ctx, wait)
	}
}

// errSpoofed marks a message whose node is not its subject's.
var errSpoofed = errors.New("spoofed node")

// drainPoll is how often WaitDrained asks JetStream about the consumers.
const drainPoll = 20 * time.Millisecond

// WaitDrained returns once every consumer of this sink has no message left
// to deliver and none delivered but unacked, that is when everything on the
// streams is in ClickHouse (or was dead-lettered). Replay calls it after the
// processors finished and before cancelling Run; a live sink never needs it.
// It polls JetStream, so it also works before Run created the consumers (it
// waits for them).
func (s *Sink) WaitDrained(ctx context.Context) error {
	consumers := []struct{ stream, name string }{
		{schemas.StreamCounters, s.cfg.ConsumerPrefix + "-counters"},
		{schemas.StreamEvents, s.cfg.ConsumerPrefix + "-events"},
		{schemas.StreamInventory, s.cfg.ConsumerPrefix + "-inventory"},
		{schemas.StreamInventory, s.cfg.ConsumerPrefix + configConsumerSuffix},
	}
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for {
		drained := true
		for _, c := range consumers {
			cons, err := s.js.Consumer(ctx, c.stream, c.name)
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				drained = false
				break
			}
			if err != nil {
				return fmt.Errorf("sink: consumer %s on %s: %w", c.name, c.stream, err)
			}
			info, err := cons.Info(ctx)
			if err != nil {
				return fmt.Errorf("sink: consumer %s on %s: %w", c.name, c.stream, err)
			}
			if info.NumPending != 0 || info.NumAckPending != 0 {
				drained = false
				break
			}
		}
		if drained {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sink: waiting for the consumers to drain: %w", ctx.Err())
		case <-tick.C:
		}
	}
}
