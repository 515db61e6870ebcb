package jsbatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

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
// that came back short, for the stream to count as quiet (flow.quiet):
// large messages at a steady rate can leave a pull short, but not with
// such a gap (at the rates where batches go by size).
const (
	drainFetchWait = 100 * time.Millisecond
	quietGap       = 50 * time.Millisecond
)

// fetch pulls messages while fewer than MaxAckPending are held, decodes
// them into the inbox and wakes Run's goroutine; it returns when ctx ends
// (after the pull in flight: a pull cannot be cancelled).
func (c *Consumer[R]) fetch(ctx context.Context) {
	b := retry.NewBackoff(retry.Policy{Initial: c.cfg.RetryMin, Max: c.cfg.RetryMax})
	draining := false // the last pull got all it asked for
	for ctx.Err() == nil {
		room := c.cfg.MaxAckPending - int(c.flow.held.Load())
		if room <= 0 || c.flow.heldRows.Load() >= c.maxHeldRows() {
			// Full while the writer refuses or its store is away, or Run's
			// goroutine has not written the last pulls yet.
			select {
			case <-c.flow.freed:
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
		batch, err := c.cons.Fetch(asked, jetstream.FetchMaxWait(wait))
		if err != nil {
			c.fetchFailed(ctx, b, err)
			continue
		}
		got := 0
		for msg := range batch.Messages() {
			c.add(ctx, msg)
			got++
			last = time.Now()
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			c.fetchFailed(ctx, b, err)
			continue
		}
		b.Reset()
		draining = got == asked
		if got < asked && time.Since(last) >= quietGap && ctx.Err() == nil {
			c.flow.quiet.Store(true)
			c.wake()
		}
	}
}

// fetchFailed logs a failed pull and waits the backoff's next step.
func (c *Consumer[R]) fetchFailed(ctx context.Context, b *retry.Backoff, err error) {
	wait := b.Next()
	c.cfg.Log.Warn(c.cfg.Role+": fetch", "err", err, "retry_in", wait)
	_ = retry.Sleep(ctx, wait)
}

// wake tells Run's goroutine the fetcher has news.
func (c *Consumer[R]) wake() {
	select {
	case c.flow.arrived <- struct{}{}:
	default:
	}
}

// add decodes a message into the inbox; a message that cannot be used is
// dead-lettered right away so it never blocks the rest. The fetcher calls
// it.
func (c *Consumer[R]) add(ctx context.Context, msg jetstream.Msg) {
	c.flow.quiet.Store(false)
	meta, merr := msg.Metadata()
	if merr != nil {
		meta = nil
	}
	rows, err := c.decode(msg)
	checked := false
	if err == nil && c.cfg.Check != nil {
		err, checked = c.cfg.Check(meta, rows), true
	}
	if errors.Is(err, ErrLater) {
		// Not judged now: back after an AckWait (see ErrLater).
		c.count(func(st *Stats) { st.Deferred++ })
		if nerr := msg.NakWithDelay(c.cfg.AckWait); nerr != nil {
			c.cfg.Log.Warn(c.cfg.Role+": nak", "err", nerr)
		}
		c.cfg.Log.Debug(c.cfg.Role+": message deferred", "stream", c.cfg.Stream, "reason", err.Error())
		return
	}
	if err != nil {
		c.count(func(st *Stats) { st.Rejected++ })
		if c.cfg.Rejected != nil {
			n := 0
			if checked {
				n = len(rows)
			}
			c.cfg.Rejected(err, checked, n)
		}
		c.deadLetter(ctx, msg, err.Error())
		return
	}
	if len(rows) == 0 {
		// Nothing to write (a node without ports): done already.
		if err := msg.Ack(); err != nil {
			c.cfg.Log.Warn(c.cfg.Role+": ack", "err", err)
		}
		return
	}
	it := &Item[R]{msg: msg, Rows: rows, size: len(msg.Data())}
	if meta == nil || meta.NumDelivered > 1 || (c.cfg.Suspect != nil && c.cfg.Suspect()) {
		// Delivered before, or in the window after a start or a broker
		// reconnect: a consumer may have written it and died, or lost the
		// ack, before the broker recorded it.
		it.Suspect = true
	}
	c.flow.held.Add(1)
	c.flow.heldRows.Add(int64(len(rows)))
	c.mu.Lock()
	c.inbox = append(c.inbox, it)
	c.stats.Pending++
	c.stats.PendingRows += len(rows)
	c.mu.Unlock()
	c.wake()
}

// decode is Config.Decode with a panic turned into an error: one hostile
// message must end only itself.
func (c *Consumer[R]) decode(msg jetstream.Msg) (rows []R, err error) {
	defer func() {
		if r := recover(); r != nil {
			rows, err = nil, fmt.Errorf("panic while decoding: %v", r)
		}
	}()
	return c.cfg.Decode(msg.Subject(), msg.Data())
}

// deadLetter copies msg with its reason to the dead-letter stream and
// terminates it. When that fails (NATS away) the message is left unacked:
// JetStream delivers it again after AckWait, and it comes back here.
func (c *Consumer[R]) deadLetter(ctx context.Context, msg jetstream.Msg, reason string) {
	var seq, deliveries uint64
	if meta, err := msg.Metadata(); err == nil {
		seq, deliveries = meta.Sequence.Stream, meta.NumDelivered
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	log := c.cfg.Log
	if err := natsutil.DeadLetter(dctx, c.js, c.cfg.Role, msg, reason); err != nil {
		log.Error(c.cfg.Role+": could not dead-letter a message, it will be delivered again", "stream", c.cfg.Stream, "stream_seq", seq, "subject", msg.Subject(), "reason", reason, "err", err)
		return
	}
	c.count(func(st *Stats) { st.DeadLettered++ })
	log.Error(c.cfg.Role+": message dead-lettered", "stream", c.cfg.Stream, "stream_seq", seq, "subject", msg.Subject(),
		"deliveries", deliveries, "dead_letter_subject", schemas.DeadLetterSubject(c.cfg.Role, c.cfg.Stream), "reason", reason)
}

// heartbeat keeps every held message in progress, every AckWait/3, so a
// long write, a retry or a slow batch never makes JetStream hand them to
// another consumer, and AckWait can be short: a consumer that dies is taken
// over after AckWait. It also reads the durable's backlog.
func (c *Consumer[R]) heartbeat(ctx context.Context) {
	t := time.NewTicker(c.cfg.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		for _, items := range [][]*Item[R]{c.buf, c.inbox} {
			for _, it := range items {
				// One already acked or terminated in this batch just
				// answers ErrMsgAlreadyAckd.
				_ = it.msg.InProgress()
			}
		}
		c.mu.Unlock()
		// The backlog for the metrics: JetStream's count of the messages
		// the durable has not delivered, which grows also while the
		// fetcher is full and pulls nothing (Pending stays put then).
		ictx, cancel := context.WithTimeout(ctx, c.cfg.AckWait/3)
		if info, err := c.cons.Info(ictx); err == nil {
			c.count(func(st *Stats) { st.ConsumerPending = info.NumPending })
		}
		cancel()
	}
}
