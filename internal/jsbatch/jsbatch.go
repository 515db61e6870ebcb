// Package jsbatch reads one JetStream stream through a durable pull consumer
// in batches, for a writer that stores them elsewhere (the sink: a
// ClickHouse table). It owns what is the consumer's part of at-least-once
// delivery, whatever the writer stores into:
//
//   - fetching beside the writes, bounded by MaxAckPending messages and two
//     batches of rows;
//   - a batch goes when it holds BatchRows rows (or BatchBytes bytes, or half
//     of MaxAckPending messages), when its oldest message waited
//     FlushInterval, or at once when a backlog just ended;
//   - a message is acked only after the writer stored it; a failed write is
//     retried with backoff, and what is left at shutdown is Nak'ed, so
//     another consumer gets it at once;
//   - every held message gets InProgress every AckWait/3, so a long write
//     never makes JetStream hand it to another consumer, and the heartbeat
//     reads the consumer's num_pending (Stats.ConsumerPending);
//   - a message that does not decode, that panics while decoding, that Check
//     refuses or that the writer rejects goes to the dead-letter stream
//     with its reason, and never stops the rest;
//   - a message that may have been stored already (delivered before, or in
//     the window after a start or a reconnect: Window) is marked Suspect
//     for the writer to check.
//
// It lives outside the sink so that another role (the alert bridge) can
// feed its own writer with it; it knows nothing of ClickHouse, and its tests
// run against an embedded JetStream and a writer of their own.
package jsbatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Writer stores batches. The Consumer calls Write from its own goroutine,
// one call at a time.
type Writer[R any] interface {
	// Write stores the rows of the items of batch that are not settled. It
	// marks each item it stored (Item.Written) and each it can never store
	// (Item.Reject, with the reason its dead letter carries). It returns
	// nil only when every item of batch is settled; with an error, the
	// items not settled are retried later, in a batch with the same Items
	// and maybe more.
	Write(ctx context.Context, batch []*Item[R]) error
}

// Item is one fetched message, not acked yet, and its rows.
type Item[R any] struct {
	// Rows are what Config.Decode made of the message.
	Rows []R
	// Suspect: the rows may have been stored already. The Consumer sets it
	// for a message delivered before, or arriving while Config.Suspect
	// says so; a writer sets it when a write with the item's rows failed
	// part-way.
	Suspect bool

	msg  jetstream.Msg
	size int // the message's data, in bytes
	// written: the writer stored every row; rejected: it never can, for
	// reason; dead: dead-lettered (or left for redelivery when that
	// failed). Written or dead, the item leaves the buffer.
	written, rejected, dead bool
	reason                  string
}

// Written marks every row of the item stored: the message is acked after
// the write.
func (it *Item[R]) Written() { it.written = true }

// Reject marks the item as never storable: after the write it goes to the
// dead-letter stream with reason.
func (it *Item[R]) Reject(reason string) { it.rejected, it.reason = true, reason }

// Settled reports whether the item is written or rejected: a writer skips
// it.
func (it *Item[R]) Settled() bool { return it.written || it.rejected || it.dead }

// Subject is the subject the message was published on.
func (it *Item[R]) Subject() string { return it.msg.Subject() }

// StreamSeq is the message's sequence in its stream (0: unknown).
func (it *Item[R]) StreamSeq() uint64 { return streamSeq(it.msg) }

func streamSeq(msg jetstream.Msg) uint64 {
	if meta, err := msg.Metadata(); err == nil {
		return meta.Sequence.Stream
	}
	return 0
}

// Stats is what one Consumer did since it was made.
type Stats struct {
	// Acked is the messages written and acknowledged; Retries the writes
	// that failed and were tried again later.
	Acked, Retries uint64
	// Rejected is the messages Decode or Check refused (Config.Rejected
	// tells which); DeadLettered every message copied to the dead-letter
	// stream: those, and the ones the writer rejected.
	Rejected, DeadLettered uint64
	// Deferred is the messages Check sent back for later (ErrLater).
	Deferred uint64
	// Pending and PendingRows are what the Consumer holds, fetched and not
	// acked yet (a gauge).
	Pending, PendingRows int
	// ConsumerPending is the messages the durable consumer has not
	// delivered yet (JetStream's num_pending) as of the last heartbeat: the
	// backlog every process on the durable shares (a gauge).
	ConsumerPending uint64
}

