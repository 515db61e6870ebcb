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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
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
	// suspectUntil (unix ns) ends a window in which every message counts as
	// possibly inserted already: after the sink starts and after each NATS
	// reconnect. A broker restarted from its store can hand out again, as
	// delivered once, messages a sink inserted before it died or before the
	// broker lost its ack, so NumDelivered alone cannot tell.
	suspectUntil atomic.Int64
	reconnects   atomic.Uint64
	pipesMu      sync.Mutex
	pipes        []statser
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
	s.suspectUntil.Store(time.Now().Add(s.suspectWindow()).UnixNano())
	if nc := s.js.Conn(); nc != nil {
		s.reconnects.Store(nc.Stats().Reconnects)
	}
	runners := []runner{s.countersPipeline(), s.eventsPipeline(), s.inventoryPipeline(), s.configPipeline()} // configPipeline: sink/config_rows.go
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
	probeCtx, stopProbe := context.WithCancel(ctx)
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		s.probeLoop(probeCtx)
	}()
	defer func() {
		stopProbe()
		<-probeDone
	}()

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	if s.roll != nil {
		// The roller stops after the pipelines' last flush, then rolls
		// what they stored.
		rollCtx, stopRoll := context.WithCancel(context.WithoutCancel(ctx))
		rollDone := make(chan struct{})
		go func() {
			defer close(rollDone)
			s.roll.run(rollCtx, s.cfg.ShutdownTimeout)
		}()
		defer func() {
			stopRoll()
			<-rollDone
		}()
	}
	for _, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Acks are fire-and-forget publishes: push them out before returning so a
	// clean shutdown does not cause redeliveries.
	if err := s.js.Conn().FlushTimeout(5 * time.Second); err != nil && !s.js.Conn().IsClosed() {
		s.log.Warn("sink: flushing acks to nats", "err", err)
	}
	return errors.Join(errs...)
}

// runner is one stream-to-table pipeline as Run drives it.
type runner interface {
	statser
	init(context.Context) error
	run(context.Context) error
}

// countersPipeline writes counter batches into port_samples, column by
// column, checking redelivered rows against the table first.
func (s *Sink) countersPipeline() *pipeline[SampleRow] {
	// SampleRows copies what it keeps: the fetcher, the pipeline's only
	// decoding goroutine, decodes into reused memory.
	var dec schemas.BatchDecoder
	blocks, order := newSampleBlocks(), &sampleOrder{}
	return &pipeline[SampleRow]{
		s: s, table: "port_samples", columns: SampleColumns,
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
		check:   s.checkSampleTimes,
		values:  (*SampleRow).Values,
		block:   blocks.fill,
		present: s.samplesPresent,
		order:   order.sort,
		stored:  s.noteStored,
	}
}

// eventsPipeline writes incident state changes into events.
func (s *Sink) eventsPipeline() *pipeline[EventRow] {
	return &pipeline[EventRow]{
		s: s, table: "events", columns: EventColumns,
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
		values: (*EventRow).Values,
	}
}

