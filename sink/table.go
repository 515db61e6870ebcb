package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/jsbatch"
)

// table moves one stream into one table: a jsbatch.Consumer fetches,
// batches, acks and dead-letters; it hands each batch to the table's
// tableWriter, which writes it into ClickHouse.
type table[R any] struct {
	consumer *jsbatch.Consumer[R]
	writer   *tableWriter[R]
	// rejects counts by kind (Poison, Spoofed, Implausible and
	// ImplausibleRows) the messages refused before they were held, which
	// jsbatch counts as one.
	mu      sync.Mutex
	rejects TableStats
}

// source is where a table's rows come from.
type source[R any] struct {
	// stream is read whole, by a durable consumer without a filter subject
	// (why: schemas.CountersAllFilter).
	stream, consumer string
	// decode turns a message into rows; its subject is what the publisher
	// was allowed to publish on. An error wrapping errSpoofed counts as
	// spoofed, any other as poison.
	decode func(subject string, data []byte) ([]R, error)
	// check, when set, refuses a decoded message before it is held (the
	// counters' data times, Sink.checkSampleTimes): implausible.
	check func(meta *jetstream.MsgMetadata, rows []R) error
}

// newTable builds the consumer of src and the writer of spec.
func newTable[R any](s *Sink, src source[R], spec tableSpec[R]) (*table[R], error) {
	log := s.log.With("table", spec.name, "consumer", src.consumer)
	t := &table[R]{writer: newTableWriter(s.conn, s.cfg, log, spec)}
	cfg := s.cfg
	c, err := jsbatch.New(s.js, jsbatch.Config[R]{
		Role: Role, Name: spec.name,
		Stream: src.stream, Durable: src.consumer, Description: "rdmawatch sink into ClickHouse table " + spec.name,
		Decode: func(subject string, data []byte) ([]R, error) {
			rows, err := src.decode(subject, data)
			switch {
			case errors.Is(err, errSpoofed):
				return nil, err
			case err != nil:
				return nil, fmt.Errorf("undecodable %s message: %w", src.stream, err)
			}
			return rows, nil
		},
		Check:    src.check,
		Rejected: t.rejected,
		Writer:   t.writer,
		Suspect:  s.suspect.Active,
		// A batch is one flush: BatchRows rows, or half of MaxAckPending
		// messages, or FlushInterval.
		BatchRows: cfg.BatchRows, MaxAckPending: cfg.MaxAckPending, FlushInterval: cfg.FlushInterval,
		AckWait: cfg.AckWait, RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax, ShutdownTimeout: cfg.ShutdownTimeout,
		Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("sink: table %s: %w", spec.name, err)
	}
	t.consumer = c
	return t, nil
}

// rejected counts a message the consumer refused before holding it.
func (t *table[R]) rejected(err error, checked bool, rows int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case checked:
		t.rejects.Implausible++
		t.rejects.ImplausibleRows += uint64(rows)
	case errors.Is(err, errSpoofed):
		t.rejects.Spoofed++
	default:
		t.rejects.Poison++
	}
}

func (t *table[R]) init(ctx context.Context) error { return t.consumer.Init(ctx) }

func (t *table[R]) run(ctx context.Context) error { return t.consumer.Run(ctx) }

func (t *table[R]) writeError() string { return t.writer.writeError() }

// snapshot joins the writer's stats, the consumer's and the kinds of
// rejects.
func (t *table[R]) snapshot() (string, TableStats) {
	st := t.writer.snapshot()
	t.mu.Lock()
	st.Poison, st.Spoofed, st.Implausible, st.ImplausibleRows = t.rejects.Poison, t.rejects.Spoofed, t.rejects.Implausible, t.rejects.ImplausibleRows
	t.mu.Unlock()
	c := t.consumer.Stats()
	st.Retries, st.Acked, st.DeadLettered = c.Retries, c.Acked, c.DeadLettered
	st.Pending, st.PendingRows, st.ConsumerPending = c.Pending, c.PendingRows, c.ConsumerPending
	return t.name(), st
}

func (t *table[R]) name() string { return t.writer.name }