// ErrLater, wrapped in a Check error, says the message cannot be judged
// yet: it is not refused but given back to JetStream with a delay of one
// AckWait (NakWithDelay), to be judged again when it returns. A sink that
// restarts reads newer messages at once while the older ones a killed sink
// held come back only after AckWait: a check against what was read so far
// must not take the order for a fault.
var ErrLater = errors.New("not judged yet")

// MinAckWait keeps the InProgress heartbeat (every AckWait/3) above a few
// round trips to NATS.
const MinAckWait = 300 * time.Millisecond

// Config describes one Consumer. A zero size or duration means its default.
type Config[R any] struct {
	// Role names who consumes, in the dead letters' subject
	// (rdmawatch.deadletter.<role>.<stream>), in the log and in errors.
	// Name is what the stream is written into (the sink: a table), in
	// errors.
	Role, Name string
	// Stream is read whole by the durable consumer Durable (created or
	// updated by Init, without a filter subject), described by
	// Description.
	Stream, Durable, Description string
	// Decode turns a message into rows; its error is the dead letter's
	// reason. subject is what the publisher was allowed to publish on. A
	// panic counts as an error. No rows: nothing to write, acked at once.
	// Decode runs on the fetching goroutine, one call at a time.
	Decode func(subject string, data []byte) ([]R, error)
	// Check, when set, may refuse a decoded message before it is held; its
	// error is the dead letter's reason. meta is nil when the message has
	// none.
	Check func(meta *jetstream.MsgMetadata, rows []R) error
	// Rejected, when set, is told each message Decode or Check refused,
	// before it is dead-lettered: the error, whether Check refused it, and
	// its rows (0 when Decode refused it). It runs on the fetching
	// goroutine.
	Rejected func(err error, checked bool, rows int)
	// Writer stores the batches.
	Writer Writer[R]
	// Suspect, when set, reports whether a message arriving now may have
	// been stored already whatever its delivery count (Window.Active).
	Suspect func() bool
	// BatchRows: a batch goes once it holds this many rows (default 1024).
	// BatchBytes: or this many bytes of message data (default 0: no
	// bound). A batch takes whole messages, so it may pass either by one
	// message. The rows held are bounded by two batches of BatchRows.
	BatchRows, BatchBytes int
	// MaxAckPending bounds the messages the durable hands out before they
	// are acked (default 1024); a batch takes at most half of them, so the
	// other half is fetched while it is written.
	MaxAckPending int
	// FlushInterval is the longest a message waits for its batch to go
	// (default 1s).
	FlushInterval time.Duration
	// AckWait is how long JetStream waits for an ack before it delivers a
	// message again (default 10s, at least MinAckWait). Held messages get
	// InProgress every AckWait/3, so it only decides how soon another
	// consumer takes over the messages of one that died.
	AckWait time.Duration
	// RetryMin and RetryMax bound the backoff between write attempts and
	// between failed fetches (defaults 100ms and 10s).
	RetryMin, RetryMax time.Duration
	// ShutdownTimeout bounds the last write after Run's context ends
	// (default 10s); what is not written then is Nak'ed.
	ShutdownTimeout time.Duration
	// Log gets what the consumer has to say (nil: nothing).
	Log *slog.Logger
}