// inventoryPipeline writes node inventories into inventory.
func (s *Sink) inventoryPipeline() *pipeline[InventoryRow] {
	return &pipeline[InventoryRow]{
		s: s, table: "inventory", columns: InventoryColumns,
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
		values: (*InventoryRow).Values,
	}
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

// pipeline moves one stream into one table.
type pipeline[R any] struct {
	s       *Sink
	table   string
	columns []string
	// stream is read whole, by a consumer without a filter subject (why:
	// schemas.CountersAllFilter).
	stream   string
	consumer string
	// decode turns a message into rows; its subject is what the publisher
	// was allowed to publish on.
	decode func(subject string, data []byte) ([]R, error)
	// check, when set, refuses a decoded message before it is held: its
	// error is the dead letter's reason (the counters pipeline's data
	// times, Sink.checkSampleTimes).
	check  func(msg jetstream.Msg, rows []R) error
	values func(*R) []any
	// block, when set, fills a batch column by column (no boxing per
	// value); values then only serves to find a row the driver refuses.
	// sent reports whether part of the rows went to the server before an
	// error (sampleBlocks.fill).
	block func(b driver.Batch, rows []*R) (sent bool, err error)
	// present, when set, reports which rows are in the table already. The
	// counters pipeline has one: the minute rollup reads port_samples
	// without FINAL (sink/rollup.go), so a row inserted twice would count
	// twice until a merge.
	present func(ctx context.Context, rows []*R) ([]bool, error)
	// order, when set, sorts the rows of an INSERT by the table's sorting
	// key: ClickHouse writes a block already in order as it is, and
	// otherwise permutes every column of it.
	order func(rows []*R)

	// stored, when set, is told the rows of each message acked (the
	// table has them): the counters pipeline notes their minutes for the
	// rollups.
	stored func(rows []R)

	cons jetstream.Consumer

	// writeErr is why the last write of this table failed ("" or nil: it
	// succeeded, or none failed): Ready reports it.
	writeErr atomic.Pointer[string]

	// mu guards buf against the heartbeat and the stats; only the
	// pipeline's goroutine changes it. inbox is what the fetcher decoded
	// and the pipeline's goroutine has not taken yet (the heartbeat keeps
	// it in progress too).
	mu    sync.Mutex
	buf   []*entry[R]
	nrows int
	inbox []*entry[R]
	stats TableStats
	// held counts the messages fetched and not yet acked, dead-lettered or
	// Nak'ed (inbox and buf), heldRows their rows: the fetcher pulls only
	// while held is below MaxAckPending and heldRows below two flushes
	// (maxHeldRows). arrived wakes the pipeline when the inbox gets
	// messages, freed the fetcher when held went down.
	held     atomic.Int64
	heldRows atomic.Int64
	arrived  chan struct{}
	freed    chan struct{}
	// quiet: the fetcher's last pull came back with fewer messages than
	// it asked for, nothing having arrived for its last quietGap, and no
	// message came since: nothing more is arriving. It wakes the pipeline
	// (arrived) too.
	quiet atomic.Bool
	// inserts counts INSERT blocks accepted: proof that the table takes
	// rows, before a refused message is given up on.
	inserts uint64
	// queryN numbers this pipeline's INSERTs (their query ids); failedIDs
	// are the ids of INSERTs that failed on the client's side and may still
	// be running on the server.
	queryN      uint64
	queryBase   string
	failedIDs   []string
	failedSince time.Time
}

// entry is one fetched, not yet acked message and its rows.
type entry[R any] struct {
	msg  jetstream.Msg
	rows []R
	// suspect: the rows may be in the table already (the message was
	// delivered before, or an INSERT with its rows failed half-way).
	suspect bool
	// done: ClickHouse has every row; dead: dead-lettered or left for
	// redelivery; either way it leaves the buffer.
	done, dead bool
	// refusals counts INSERTs of this message alone that ClickHouse refused
	// as data; insertsMark is p.inserts when the first one began.
	refusals    int
	insertsMark uint64
	refusedErr  error
}

func (p *pipeline[R]) init(ctx context.Context) error {
	cfg := p.s.cfg
	cons, err := p.s.js.CreateOrUpdateConsumer(ctx, p.stream, jetstream.ConsumerConfig{
		Durable:       p.consumer,
		Description:   "rdmawatch sink into ClickHouse table " + p.table,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: cfg.MaxAckPending,
		// Unlimited deliveries: a message is only ever given up on by the
		// dead-letter path (it cannot be used), never because ClickHouse was
		// down long.
		MaxDeliver: -1,
	})
	if err != nil {
		return fmt.Errorf("sink: consumer %s on stream %s: %w", p.consumer, p.stream, err)
	}
	p.cons = cons
	return nil
}

// fetchMax bounds one pull request; a few hundred messages amortise the
// round trip without holding the consumer's whole ack window in one pull.
const fetchMax = 500

// maxFetchWait is how long one pull waits for messages: it bounds how long
// shutdown waits for the pull in flight.
const maxFetchWait = 500 * time.Millisecond

// drainFetchWait is the wait of a pull after one that got all it asked
// for (a backlog): when the backlog ends, the pull that finds it ended
// comes back soon, and its last rows need not wait out maxFetchWait.
// quietGap is how long nothing must have arrived, at the end of a pull
// that came back short, for the stream to count as quiet (pipeline.quiet):
// large messages at a steady rate can leave a pull short, but not with
// such a gap (at the rates where flushes go by size).
const (
	drainFetchWait = 100 * time.Millisecond
	quietGap       = 50 * time.Millisecond
)

func (p *pipeline[R]) run(ctx context.Context) error {
	cfg := p.s.cfg
	log := p.s.log.With("table", p.table, "consumer", p.consumer)
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		p.heartbeat(hbCtx)
	}()
	defer func() {
		stopHB()
		<-hbDone
	}()
	// The pull runs beside the flush: while one INSERT is on its way the
	// next messages are fetched and decoded. One after the other, the sink
	// spent as long pulling as inserting, at 0.4 of clickhouse-client.
	p.arrived, p.freed = make(chan struct{}, 1), make(chan struct{}, 1)
	fetchCtx, stopFetch := context.WithCancel(ctx)
	fetchDone := make(chan struct{})
	go func() {
		defer close(fetchDone)
		p.fetch(fetchCtx, log)
	}()
	defer func() {
		stopFetch()
		<-fetchDone
	}()

	var deadline time.Time // flush by time: set when the buffer gets its first message
	var retryAt time.Time  // after a failed flush, the next one waits until then
	// byRows: the last flush went because the buffer was full, as it does
	// while a backlog drains. When then a pull comes back short (quiet),
	// the backlog is done and its last rows go at once: waiting out the
	// flush interval would not make their INSERT larger. At a steady rate
	// flushes go by time, or, where they go by size, nothing is quiet for
	// quietGap: this never makes their INSERTs smaller or more frequent.
	byRows := false
	flushBackoff := retry.NewBackoff(retry.Policy{Initial: cfg.RetryMin, Max: cfg.RetryMax})
	attempt := 0
	timer := time.NewTimer(cfg.FlushInterval)
	defer timer.Stop()
	for {
		if ctx.Err() != nil {
			// What the fetcher holds is written (or Nak'ed) with the rest.
			stopFetch()
			<-fetchDone
			p.take(true)
			return p.shutdown(ctx, log)
		}
		if p.take(false) > 0 && deadline.IsZero() {
			deadline = time.Now().Add(cfg.FlushInterval)
		}
		now := time.Now()
		full := p.full()
		if len(p.buf) > 0 && (full || !now.Before(deadline) || (byRows && p.quiet.Load())) && !now.Before(retryAt) {
			attempt++
			byRows = full
			err := p.flush(ctx, log)
			switch {
			case err == nil:
				// Every message of the flush is in the table: the table
				// takes writes (also when every row was there already, and
				// no INSERT was needed).
				p.writeErr.Store(nil)
				if attempt > 1 {
					log.Info("sink: clickhouse accepted rows again", "attempts", attempt)
				}
				attempt, retryAt = 0, time.Time{}
				flushBackoff.Reset()
			case ctx.Err() == nil:
				p.count(func(st *TableStats) { st.Retries++ })
				wait := flushBackoff.Next()
				log.Warn("sink: insert failed, retrying", "rows", p.nrows, "messages", len(p.buf), "attempt", attempt, "retry_in", wait, "err", err)
				retryAt = time.Now().Add(wait)
			}
			if len(p.buf) == 0 {
				deadline = time.Time{}
			}
			continue
		}
		wait := cfg.FlushInterval
		if len(p.buf) > 0 {
			wait = time.Until(deadline)
		}
		if !retryAt.IsZero() {
			wait = time.Until(retryAt)
		}
		timer.Reset(max(wait, 0))
		select {
		case <-p.arrived:
		case <-timer.C:
		case <-ctx.Done():
		}
	}
}

