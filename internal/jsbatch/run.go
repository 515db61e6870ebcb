package jsbatch

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/retry"
)

// Run consumes until ctx ends, then writes what it holds (within
// ShutdownTimeout), acks it and returns; what it could not write is Nak'ed
// and the error says so. Init must have succeeded.
func (c *Consumer[R]) Run(ctx context.Context) error {
	if c.cons == nil {
		return fmt.Errorf("%s: consumer %s on stream %s: Run before Init", c.cfg.Role, c.cfg.Durable, c.cfg.Stream)
	}
	stopHeartbeat := c.start(context.WithoutCancel(ctx), c.heartbeat)
	defer stopHeartbeat()
	// The pull runs beside the write: while one batch is on its way the
	// next messages are fetched and decoded. One after the other, the sink
	// spent as long pulling as inserting, at 0.4 of clickhouse-client.
	c.flow.arrived, c.flow.freed = make(chan struct{}, 1), make(chan struct{}, 1)
	stopFetch := c.start(ctx, c.fetch)
	defer stopFetch()

	sched := newSchedule(c.cfg)
	timer := time.NewTimer(c.cfg.FlushInterval)
	defer timer.Stop()
	for {
		if ctx.Err() != nil {
			// What the fetcher holds is written (or Nak'ed) with the rest.
			stopFetch()
			c.take(true)
			return c.shutdown(ctx)
		}
		if c.take(false) > 0 {
			sched.arrived()
		}
		full := c.full()
		if len(c.buf) > 0 && sched.due(full, c.flow.quiet.Load()) {
			c.writeOnce(ctx, sched, full)
			continue
		}
		timer.Reset(sched.wait(len(c.buf) > 0))
		select {
		case <-c.flow.arrived:
		case <-timer.C:
		case <-ctx.Done():
		}
	}
}