func (c Config[R]) withDefaults() Config[R] {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.BatchRows == 0 {
		c.BatchRows = 1024
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = 1024
	}
	def(&c.FlushInterval, time.Second)
	def(&c.AckWait, 10*time.Second)
	def(&c.RetryMin, 100*time.Millisecond)
	def(&c.RetryMax, 10*time.Second)
	def(&c.ShutdownTimeout, 10*time.Second)
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("invalid batch consumer config")

func (c Config[R]) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s consumer %q on %q: "+format, append([]any{ErrInvalidConfig, c.Role, c.Durable, c.Stream}, a...)...)
	}
	switch {
	case c.Role == "" || c.Stream == "" || c.Durable == "":
		return bad("role, stream and durable name are required")
	case c.Decode == nil || c.Writer == nil:
		return bad("Decode and Writer are required")
	case c.BatchRows < 0 || c.BatchBytes < 0 || c.MaxAckPending < 0:
		return bad("batch rows %d, batch bytes %d, max ack pending %d: none may be negative", c.BatchRows, c.BatchBytes, c.MaxAckPending)
	case c.AckWait < MinAckWait:
		return bad("ack wait %v < %v: InProgress could not be sent often enough", c.AckWait, MinAckWait)
	case c.FlushInterval < 0 || c.RetryMin < 0 || c.RetryMax < c.RetryMin || c.ShutdownTimeout < 0:
		return bad("flush interval %v, retry %v..%v, shutdown timeout %v: negative or out of order", c.FlushInterval, c.RetryMin, c.RetryMax, c.ShutdownTimeout)
	}
	return nil
}

// Consumer moves one stream into one Writer. Init creates its durable
// consumer, Run consumes.
type Consumer[R any] struct {
	js   jetstream.JetStream
	cfg  Config[R]
	cons jetstream.Consumer
	flow flow

	// mu guards buf, nrows, nbytes, inbox and stats against the heartbeat
	// and Stats. Only Run's goroutine changes buf; inbox is what the
	// fetcher decoded and Run's goroutine has not taken yet (the heartbeat
	// keeps it in progress too).
	mu            sync.Mutex
	buf           []*Item[R]
	nrows, nbytes int
	inbox         []*Item[R]
	stats         Stats
}

// flow is what the fetcher holds and how it and Run's goroutine wake each
// other.
type flow struct {
	// held counts the messages fetched and not yet acked, dead-lettered or
	// Nak'ed (inbox and buf), heldRows their rows: the fetcher pulls only
	// while held is below MaxAckPending and heldRows below two batches
	// (maxHeldRows).
	held, heldRows atomic.Int64
	// arrived wakes Run's goroutine when the inbox gets messages, freed the
	// fetcher when held went down.
	arrived, freed chan struct{}
	// quiet: the fetcher's last pull came back with fewer messages than it
	// asked for, nothing having arrived for its last quietGap, and no
	// message came since: nothing more is arriving. It wakes Run's
	// goroutine (arrived) too.
	quiet atomic.Bool
}

// New checks cfg and returns a Consumer; nothing runs until Init and Run.
func New[R any](js jetstream.JetStream, cfg Config[R]) (*Consumer[R], error) {
	if js == nil {
		return nil, fmt.Errorf("%w: %s consumer %q needs a JetStream context", ErrInvalidConfig, cfg.Role, cfg.Durable)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Consumer[R]{js: js, cfg: cfg}, nil
}

// Init creates or updates the durable consumer.
func (c *Consumer[R]) Init(ctx context.Context) error {
	cons, err := c.js.CreateOrUpdateConsumer(ctx, c.cfg.Stream, jetstream.ConsumerConfig{
		Durable:       c.cfg.Durable,
		Description:   c.cfg.Description,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.cfg.AckWait,
		MaxAckPending: c.cfg.MaxAckPending,
		// Unlimited deliveries: a message is only ever given up on by the
		// dead-letter path (it cannot be used), never because the writer's
		// store was down long.
		MaxDeliver: -1,
	})
	if err != nil {
		return fmt.Errorf("%s: consumer %s on stream %s: %w", c.cfg.Role, c.cfg.Durable, c.cfg.Stream, err)
	}
	c.cons = cons
	return nil
}

// Stats returns what the Consumer did so far.
func (c *Consumer[R]) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// count changes the stats under the lock Stats takes.
func (c *Consumer[R]) count(f func(*Stats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}