// fetch pulls messages while fewer than MaxAckPending are held, decodes
// them into the inbox and wakes the pipeline; it returns when ctx ends
// (after the pull in flight: a pull cannot be cancelled).
func (p *pipeline[R]) fetch(ctx context.Context, log *slog.Logger) {
	b := retry.NewBackoff(retry.Policy{Initial: p.s.cfg.RetryMin, Max: p.s.cfg.RetryMax})
	draining := false // the last pull got all it asked for
	for ctx.Err() == nil {
		room := p.s.cfg.MaxAckPending - int(p.held.Load())
		if room <= 0 || p.heldRows.Load() >= p.maxHeldRows() {
			// Full while ClickHouse refuses or is away, or the pipeline
			// has not written the last pulls yet.
			select {
			case <-p.freed:
			case <-ctx.Done():
			}
			continue
		}
		// The server ends the pull (FetchMaxWait), not a client timeout: a
		// client that gives up first can strand messages the server
		// already delivered to the pull, and they come back only after
		// AckWait.
		asked, wait := min(room, fetchMax), maxFetchWait
		if draining {
			wait = drainFetchWait
		}
		last := time.Now() // the pull's start, then its last message
		batch, err := p.cons.Fetch(asked, jetstream.FetchMaxWait(wait))
		if err != nil {
			p.fetchFailed(ctx, log, b, err)
			continue
		}
		got := 0
		for msg := range batch.Messages() {
			p.add(ctx, msg, log)
			got++
			last = time.Now()
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			p.fetchFailed(ctx, log, b, err)
			continue
		}
		b.Reset()
		draining = got == asked
		if got < asked && time.Since(last) >= quietGap && ctx.Err() == nil {
			p.quiet.Store(true)
			p.wake()
		}
	}
}