// start runs f in a goroutine with a context of its own under parent, and
// returns what stops it and waits for it to return (it may be called more
// than once).
func (c *Consumer[R]) start(parent context.Context, f func(context.Context)) (stop func()) {
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

// writeOnce makes one attempt at writing the buffer and schedules the next
// after a failure.
func (c *Consumer[R]) writeOnce(ctx context.Context, sched *schedule, full bool) {
	log := c.cfg.Log
	attempt := sched.attempting(full)
	err := c.flush(ctx)
	switch {
	case err == nil:
		if attempt > 1 {
			log.Info(c.cfg.Role+": the write succeeded again", "attempts", attempt)
		}
		sched.succeeded()
	case ctx.Err() == nil:
		c.count(func(st *Stats) { st.Retries++ })
		wait := sched.failed()
		log.Warn(c.cfg.Role+": write failed, retrying", "rows", c.nrows, "messages", len(c.buf), "attempt", attempt, "retry_in", wait, "err", err)
	}
	if len(c.buf) == 0 {
		sched.emptied()
	}
}

// schedule decides when Run's goroutine writes the buffer: when it is full,
// when its first message has waited FlushInterval, or at once when a
// backlog just ended; after a failed write, not before the backoff's wait.
type schedule struct {
	interval time.Duration
	deadline time.Time // set when the buffer gets its first message
	retryAt  time.Time // after a failed write, the next one waits until then
	// byRows: the last write went because the buffer was full, as it does
	// while a backlog drains. When then a pull comes back short (quiet),
	// the backlog is done and its last rows go at once: waiting out the
	// flush interval would not make their write larger. At a steady rate
	// writes go by time, or, where they go by size, nothing is quiet for
	// quietGap: this never makes their writes smaller or more frequent.
	byRows  bool
	attempt int
	backoff *retry.Backoff
}

func newSchedule[R any](cfg Config[R]) *schedule {
	return &schedule{interval: cfg.FlushInterval, backoff: retry.NewBackoff(retry.Policy{Initial: cfg.RetryMin, Max: cfg.RetryMax})}
}

// arrived: messages joined the buffer; the first starts its clock.
func (s *schedule) arrived() {
	if s.deadline.IsZero() {
		s.deadline = time.Now().Add(s.interval)
	}
}

// due reports whether a buffer that holds messages is to be written now.
func (s *schedule) due(full, quiet bool) bool {
	now := time.Now()
	return (full || !now.Before(s.deadline) || (s.byRows && quiet)) && !now.Before(s.retryAt)
}

// attempting counts a write attempt and returns its number since the last
// success.
func (s *schedule) attempting(full bool) int {
	s.attempt++
	s.byRows = full
	return s.attempt
}

func (s *schedule) succeeded() {
	s.attempt, s.retryAt = 0, time.Time{}
	s.backoff.Reset()
}

// failed sets when the next attempt may go and returns the wait.
func (s *schedule) failed() time.Duration {
	wait := s.backoff.Next()
	s.retryAt = time.Now().Add(wait)
	return wait
}

// emptied: the buffer holds nothing; the next message starts a new clock.
func (s *schedule) emptied() { s.deadline = time.Time{} }

// wait is how long Run's goroutine may sleep when nothing arrives.
func (s *schedule) wait(buffered bool) time.Duration {
	wait := s.interval
	if buffered {
		wait = time.Until(s.deadline)
	}
	if !s.retryAt.IsZero() {
		wait = time.Until(s.retryAt)
	}
	return max(wait, 0)
}

// maxHeldRows bounds the rows the fetcher holds: one batch being written
// and the next filling. Rows, not only messages: MaxAckPending must be
// large for a fleet of small messages (2 ports each: 10 000 messages made
// flushes of 10 000 rows, and ClickHouse 18.16 spent 3.5x the CPU per row
// of 32 768-row ones, sink-row-bound), and a bound on messages alone would
// let large ones (64 ports each) hold millions of rows.
func (c *Consumer[R]) maxHeldRows() int64 {
	return 2 * int64(max(c.cfg.BatchRows, 1))
}

// full reports whether the buffer holds a batch: BatchRows rows, BatchBytes
// bytes, or half of MaxAckPending messages (the fetcher pulls the other half
// meanwhile). Only Run's goroutine calls it.
func (c *Consumer[R]) full() bool {
	return c.nrows >= c.cfg.BatchRows || (c.cfg.BatchBytes > 0 && c.nbytes >= c.cfg.BatchBytes) ||
		len(c.buf) >= max(c.cfg.MaxAckPending/2, 1)
}

// take moves the inbox into the buffer, up to one batch (full) unless all,
// and returns how many messages it moved. What stays in the inbox is the
// next batch, which the fetcher may fill while this one is written: a batch
// of the whole inbox could take all the rows the fetcher may hold
// (maxHeldRows), and no pull would overlap its write.
func (c *Consumer[R]) take(all bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, it := range c.inbox {
		if !all && len(c.buf) > 0 && c.full() {
			break
		}
		c.buf = append(c.buf, it)
		c.nrows += len(it.Rows)
		c.nbytes += it.size
		n++
	}
	rest := copy(c.inbox, c.inbox[n:])
	clear(c.inbox[rest:]) // no pointers kept past the end
	c.inbox = c.inbox[:rest]
	return n
}

// flush makes one attempt at writing the buffer: the writer stores what it
// can, what it rejects is dead-lettered, and both leave the buffer (the
// written ones acked). It returns the error that kept the others (nil when
// none is left).
func (c *Consumer[R]) flush(ctx context.Context) error {
	err := c.cfg.Writer.Write(ctx, c.buf)
	for _, it := range c.buf {
		if it.rejected && !it.dead {
			c.deadLetter(ctx, it.msg, it.reason)
			it.dead = true
		}
	}
	c.settle()
	if len(c.buf) == 0 {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("the writer left %d messages for %s neither written nor rejected", len(c.buf), c.cfg.Name)
	}
	return err
}

// settle acks the items written and drops them, and the dead ones, from the
// buffer.
func (c *Consumer[R]) settle() {
	var acked uint64
	for _, it := range c.buf {
		if it.written {
			// A lost ack means one redelivery, which the writer's check
			// of suspect items absorbs.
			if err := it.msg.Ack(); err != nil {
				c.cfg.Log.Warn(c.cfg.Role+": ack", "err", err)
			}
			acked++
		}
	}
	// The buffer is compacted in place under the lock: the heartbeat reads
	// it.
	c.mu.Lock()
	kept := c.buf[:0]
	nrows, nbytes := 0, 0
	for _, it := range c.buf {
		if !it.written && !it.dead {
			kept = append(kept, it)
			nrows += len(it.Rows)
			nbytes += it.size
		}
	}
	left, leftRows := len(c.buf)-len(kept), c.nrows-nrows
	clear(c.buf[len(kept):])
	c.buf, c.nrows, c.nbytes = kept, nrows, nbytes
	c.stats.Acked += acked
	c.stats.Pending, c.stats.PendingRows = len(c.buf)+len(c.inbox), c.nrows
	for _, it := range c.inbox {
		c.stats.PendingRows += len(it.Rows)
	}
	c.mu.Unlock()
	c.release(left, leftRows)
}

// release says that n held messages with rows rows left (acked,
// dead-lettered, Nak'ed).
func (c *Consumer[R]) release(n, rows int) {
	if n == 0 {
		return
	}
	c.flow.held.Add(int64(-n))
	c.flow.heldRows.Add(int64(-rows))
	select {
	case c.flow.freed <- struct{}{}:
	default:
	}
}

// shutdown writes what the buffer holds with a fresh deadline (ctx has
// ended), retrying with backoff. What cannot be written is Nak'ed so another
// consumer gets it at once instead of after AckWait.
func (c *Consumer[R]) shutdown(ctx context.Context) error {
	if len(c.buf) == 0 {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ShutdownTimeout)
	defer cancel()
	b := retry.NewBackoff(retry.Policy{Initial: c.cfg.RetryMin, Max: c.cfg.RetryMax})
	var err error
	for {
		if err = c.flush(sctx); err == nil {
			return nil
		}
		if sctx.Err() != nil {
			break
		}
		_ = retry.Sleep(sctx, b.Next())
	}
	c.mu.Lock()
	for _, it := range c.buf {
		_ = it.msg.Nak()
	}
	n, rows := len(c.buf), c.nrows
	c.mu.Unlock()
	c.release(n, rows)
	c.cfg.Log.Error(c.cfg.Role+": last write failed, messages left for redelivery", "messages", n, "err", err)
	return fmt.Errorf("%s: %d messages for %s not written: %w", c.cfg.Role, n, c.cfg.Name, err)
}
