// Package sink writes what flows on JetStream into ClickHouse: counter
// batches into port_samples, incident state changes into events, node
// inventories into inventory. A message is acked only after ClickHouse
// accepted its rows; while ClickHouse is down the sink retries with backoff
// and keeps its messages in progress, so nothing accepted by JetStream is
// lost, and a redelivered message only adds rows that ReplacingMergeTree
// collapses.
package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Sink consumes the rdmawatch streams into ClickHouse.
type Sink struct {
	js   jetstream.JetStream
	conn driver.Conn
	cfg  Config
	log  *slog.Logger
}

// New checks cfg and returns a sink; nothing runs until Run. The tables must
// exist (schemas/clickhouse.Migrate) in the connection's database.
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
	return &Sink{js: js, conn: conn, cfg: cfg.withDefaults(), log: log.With("component", "sink")}, nil
}

// Run consumes until ctx is cancelled, then writes what it holds (within
// ShutdownTimeout), acks it and returns. It returns an error when a consumer
// cannot be created, or when the last flush failed (those messages are left
// for redelivery).
func (s *Sink) Run(ctx context.Context) error {
	counters := &pipeline[SampleRow]{
		s: s, table: "port_samples", columns: SampleColumns,
		stream: schemas.StreamCounters, filter: schemas.CountersAllFilter, consumer: s.cfg.ConsumerPrefix + "-counters",
		decode: func(data []byte) ([]SampleRow, error) {
			b, err := schemas.DecodeBatch(data)
			if err != nil {
				return nil, err
			}
			return SampleRows(b), nil
		},
		values: (*SampleRow).Values,
	}
	events := &pipeline[EventRow]{
		s: s, table: "events", columns: EventColumns,
		stream: schemas.StreamEvents, filter: schemas.EventsAllFilter, consumer: s.cfg.ConsumerPrefix + "-events",
		decode: func(data []byte) ([]EventRow, error) {
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
	inventory := &pipeline[InventoryRow]{
		s: s, table: "inventory", columns: InventoryColumns,
		stream: schemas.StreamInventory, filter: schemas.InventoryAllFilter, consumer: s.cfg.ConsumerPrefix + "-inventory",
		decode: func(data []byte) ([]InventoryRow, error) {
			inv, err := schemas.DecodeInventory(data)
			if err != nil {
				return nil, err
			}
			return InventoryRows(inv), nil
		},
		values: (*InventoryRow).Values,
	}
	runners := []interface {
		init(context.Context) error
		run(context.Context) error
	}{counters, events, inventory}
	for _, r := range runners {
		if err := r.init(ctx); err != nil {
			return err
		}
	}

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
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

// pipeline moves one stream into one table.
type pipeline[R any] struct {
	s        *Sink
	table    string
	columns  []string
	stream   string
	filter   string
	consumer string
	decode   func([]byte) ([]R, error)
	values   func(*R) []any

	cons jetstream.Consumer
	// msgs are fetched and not yet acked; rows[i] came from msgs[rowMsg[i]].
	msgs   []jetstream.Msg
	rows   []R
	rowMsg []int
}

func (p *pipeline[R]) init(ctx context.Context) error {
	cfg := p.s.cfg
	cons, err := p.s.js.CreateOrUpdateConsumer(ctx, p.stream, jetstream.ConsumerConfig{
		Durable:       p.consumer,
		Description:   "rdmawatch sink into ClickHouse table " + p.table,
		FilterSubject: p.filter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: cfg.MaxAckPending,
		// Unlimited deliveries: a message is only ever given up on by Term
		// (it cannot be decoded), never because ClickHouse was down long.
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

// minFetchWait keeps a pull request long enough for the server to answer;
// maxFetchWait bounds how long shutdown waits for a pull in flight.
const (
	minFetchWait = 20 * time.Millisecond
	maxFetchWait = 500 * time.Millisecond
)

func (p *pipeline[R]) run(ctx context.Context) error {
	cfg := p.s.cfg
	log := p.s.log.With("table", p.table, "consumer", p.consumer)
	var deadline time.Time // flush by time: set when the buffer gets its first message
	fetchBackoff := cfg.RetryMin
	for {
		if ctx.Err() != nil {
			return p.shutdown(ctx, log)
		}
		room := cfg.MaxAckPending - len(p.msgs)
		if len(p.msgs) > 0 && (len(p.rows) >= cfg.BatchRows || room <= 0 || !time.Now().Before(deadline)) {
			// An error means ctx ended during retries: the loop's next turn
			// shuts down, which flushes once more with its own deadline.
			_ = p.flush(ctx, log)
			continue
		}
		wait := cfg.FlushInterval
		if len(p.msgs) > 0 {
			wait = time.Until(deadline)
		}
		// Bounded above too: a pull cannot be cancelled, and shutdown must
		// not wait a long flush interval for it.
		wait = min(max(wait, minFetchWait), maxFetchWait)
		// The server ends the pull (FetchMaxWait), not a client timeout: a
		// client that gives up first can strand messages the server already
		// delivered to the pull, and they come back only after AckWait.
		batch, err := p.cons.Fetch(min(room, fetchMax), jetstream.FetchMaxWait(wait))
		if err != nil {
			log.Warn("sink: fetch", "err", err, "retry_in", fetchBackoff)
			sleep(ctx, fetchBackoff)
			fetchBackoff = min(2*fetchBackoff, cfg.RetryMax)
			continue
		}
		for msg := range batch.Messages() {
			if len(p.msgs) == 0 {
				deadline = time.Now().Add(cfg.FlushInterval)
			}
			p.add(msg, log)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			log.Warn("sink: fetch", "err", err, "retry_in", fetchBackoff)
			sleep(ctx, fetchBackoff)
			fetchBackoff = min(2*fetchBackoff, cfg.RetryMax)
			continue
		}
		fetchBackoff = cfg.RetryMin
	}
}

// add decodes a message into the buffer; a message that cannot be decoded
// is terminated right away so it never blocks the rest.
func (p *pipeline[R]) add(msg jetstream.Msg, log *slog.Logger) {
	rows, err := p.decode(msg.Data())
	if err != nil {
		p.poison(msg, err, log)
		return
	}
	if len(rows) == 0 {
		// Nothing to write (a node without ports): done already.
		if err := msg.Ack(); err != nil {
			log.Warn("sink: ack", "err", err)
		}
		return
	}
	idx := len(p.msgs)
	p.msgs = append(p.msgs, msg)
	for range rows {
		p.rowMsg = append(p.rowMsg, idx)
	}
	p.rows = append(p.rows, rows...)
}

func (p *pipeline[R]) poison(msg jetstream.Msg, err error, log *slog.Logger) {
	var seq uint64
	var deliveries uint64
	if meta, merr := msg.Metadata(); merr == nil {
		seq, deliveries = meta.Sequence.Stream, meta.NumDelivered
	}
	log.Error("sink: poison message terminated, it will not be redelivered",
		"stream", p.stream, "stream_seq", seq, "subject", msg.Subject(), "deliveries", deliveries, "err", err)
	if terr := msg.TermWithReason("rdmawatch sink: " + err.Error()); terr != nil {
		log.Warn("sink: term", "stream_seq", seq, "err", terr)
	}
}

// flush writes the buffer, retrying with capped exponential backoff until
// ClickHouse accepts it, then acks every message of it. It returns an error
// only when ctx ends first; the buffer is then kept.
func (p *pipeline[R]) flush(ctx context.Context, log *slog.Logger) error {
	cfg := p.s.cfg
	backoff := cfg.RetryMin
	for attempt := 1; ; attempt++ {
		if len(p.msgs) == 0 {
			return nil
		}
		start := time.Now()
		err := p.insert(ctx)
		if err == nil {
			for _, m := range p.msgs {
				// A lost ack means one redelivery, which the table collapses.
				if aerr := m.Ack(); aerr != nil {
					log.Warn("sink: ack", "err", aerr)
				}
			}
			log.Debug("sink: flushed", "rows", len(p.rows), "messages", len(p.msgs), "took", time.Since(start))
			if attempt > 1 {
				log.Info("sink: clickhouse accepted rows again", "rows", len(p.rows), "attempts", attempt)
			}
			p.msgs, p.rows, p.rowMsg = p.msgs[:0], p.rows[:0], p.rowMsg[:0]
			return nil
		}
		var bad *badRowError
		if errors.As(err, &bad) {
			// The driver refused a value before anything was sent: that
			// message can never be written, the others can right away.
			p.poison(p.msgs[bad.msg], err, log)
			p.drop(bad.msg)
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("sink: insert %d rows into %s: %w", len(p.rows), p.table, err)
		}
		log.Warn("sink: insert failed, retrying", "rows", len(p.rows), "messages", len(p.msgs), "attempt", attempt, "retry_in", backoff, "err", err)
		// Keep JetStream from redelivering what this sink still holds.
		for _, m := range p.msgs {
			_ = m.InProgress()
		}
		sleep(ctx, backoff)
		backoff = min(2*backoff, cfg.RetryMax)
	}
}

// badRowError is a row the driver rejected while building the batch.
type badRowError struct {
	msg int
	err error
}

func (e *badRowError) Error() string {
	return "row rejected by the clickhouse driver: " + e.err.Error()
}
func (e *badRowError) Unwrap() error { return e.err }

func (p *pipeline[R]) insert(ctx context.Context) error {
	ictx, cancel := context.WithTimeout(ctx, p.s.cfg.InsertTimeout)
	defer cancel()
	// An explicit column list: 18.16 rejects the driver's column-less form,
	// and INSERT ... VALUES through Exec hangs on it.
	batch, err := p.s.conn.PrepareBatch(ictx, "INSERT INTO "+p.table+" ("+strings.Join(p.columns, ", ")+")")
	if err != nil {
		return fmt.Errorf("prepare insert into %s: %w", p.table, err)
	}
	defer batch.Close()
	for i := range p.rows {
		if err := batch.Append(p.values(&p.rows[i])...); err != nil {
			_ = batch.Abort()
			return &badRowError{msg: p.rowMsg[i], err: fmt.Errorf("%s row %d: %w", p.table, i, err)}
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %d rows into %s: %w", len(p.rows), p.table, err)
	}
	return nil
}

// drop removes message i and its rows from the buffer.
func (p *pipeline[R]) drop(i int) {
	rows, rowMsg := p.rows[:0], p.rowMsg[:0]
	for j := range p.rows {
		switch m := p.rowMsg[j]; {
		case m == i:
		case m > i:
			rows, rowMsg = append(rows, p.rows[j]), append(rowMsg, m-1)
		default:
			rows, rowMsg = append(rows, p.rows[j]), append(rowMsg, m)
		}
	}
	p.rows, p.rowMsg = rows, rowMsg
	p.msgs = append(p.msgs[:i], p.msgs[i+1:]...)
}

// shutdown writes what the buffer holds with a fresh deadline (ctx is
// already cancelled). What cannot be written is Nak'ed so another sink gets
// it at once instead of after AckWait.
func (p *pipeline[R]) shutdown(ctx context.Context, log *slog.Logger) error {
	if len(p.msgs) == 0 {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.s.cfg.ShutdownTimeout)
	defer cancel()
	if err := p.flush(sctx, log); err != nil {
		for _, m := range p.msgs {
			_ = m.Nak()
		}
		log.Error("sink: last flush failed, messages left for redelivery", "messages", len(p.msgs), "err", err)
		return err
	}
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// drainPoll is how often WaitDrained asks JetStream about the consumers.
const drainPoll = 20 * time.Millisecond

// WaitDrained returns once every consumer of this sink has no message left
// to deliver and none delivered but unacked, that is when everything on the
// streams is in ClickHouse (or was terminated as poison). Replay calls it
// after the processors finished and before cancelling Run; a live sink never
// needs it. It polls JetStream, so it also works before Run created the
// consumers (it waits for them).
func (s *Sink) WaitDrained(ctx context.Context) error {
	consumers := []struct{ stream, name string }{
		{schemas.StreamCounters, s.cfg.ConsumerPrefix + "-counters"},
		{schemas.StreamEvents, s.cfg.ConsumerPrefix + "-events"},
		{schemas.StreamInventory, s.cfg.ConsumerPrefix + "-inventory"},
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