// maxHeldRows bounds the rows the fetcher holds: one flush being inserted
// and the next filling. Rows, not only messages: MaxAckPending must be
// large for a fleet of small messages (2 ports each: 10 000 messages made
// flushes of 10 000 rows, and ClickHouse 18.16 spent 3.5x the CPU per row
// of 32 768-row ones, sink-row-bound), and a bound on messages
// alone would let large ones (64 ports each) hold millions of rows.
func (p *pipeline[R]) maxHeldRows() int64 {
	return 2 * int64(max(p.s.cfg.BatchRows, 1))
}

// full reports whether the buffer holds a flush: BatchRows rows, or half
// of MaxAckPending messages (the fetcher pulls the other half meanwhile).
// Only the pipeline's goroutine calls it.
func (p *pipeline[R]) full() bool {
	return p.nrows >= p.s.cfg.BatchRows || len(p.buf) >= max(p.s.cfg.MaxAckPending/2, 1)
}

// take moves the inbox into the buffer, up to one flush (full) unless all,
// and returns how many messages it moved. What stays in the inbox is the
// next flush, which the fetcher may fill while this one is inserted: a
// flush of the whole inbox could take all the rows the fetcher may hold
// (maxHeldRows), and no pull would overlap its INSERT.
func (p *pipeline[R]) take(all bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.inbox {
		if !all && len(p.buf) > 0 && p.full() {
			break
		}
		p.buf = append(p.buf, e)
		p.nrows += len(e.rows)
		n++
	}
	rest := copy(p.inbox, p.inbox[n:])
	clear(p.inbox[rest:]) // no pointers kept past the end
	p.inbox = p.inbox[:rest]
	return n
}

// release says that n held messages with rows rows left (acked,
// dead-lettered, Nak'ed).
func (p *pipeline[R]) release(n, rows int) {
	if n == 0 {
		return
	}
	p.held.Add(int64(-n))
	p.heldRows.Add(int64(-rows))
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

// fetchFailed logs a failed pull and waits the backoff's next step.
func (p *pipeline[R]) fetchFailed(ctx context.Context, log *slog.Logger, b *retry.Backoff, err error) {
	wait := b.Next()
	log.Warn("sink: fetch", "err", err, "retry_in", wait)
	_ = retry.Sleep(ctx, wait)
}

// heartbeat keeps every held message in progress, every AckWait/3, so a
// long insert, a retry or a slow flush never makes JetStream hand them to
// another sink, and AckWait can be short: a sink that dies is taken over
// after AckWait.
func (p *pipeline[R]) heartbeat(ctx context.Context) {
	t := time.NewTicker(p.s.cfg.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		for _, es := range [][]*entry[R]{p.buf, p.inbox} {
			for _, e := range es {
				// One already acked or terminated in this flush just
				// answers ErrMsgAlreadyAckd.
				_ = e.msg.InProgress()
			}
		}
		p.mu.Unlock()
		// The backlog for the metrics: JetStream's count of the messages
		// the consumer has not delivered, which grows also while the
		// fetcher is full and pulls nothing (Pending stays put then).
		ictx, cancel := context.WithTimeout(ctx, p.s.cfg.AckWait/3)
		if info, err := p.cons.Info(ictx); err == nil {
			p.count(func(st *TableStats) { st.ConsumerPending = info.NumPending })
		}
		cancel()
	}
}

// add decodes a message into the inbox; a message that cannot be used is
// dead-lettered right away so it never blocks the rest. The fetcher calls
// it.
func (p *pipeline[R]) add(ctx context.Context, msg jetstream.Msg, log *slog.Logger) {
	p.quiet.Store(false)
	rows, err := p.safeDecode(msg)
	if err != nil {
		kind := func(st *TableStats) { st.Poison++ }
		if errors.Is(err, errSpoofed) {
			kind = func(st *TableStats) { st.Spoofed++ }
		}
		p.count(kind)
		p.deadLetter(ctx, msg, err.Error(), log)
		return
	}
	if p.check != nil {
		if err := p.check(msg, rows); err != nil {
			p.count(func(st *TableStats) { st.Implausible++; st.ImplausibleRows += uint64(len(rows)) })
			p.deadLetter(ctx, msg, err.Error(), log)
			return
		}
	}
	if len(rows) == 0 {
		// Nothing to write (a node without ports): done already.
		if err := msg.Ack(); err != nil {
			log.Warn("sink: ack", "err", err)
		}
		return
	}
	e := &entry[R]{msg: msg, rows: rows}
	if meta, err := msg.Metadata(); err != nil || meta.NumDelivered > 1 || p.s.inSuspectWindow() {
		// Delivered before, or in the window after a start or a broker
		// reconnect: a sink may have inserted it and died, or lost the
		// ack, before the broker recorded it.
		e.suspect = true
	}
	p.held.Add(1)
	p.heldRows.Add(int64(len(rows)))
	p.mu.Lock()
	p.inbox = append(p.inbox, e)
	p.stats.Pending++
	p.stats.PendingRows += len(rows)
	p.mu.Unlock()
	p.wake()
}

// wake tells the pipeline's goroutine the fetcher has news.
func (p *pipeline[R]) wake() {
	select {
	case p.arrived <- struct{}{}:
	default:
	}
}

// safeDecode is decode with a panic turned into an error: one hostile
// message must end only itself.
func (p *pipeline[R]) safeDecode(msg jetstream.Msg) (rows []R, err error) {
	defer func() {
		if r := recover(); r != nil {
			rows, err = nil, fmt.Errorf("panic while decoding: %v", r)
		}
	}()
	rows, err = p.decode(msg.Subject(), msg.Data())
	if errors.Is(err, errSpoofed) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("undecodable %s message: %w", p.stream, err)
	}
	return rows, nil
}

// deadLetter copies msg with its reason to the dead-letter stream and
// terminates it. When that fails (NATS away) the message is left unacked:
// JetStream delivers it again after AckWait, and it comes back here.
func (p *pipeline[R]) deadLetter(ctx context.Context, msg jetstream.Msg, reason string, log *slog.Logger) {
	var seq, deliveries uint64
	if meta, err := msg.Metadata(); err == nil {
		seq, deliveries = meta.Sequence.Stream, meta.NumDelivered
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := natsutil.DeadLetter(dctx, p.s.js, Role, msg, reason); err != nil {
		log.Error("sink: could not dead-letter a message, it will be delivered again", "stream", p.stream, "stream_seq", seq, "subject", msg.Subject(), "reason", reason, "err", err)
		return
	}
	p.count(func(st *TableStats) { st.DeadLettered++ })
	log.Error("sink: message dead-lettered", "stream", p.stream, "stream_seq", seq, "subject", msg.Subject(),
		"deliveries", deliveries, "dead_letter_subject", schemas.DeadLetterSubject(Role, p.stream), "reason", reason)
}

// flush makes one attempt at writing the buffer: the rows already in the
// table are skipped, the rest goes in blocks of BlockRows; when ClickHouse
// refuses the values, the buffer is bisected so the good messages land and
// the refused one is isolated (and dead-lettered after RefuseAttempts).
// Messages written are acked and leave the buffer; it returns the error
// that kept the others (nil when none is left).
func (p *pipeline[R]) flush(ctx context.Context, log *slog.Logger) error {
	mark := p.inserts
	err := p.write(ctx, p.buf, mark, log)
	// Give up on refused messages, now that this attempt may have proven
	// that the table takes other rows.
	for _, e := range p.buf {
		if e.done || e.dead || e.refusals < p.s.cfg.RefuseAttempts || p.inserts <= e.insertsMark {
			continue
		}
		p.count(func(st *TableStats) { st.Refused++; st.RefusedRows += uint64(len(e.rows)) })
		p.deadLetter(ctx, e.msg, fmt.Sprintf("clickhouse refused its %d rows for %s %d times: %v", len(e.rows), p.table, e.refusals, e.refusedErr), log)
		e.dead = true
	}
	p.settle(log)
	if len(p.buf) == 0 {
		return nil
	}
	if err == nil {
		// Only refused messages are left, waiting for proof or attempts.
		err = fmt.Errorf("%d messages refused by clickhouse, retrying", len(p.buf))
	}
	return err
}

// write inserts the rows of es that are not done. On a refusal as data it
// bisects es; it returns the first error it could not isolate.
func (p *pipeline[R]) write(ctx context.Context, es []*entry[R], mark uint64, log *slog.Logger) error {
	err := p.insertEntries(ctx, es, log)
	if err == nil {
		for _, e := range es {
			if !e.dead {
				e.done = true
			}
		}
		return nil
	}
	// Some blocks may have landed before the error.
	for _, e := range es {
		e.suspect = true
	}
	if !Refused(err) {
		return err
	}
	live := es[:0:0]
	for _, e := range es {
		if !e.dead && !e.done {
			live = append(live, e)
		}
	}
	if len(live) == 1 {
		e := live[0]
		if e.refusals == 0 {
			e.insertsMark = mark
		}
		e.refusals++
		e.refusedErr = err
		log.Warn("sink: clickhouse refused one message's rows", "stream_seq", seqOf(e.msg), "subject", e.msg.Subject(), "refusals", e.refusals, "err", err)
		return err
	}
	if len(live) == 0 {
		return nil
	}
	half := len(live) / 2
	err1 := p.write(ctx, live[:half], mark, log)
	if err1 != nil && !Refused(err1) {
		return err1
	}
	err2 := p.write(ctx, live[half:], mark, log)
	if err2 != nil {
		return err2
	}
	return err1
}

// insertEntries writes the rows of es not known to be in the table already,
// in blocks.
func (p *pipeline[R]) insertEntries(ctx context.Context, es []*entry[R], log *slog.Logger) error {
	type ref struct {
		e *entry[R]
		r *R
	}
	var refs []ref
	var suspects []*R
	var suspectRefs []ref
	for _, e := range es {
		if e.done || e.dead {
			continue
		}
		for i := range e.rows {
			r := ref{e, &e.rows[i]}
			if e.suspect && p.present != nil {
				suspects = append(suspects, r.r)
				suspectRefs = append(suspectRefs, r)
				continue
			}
			refs = append(refs, r)
		}
	}
	if len(suspects) > 0 {
		if err := p.waitFailedInserts(ctx, log); err != nil {
			if !errors.Is(err, errInsertsRunning) {
				p.callFailed(err)
			}
			return err
		}
		there, err := p.present(ctx, suspects)
		if err != nil {
			err = fmt.Errorf("which redelivered rows are in %s already: %w", p.table, err)
			p.callFailed(err)
			return err
		}
		var dup uint64
		for i, r := range suspectRefs {
			if there[i] {
				dup++
				continue
			}
			refs = append(refs, r)
		}
		if dup > 0 {
			p.count(func(st *TableStats) { st.DuplicateRows += dup })
			log.Info("sink: skipped rows already in the table (redelivered)", "rows", dup, "of", len(suspects))
		}
		// A message whose rows are all there is done: acked with this
		// flush even if the INSERT of the others fails, and not checked
		// (nor counted) again when they are retried.
		for i := 0; i < len(suspectRefs); {
			e, all := suspectRefs[i].e, true
			for ; i < len(suspectRefs) && suspectRefs[i].e == e; i++ {
				all = all && there[i]
			}
			if all {
				e.done = true
			}
		}
	}
	rows := make([]*R, len(refs))
	for i, r := range refs {
		rows[i] = r.r
	}
	if p.order != nil {
		p.order(rows)
	}
	block := p.s.cfg.BlockRows
	for start := 0; start < len(rows); start += block {
		end := min(start+block, len(rows))
		err := p.insert(ctx, rows[start:end:end])
		var bad *badRowError
		if errors.As(err, &bad) {
			// The driver refused a value before anything was sent: that
			// message can never be written.
			e := refs[slices.IndexFunc(refs, func(r ref) bool { return r.r == rows[start+bad.row] })].e
			p.count(func(st *TableStats) { st.Refused++; st.RefusedRows += uint64(len(e.rows)) })
			p.deadLetter(ctx, e.msg, err.Error(), log)
			e.dead = true
			// Earlier blocks are in the table: everything goes again,
			// after the check for rows already there.
			for _, e := range es {
				e.suspect = true
			}
			return p.insertEntries(ctx, es, log)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// errInsertsRunning: INSERTs of the sink that failed on its side still run
// on the server. The server answers: that is no failed call.
var errInsertsRunning = errors.New("failed inserts still running on the server")

// failedInsertGrace bounds how long the sink waits for its failed INSERTs
// to leave the server before it checks for rows already there regardless.
// Killing them is no way out: a kill between the table's write and its
// materialized views' leaves rows the rollups never count.
const failedInsertGrace = time.Minute

// waitFailedInserts waits until no INSERT of this pipeline that failed on
// the client's side (a timeout, a broken connection) still runs on the
// server: one that finished after the check for rows already there would
// add its rows twice to the rollups. It waits InsertTimeout per call and
// returns an error while they run (the flush is retried later), at most
// failedInsertGrace in all; then it logs and lets the check go on.
func (p *pipeline[R]) waitFailedInserts(ctx context.Context, log *slog.Logger) error {
	if len(p.failedIDs) == 0 {
		return nil
	}
	if p.failedSince.IsZero() {
		p.failedSince = time.Now()
	}
	quoted := make([]string, len(p.failedIDs))
	for i, id := range p.failedIDs {
		quoted[i] = "'" + id + "'" // ids are ours: letters, digits, '-' and '_'
	}
	q := "SELECT count() FROM system.processes WHERE query_id IN (" + strings.Join(quoted, ", ") + ")"
	wctx, cancel := context.WithTimeout(ctx, p.s.cfg.InsertTimeout)
	defer cancel()
	var err error // the last answer: the inserts run, or the call failed
	for {
		var n uint64
		qerr := p.s.conn.QueryRow(wctx, q).Scan(&n)
		switch {
		case qerr == nil && n == 0:
			p.failedIDs, p.failedSince = p.failedIDs[:0], time.Time{}
			return nil
		case qerr == nil:
			err = fmt.Errorf("%w: %d", errInsertsRunning, n)
		case err == nil || wctx.Err() == nil:
			// Not the wait's own deadline cutting a call short after the
			// server said they run.
			err = qerr
		}
		if wctx.Err() != nil {
			if time.Since(p.failedSince) > failedInsertGrace {
				log.Warn("sink: failed inserts may still run on the server; checking for rows already there regardless (the rollups may count them twice)",
					"queries", len(p.failedIDs), "waited", time.Since(p.failedSince), "err", err)
				p.failedIDs, p.failedSince = p.failedIDs[:0], time.Time{}
				return nil
			}
			return fmt.Errorf("waiting for failed inserts into %s to end: %w", p.table, err)
		}
		_ = retry.Sleep(wctx, 50*time.Millisecond)
	}
}

// settle acks the messages written and drops them, and the dead ones, from
// the buffer.
func (p *pipeline[R]) settle(log *slog.Logger) {
	kept := p.buf[:0]
	nrows := 0
	var acked uint64
	for _, e := range p.buf {
		switch {
		case e.done:
			// A lost ack means one redelivery, which the check for rows
			// already there absorbs.
			if p.stored != nil {
				p.stored(e.rows)
			}
			if err := e.msg.Ack(); err != nil {
				log.Warn("sink: ack", "err", err)
			}
			acked++
		case e.dead:
		default:
			kept = append(kept, e)
			nrows += len(e.rows)
		}
	}
	p.mu.Lock()
	left, leftRows := len(p.buf)-len(kept), p.nrows-nrows
	clear(p.buf[len(kept):])
	p.buf, p.nrows = kept, nrows
	p.stats.Acked += acked
	p.stats.Pending, p.stats.PendingRows = len(p.buf)+len(p.inbox), p.nrows
	for _, e := range p.inbox {
		p.stats.PendingRows += len(e.rows)
	}
	p.mu.Unlock()
	p.release(left, leftRows)
}

// badRowError is a row the driver rejected while building the batch.
type badRowError struct {
	row int // in the block
	err error
}

func (e *badRowError) Error() string {
	return "row rejected by the clickhouse driver: " + e.err.Error()
}
func (e *badRowError) Unwrap() error { return e.err }

// insert writes one block.
func (p *pipeline[R]) insert(ctx context.Context, rows []*R) error {
	start := time.Now()
	err := p.insertBlock(ctx, rows)
	took := time.Since(start)
	if obs := p.s.cfg.ObserveInsert; obs != nil {
		obs(p.table, len(rows), took, err)
	}
	p.count(func(st *TableStats) {
		st.InsertSeconds += took.Seconds()
		if err != nil {
			st.InsertErrors++
			return
		}
		st.Inserts++
		st.Rows += uint64(len(rows))
	})
	var bad *badRowError
	switch {
	case err == nil:
		p.inserts++
		p.writeErr.Store(nil)
	case Refused(err) || errors.As(err, &bad):
		// One message's values: the table takes others (its message is
		// isolated and dead-lettered), so the sink can still write.
	default:
		p.setWriteErr(err)
	}
	return err
}

// callFailed counts a ClickHouse call of the write path before the INSERT
// that failed, and says so in Ready until a write succeeds.
func (p *pipeline[R]) callFailed(err error) {
	p.count(func(st *TableStats) { st.InsertErrors++; st.CheckErrors++ })
	p.setWriteErr(err)
}

func (p *pipeline[R]) setWriteErr(err error) {
	r := p.table + ": the last write failed: " + err.Error()
	p.writeErr.Store(&r)
}

func (p *pipeline[R]) writeError() string {
	if r := p.writeErr.Load(); r != nil {
		return *r
	}
	return ""
}

func (p *pipeline[R]) insertBlock(ctx context.Context, rows []*R) (err error) {
	ictx, cancel := context.WithTimeout(ctx, p.s.cfg.InsertTimeout)
	defer cancel()
	// sent: a first attempt sent part of the rows before it failed.
	var sent bool
	var ids []string
	defer func() {
		var bad *badRowError
		if err != nil && (sent || !errors.As(err, &bad)) {
			p.failedIDs = append(p.failedIDs, ids...)
		}
	}()
	prepare := func() (driver.Batch, error) {
		qctx := ictx
		if p.present != nil {
			// A named query, so that after a failure the check for rows
			// already there can wait until the server is really done with
			// it; each attempt its own (one id runs once at a time).
			if p.queryBase == "" {
				p.queryBase = fmt.Sprintf("rdmawatch-sink-%s-%d", p.table, time.Now().UnixNano())
			}
			p.queryN++
			id := fmt.Sprintf("%s-%d", p.queryBase, p.queryN)
			ids = append(ids, id)
			qctx = ch.Context(ictx, ch.WithQueryID(id))
		}
		// An explicit column list: 18.16 rejects the driver's column-less
		// form, and INSERT ... VALUES through Exec hangs on it.
		batch, err := p.s.conn.PrepareBatch(qctx, "INSERT INTO "+p.table+" ("+strings.Join(p.columns, ", ")+")")
		if err != nil {
			return nil, fmt.Errorf("prepare insert into %s: %w", p.table, err)
		}
		return batch, nil
	}
	batch, err := prepare()
	if err != nil {
		return err
	}
	defer func() { _ = batch.Close() }()
	filled := false
	if p.block != nil {
		var berr error
		sent, berr = p.block(batch, rows)
		if filled = berr == nil; !filled {
			// A column the driver refused: start again row by row, which
			// names the row (and so the message) it cannot take. (A chunk
			// that could not be sent fails the new batch too.)
			_ = batch.Abort()
			if batch, err = prepare(); err != nil {
				return err
			}
		}
	}
	if !filled {
		for i, r := range rows {
			if err := batch.Append(p.values(r)...); err != nil {
				_ = batch.Abort()
				return &badRowError{row: i, err: fmt.Errorf("%s row %d: %w", p.table, i, err)}
			}
		}
		if sent {
			// Part of the rows reached the server in the first attempt:
			// they go again only after the check for rows already there.
			_ = batch.Abort()
			return fmt.Errorf("insert %d rows into %s: the driver failed after part of them was sent, and takes every row alone", len(rows), p.table)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %d rows into %s: %w", len(rows), p.table, err)
	}
	return nil
}

// shutdown writes what the buffer holds with a fresh deadline (ctx is
// already cancelled), retrying with backoff. What cannot be written is
// Nak'ed so another sink gets it at once instead of after AckWait.
func (p *pipeline[R]) shutdown(ctx context.Context, log *slog.Logger) error {
	if len(p.buf) == 0 {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.s.cfg.ShutdownTimeout)
	defer cancel()
	b := retry.NewBackoff(retry.Policy{Initial: p.s.cfg.RetryMin, Max: p.s.cfg.RetryMax})
	var err error
	for {
		if err = p.flush(sctx, log); err == nil {
			return nil
		}
		if sctx.Err() != nil {
			break
		}
		_ = retry.Sleep(sctx, b.Next())
	}
	p.mu.Lock()
	for _, e := range p.buf {
		_ = e.msg.Nak()
	}
	n, rows := len(p.buf), p.nrows
	p.mu.Unlock()
	p.release(n, rows)
	log.Error("sink: last flush failed, messages left for redelivery", "messages", n, "err", err)
	return fmt.Errorf("sink: %d messages for %s not written: %w", n, p.table, err)
}

func seqOf(msg jetstream.Msg) uint64 {
	if meta, err := msg.Metadata(); err == nil {
		return meta.Sequence.Stream
	}
	return 0
}

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

// suspectWindow is long enough for every message a dead sink, or a broker
// that lost its state, left unacknowledged to come back (Config).
func (s *Sink) suspectWindow() time.Duration { return max(s.cfg.SuspectWindow, 0) }

// inSuspectWindow reports whether a message arriving now may have been
// inserted already whatever its delivery count; a NATS reconnect since the
// last call opens a new window.
func (s *Sink) inSuspectWindow() bool {
	now := time.Now()
	if nc := s.js.Conn(); nc != nil {
		if n := nc.Stats().Reconnects; n != s.reconnects.Load() {
			s.reconnects.Store(n)
			s.suspectUntil.Store(now.Add(s.suspectWindow()).UnixNano())
		}
	}
	return now.UnixNano() < s.suspectUntil.Load()
}
