package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// maxBatchPorts bounds the ports of one counters message, and of one node's
// reading; maxMessageBytes the encoded size of one message, below the
// broker's max_payload when that is smaller. The decoders enforce the same
// limits: one owner, schemas.
const (
	maxBatchPorts   = schemas.MaxBatchPorts
	maxMessageBytes = schemas.MaxMessageBytes
)

// msgHeaderReserve is room left in max_payload for the headers (Nats-Msg-Id).
const msgHeaderReserve = 512

// ErrMessageTooLarge is returned for a message that does not fit one NATS
// message even alone (a single port's sample larger than the limit).
var ErrMessageTooLarge = errors.New("message larger than the limit")

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// MaxInFlight bounds unacknowledged messages (the JetStream client's
	// own WithPublishAsyncMaxPending); 0 means 256.
	MaxInFlight int
	Log         *slog.Logger
	// AckWarnAfter is how long the oldest publish may wait for its ack
	// before the broker counts as unavailable and a WARN says how much is
	// waiting; 0 means 5 s.
	AckWarnAfter time.Duration
	// SpoolDir, when set, keeps what could not be sent: on Flush or Close
	// whose context ends before every ack, the unacknowledged messages are
	// written there (fsynced), and ResendSpool sends them at the next start.
	SpoolDir string
	// SpoolMaxBytes bounds the spool; the oldest messages are dropped (and
	// counted) to make room. 0 means 256 MiB.
	SpoolMaxBytes int64
}

// Publisher sends messages to JetStream asynchronously with a bounded
// number in flight. Every message carries a Nats-Msg-Id (node/boot/seq for
// batches), so a publish retried after a lost ack is dropped by the
// stream's duplicate window instead of being counted twice.
//
// When acks stop (the broker is away) it logs a WARN naming how many
// batches and samples wait, and an INFO with the outage's length when they
// flow again. What it could not send before it stops goes to the spool when
// there is one; what it must drop is counted (Dropped) and logged with its
// samples.
type Publisher struct {
	js           jetstream.JetStream
	maxInFlight  int
	ackWarnAfter time.Duration
	log          *slog.Logger
	spool        *spool // nil without SpoolDir
	inflight     []*inflight
	published    uint64
	dropped      DropCount
	// outageSince is when the oldest unacknowledged publish was sent, once
	// a WARN said the broker is not acknowledging; zero otherwise.
	outageSince time.Time
	// lastBackoff is when the last wait before a re-send ended.
	lastBackoff time.Time
	// lastAck is when the last ack arrived: a publish that waited through
	// an outage which has just ended does not start another.
	lastAck time.Time
	now     func() time.Time
	// busy is moveOn's scratch set of subjects with an unacknowledged
	// message earlier in the list.
	busy map[string]bool
	// storeErr is the stream's store error the last failed publish named
	// (storeError), nil after an ack: StoreError reads it from another
	// goroutine.
	storeErr atomic.Pointer[error]
}

// DropCount counts messages the publisher gave up, with the port samples
// they carried.
type DropCount struct {
	Messages uint64
	Samples  uint64
}

type inflight struct {
	msg      *nats.Msg
	fut      jetstream.PubAckFuture // nil: not handed to the client yet
	attempts int
	samples  int
	sent     time.Time
	spooled  string // the spool file it came from, removed once acknowledged
	// acked and failed record what the future said: its channels deliver
	// their value once, and a message is looked at more than once.
	acked  bool
	failed error
}

// ackedNow polls f and reports whether it is acknowledged.
func (f *inflight) ackedNow() bool {
	f.poll()
	return f.acked
}

// poll records the future's outcome without waiting.
func (f *inflight) poll() {
	if f.fut == nil || f.acked || f.failed != nil {
		return
	}
	select {
	case <-f.fut.Ok():
		f.acked = true
	case err := <-f.fut.Err():
		f.failed = err
	default:
	}
}

// storeErrorCodes are the JetStream API error codes of a publish that
// reached the stream and that its store refused (nats-server's
// errors.json): the stream or the server is out of room, which no re-send
// cures until someone frees it. The error's description says which.
var storeErrorCodes = map[jetstream.ErrorCode]bool{
	10023: true, // JSInsufficientResourcesErr "insufficient resources": the server's JetStream limits
	10047: true, // JSStorageResourcesExceededErr "insufficient storage resources available"
	10028: true, // JSMemoryResourcesExceededErr "insufficient memory resources available"
	10077: true, // JSStreamStoreFailedF: the store's error, e.g. "maximum bytes exceeded" (discard new)
}

// storeError returns err when it is the stream's store refusing a publish
// (storeErrorCodes), else nil.
func storeError(err error) error {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		if storeErrorCodes[api.ErrorCode] {
			return err
		}
	}
	return nil
}

// noteFailure records a failed publish's store error, and says once, when
// one starts, which: "NATS does not acknowledge" alone hid a full disk.
func (p *Publisher) noteFailure(f *inflight) {
	serr := storeError(f.failed)
	if serr == nil {
		return
	}
	if old := p.storeErr.Swap(&serr); old == nil {
		p.log.Error("JetStream refuses publishes: the stream cannot store them; the collector keeps what it read and retries", "subject", f.msg.Subject, "store_error", serr.Error())
	}
}

// StoreError is non-nil while the stream's store refuses this publisher's
// messages (the last failed publish named a store error, and no publish
// was acknowledged since): a collector's readiness.
func (p *Publisher) StoreError() error {
	if e := p.storeErr.Load(); e != nil {
		return fmt.Errorf("JetStream does not store publishes: %w", *e)
	}
	return nil
}

// resendWait is how long a message whose publish failed waits before its
// next attempt.
func resendWait(attempts int) time.Duration {
	return min(time.Duration(attempts)*100*time.Millisecond, 5*time.Second)
}

// asyncAckTimeout bounds the wait for one publish's ack: longer than a
// cluster's leader election, after which the publish is sent again.
const asyncAckTimeout = 10 * time.Second

// NewPublisher returns a publisher without a spool; maxInFlight bounds
// unacknowledged messages.
func NewPublisher(js jetstream.JetStream, maxInFlight int, log *slog.Logger) *Publisher {
	p, err := NewPublisherConfig(js, PublisherConfig{MaxInFlight: maxInFlight, Log: log})
	if err != nil {
		// Only the spool or the client's options can fail, and neither is
		// set here beyond a valid bound.
		panic(err)
	}
	return p
}

// NewPublisherConfig returns a publisher. It creates the spool directory
// when one is configured.
func NewPublisherConfig(js jetstream.JetStream, cfg PublisherConfig) (*Publisher, error) {
	if cfg.MaxInFlight < 1 {
		cfg.MaxInFlight = 256
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.AckWarnAfter <= 0 {
		cfg.AckWarnAfter = 5 * time.Second
	}
	p := &Publisher{js: js, maxInFlight: cfg.MaxInFlight, ackWarnAfter: cfg.AckWarnAfter, log: cfg.Log, now: time.Now}
	if nc := js.Conn(); nc != nil {
		// The client's own bound on outstanding async publishes; a JetStream
		// context of our own so the caller's keeps its options.
		// An ack lost with a dying NATS node must fail its future (then
		// waitOldest re-sends it under the same Nats-Msg-Id), not leave it
		// waiting for ever: the client's default is no timeout.
		own, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(cfg.MaxInFlight), jetstream.WithPublishAsyncTimeout(asyncAckTimeout))
		if err != nil {
			return nil, fmt.Errorf("publisher: %w", err)
		}
		p.js = own
	}
	if cfg.SpoolDir != "" {
		sp, err := openSpool(cfg.SpoolDir, cfg.SpoolMaxBytes)
		if err != nil {
			return nil, err
		}
		p.spool = sp
	}
	return p, nil
}

// Published counts messages acknowledged by the stream.
func (p *Publisher) Published() uint64 { return p.published }

// Dropped counts messages given up (spool full, no spool at shutdown, too
// large), with their samples.
func (p *Publisher) Dropped() DropCount { return p.dropped }

// messageLimit is the most data bytes one message may carry now: the
// smaller of maxMessageBytes and the connected server's max_payload, less
// room for the headers.
func (p *Publisher) messageLimit() int {
	limit := maxMessageBytes
	if nc := p.js.Conn(); nc != nil {
		if mp := int(nc.MaxPayload()); mp > 0 && mp < limit {
			limit = mp
		}
	}
	return limit - msgHeaderReserve
}

// encodeBatch encodes b and says whether it fits one message.
func (p *Publisher) encodeBatch(b *schemas.CounterBatch) ([]byte, bool, error) {
	data, err := schemas.EncodeBatch(b)
	if err != nil {
		return nil, false, fmt.Errorf("encode batch %s: %w", b.MsgID(), err)
	}
	return data, len(b.Ports) <= maxBatchPorts && len(data) <= p.messageLimit(), nil
}

// PublishBatch encodes and sends a counter batch. A batch with more than
// maxBatchPorts ports or larger than one message is refused with
// ErrMessageTooLarge: the collector splits it first (Engine.Split).
func (p *Publisher) PublishBatch(ctx context.Context, b *schemas.CounterBatch) error {
	data, fits, err := p.encodeBatch(b)
	if err != nil {
		return err
	}
	if !fits {
		return fmt.Errorf("batch %s: %d ports, %d bytes (limits %d ports, %d bytes): %w", b.MsgID(), len(b.Ports), len(data), maxBatchPorts, p.messageLimit(), ErrMessageTooLarge)
	}
	return p.send(ctx, schemas.CountersSubject(b.Node), b.MsgID(), data, len(b.Ports))
}

// PublishInventory encodes and sends an inventory record. One too large
// for a message goes out in parts by port (ids .../1, .../2, ...); the
// sink stores inventory rows per port, so parts add up to the whole.
func (p *Publisher) PublishInventory(ctx context.Context, inv *schemas.Inventory) error {
	id := fmt.Sprintf("inv/%s/%s/%d", inv.Node, inv.BootID, inv.TimeMs)
	parts, err := p.inventoryParts(inv)
	if err != nil {
		return err
	}
	for i, data := range parts {
		partID := id
		if len(parts) > 1 {
			partID = fmt.Sprintf("%s/%d", id, i+1)
		}
		if err := p.send(ctx, schemas.InventorySubject(inv.Node), partID, data, 0); err != nil {
			return err
		}
	}
	return nil
}

// inventoryParts encodes inv, halving its ports until each part fits.
func (p *Publisher) inventoryParts(inv *schemas.Inventory) ([][]byte, error) {
	data, err := schemas.EncodeInventory(inv)
	if err != nil {
		return nil, fmt.Errorf("encode inventory of %s: %w", inv.Node, err)
	}
	if len(data) <= p.messageLimit() && len(inv.Ports) <= maxBatchPorts {
		return [][]byte{data}, nil
	}
	if len(inv.Ports) <= 1 {
		return nil, fmt.Errorf("inventory of %s: %d bytes (limit %d): %w", inv.Node, len(data), p.messageLimit(), ErrMessageTooLarge)
	}
	half := len(inv.Ports) / 2
	a, b := *inv, *inv
	a.Ports, b.Ports = inv.Ports[:half], inv.Ports[half:]
	pa, err := p.inventoryParts(&a)
	if err != nil {
		return nil, err
	}
	pb, err := p.inventoryParts(&b)
	if err != nil {
		return nil, err
	}
	return append(pa, pb...), nil
}

func (p *Publisher) send(ctx context.Context, subject, msgID string, data []byte, samples int) error {
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, msgID)
	return p.sendMsg(ctx, &inflight{msg: msg, samples: samples})
}

// sendMsg hands f to the client, or queues it behind an unacknowledged
// earlier message on its subject. A node's batches share a subject and a
// port's samples must reach the stream in order: every reader drops a
// sample older than its port's last one, and its deltas with it. Sending a
// node's next batch while the last one is unacknowledged let the stream
// store them out of order whenever its leader died under the first (the
// first failed, the second went to the new leader, the first was re-sent
// after it). Queued messages are started by reap, at the next send, or by
// Flush; reading goes on meanwhile.
func (p *Publisher) sendMsg(ctx context.Context, f *inflight) error {
	p.reap()
	// The client bounds what is outstanding (it stalls, then refuses);
	// this list only has to hold what the client holds, plus the acked
	// messages behind an older unacked one and the queued ones.
	for len(p.inflight) >= 2*p.maxInFlight {
		if err := p.waitOldest(ctx); err != nil {
			// Kept unstarted, so Flush can still spool or count it.
			p.inflight = append(p.inflight, f)
			return err
		}
	}
	if p.mustQueue(f.msg.Subject) {
		f.sent = p.now()
		p.inflight = append(p.inflight, f)
		return nil
	}
	err := p.start(ctx, f)
	if err != nil {
		f.fut = nil
	}
	p.inflight = append(p.inflight, f)
	return err
}

// mustQueue reports whether a message on subject must wait: one on its
// subject waits for its ack, or an earlier one is queued. Messages are
// handed to the client in the order they were sent, so the stream keeps
// the order across nodes too (a replay's events depend on it).
func (p *Publisher) mustQueue(subject string) bool {
	for _, f := range p.inflight {
		if f.fut == nil {
			return true
		}
		if f.msg.Subject != subject {
			continue
		}
		if f.poll(); !f.acked {
			return true
		}
	}
	return false
}

// start hands f to the client. While the client's in-flight bound is full
// it waits for the oldest ack instead.
func (p *Publisher) start(ctx context.Context, f *inflight) error {
	var backoff *retry.Backoff // made at the first failure: most publishes go at once
	for {
		err := p.tryStart(f)
		if err == nil {
			return nil
		}
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) && len(p.inflight) > 0 && p.inflight[0] != f {
			if err := p.waitOldest(ctx); err != nil {
				return err
			}
			continue
		}
		p.log.Warn("publish failed, retrying", "subject", f.msg.Subject, "msg_id", f.msg.Header.Get(jetstream.MsgIDHeader), "attempt", f.attempts, "err", err)
		if backoff == nil {
			backoff = retry.NewBackoff(retry.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second})
		}
		if err := retry.Sleep(ctx, backoff.Next()); err != nil {
			return err
		}
	}
}

// tryStart makes one attempt to hand f to the client, without waiting.
func (p *Publisher) tryStart(f *inflight) error {
	f.attempts++
	f.sent = p.now()
	fut, err := p.js.PublishMsgAsync(f.msg)
	if err != nil {
		return err
	}
	f.fut, f.acked, f.failed = fut, false, nil
	return nil
}

// reap takes the acknowledged messages off the front of the list and moves
// the rest on, without waiting: a queued message whose subject has nothing
// unacknowledged before it is started, and a failed one is sent again once
// its wait is over (not only when it reaches the front: a failed batch
// would hold its node's later batches back for as long). It says when the
// oldest has waited too long.
func (p *Publisher) reap() {
	for len(p.inflight) > 0 && p.inflight[0].ackedNow() {
		p.acked(p.inflight[0])
	}
	if len(p.inflight) == 0 {
		return
	}
	if f := p.inflight[0]; f.failed != nil {
		p.noteFailure(f)
	}
	if len(p.inflight) > 1 {
		p.moveOn()
	}
	p.checkOutage(p.inflight[0])
}

// moveOn starts what may go now, in list order: queued messages up to the
// first that must still wait, and failed ones whose wait is over.
func (p *Publisher) moveOn() {
	if p.busy == nil {
		p.busy = make(map[string]bool)
	}
	clear(p.busy)
	now := p.now()
	blocked := false // a queued message before this one still waits
	for _, f := range p.inflight {
		subject := f.msg.Subject
		switch f.poll(); {
		case f.acked:
			continue
		case f.fut == nil:
			if blocked || p.busy[subject] || p.tryStart(f) != nil {
				f.fut = nil // retried at the next send, or by Flush
				blocked = true
			}
		case f.failed != nil && now.Sub(f.sent) >= resendWait(f.attempts):
			p.noteFailure(f)
			if p.tryStart(f) != nil {
				f.fut = nil
			}
		}
		p.busy[subject] = true
	}
}

func (p *Publisher) acked(f *inflight) {
	p.inflight = p.inflight[1:]
	p.published++
	p.lastAck = p.now()
	if p.storeErr.Swap(nil) != nil {
		p.log.Info("JetStream stores publishes again")
	}
	if f.spooled != "" {
		p.spool.remove(f.spooled)
	}
	if !p.outageSince.IsZero() {
		batches, samples := p.waiting()
		p.log.Info("NATS acknowledges publishes again", "outage", p.now().Sub(p.outageSince).Round(time.Millisecond), "waiting_batches", batches, "waiting_samples", samples)
		p.outageSince = time.Time{}
	}
}

// checkOutage logs the WARN once when the oldest publish has waited longer
// than ackWarnAfter.
func (p *Publisher) checkOutage(oldest *inflight) {
	since := p.waitingSince(oldest)
	if !p.outageSince.IsZero() || p.now().Sub(since) < p.ackWarnAfter {
		return
	}
	p.outageSince = since
	batches, samples := p.waiting()
	args := []any{"since", since.UTC().Format(time.RFC3339Nano), "waiting_batches", batches, "waiting_samples", samples, "spool", p.spool != nil}
	if e := p.storeErr.Load(); e != nil {
		args = append(args, "store_error", (*e).Error())
	}
	p.log.Warn("NATS does not acknowledge publishes; the collector waits and keeps what it read", args...)
}

// waitingSince is since when the oldest publish has gone unanswered: its
// send, or the last ack if that came later.
func (p *Publisher) waitingSince(oldest *inflight) time.Time {
	if p.lastAck.After(oldest.sent) {
		return p.lastAck
	}
	return oldest.sent
}

// waiting counts the unacknowledged messages and their samples.
func (p *Publisher) waiting() (messages, samples int) {
	for _, f := range p.inflight {
		samples += f.samples
	}
	return len(p.inflight), samples
}

// waitOldest waits for the oldest message's ack and re-sends it (same
// Nats-Msg-Id) when the stream did not take it; it gives up only when ctx
// ends. While it waits longer than ackWarnAfter, the outage is logged.
func (p *Publisher) waitOldest(ctx context.Context) error {
	f := p.inflight[0]
	if f.fut == nil {
		// Never handed to the client (its context ended first).
		return p.start(ctx, f)
	}
	warn := time.NewTimer(max(p.ackWarnAfter-p.now().Sub(p.waitingSince(f)), 0))
	defer warn.Stop()
	for {
		if f.poll(); f.acked {
			p.acked(f)
			return nil
		}
		if f.failed == nil {
			select {
			case <-f.fut.Ok():
				f.acked = true
			case err := <-f.fut.Err():
				f.failed = err
			case <-warn.C:
				p.checkOutage(f)
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		p.noteFailure(f)
		p.log.Debug("publish not acknowledged, re-sending", "subject", f.msg.Subject, "msg_id", f.msg.Header.Get(jetstream.MsgIDHeader), "attempt", f.attempts, "err", f.failed)
		// One wait per burst: when the stream's leader dies, every publish
		// in flight fails at once, and waiting before each re-send stalled
		// the collector for half a minute.
		wait := resendWait(f.attempts)
		if now := p.now(); now.Sub(p.lastBackoff) > wait {
			if err := retry.Sleep(ctx, wait); err != nil {
				return err
			}
			p.lastBackoff = p.now()
		}
		sent := f.sent
		if err := p.start(ctx, f); err != nil {
			return err
		}
		// The outage is measured from the first attempt.
		f.sent = sent
		return nil
	}
}

// Flush waits until every message sent so far is acknowledged. When ctx
// ends first, the unacknowledged messages go to the spool if there is one
// (Flush then returns nil: nothing is lost), else they are counted as
// dropped and logged, and Flush returns the error.
func (p *Publisher) Flush(ctx context.Context) error {
	for len(p.inflight) > 0 {
		if err := p.waitOldest(ctx); err != nil {
			return p.keepUnsent(err)
		}
	}
	return nil
}

// keepUnsent spools (or drops and counts) what is still in flight after
// err stopped the wait for it.
func (p *Publisher) keepUnsent(cause error) error {
	batches, samples := p.waiting()
	if p.spool == nil {
		p.dropped.Messages += uint64(batches)
		p.dropped.Samples += uint64(samples)
		p.log.Error("collector stopping with unacknowledged messages and no spool: they are lost", "messages", batches, "samples", samples, "err", cause)
		p.inflight = nil
		return fmt.Errorf("flush %d unacknowledged messages (%d samples): %w", batches, samples, cause)
	}
	var failed error
	for _, f := range p.inflight {
		if f.spooled != "" {
			continue // still in the spool from the last run
		}
		if err := p.spool.write(f.msg, f.samples); err != nil {
			p.dropped.Messages++
			p.dropped.Samples += uint64(f.samples)
			failed = errors.Join(failed, err)
		}
	}
	if d := p.spool.takeDropped(); d.Messages > 0 {
		p.dropped.Messages += d.Messages
		p.dropped.Samples += d.Samples
		p.log.Error("spool full: oldest messages dropped", "dir", p.spool.dir, "messages", d.Messages, "samples", d.Samples, "max_bytes", p.spool.maxBytes)
	}
	p.inflight = nil
	if failed != nil {
		p.log.Error("spooling unacknowledged messages failed: they are lost", "dir", p.spool.dir, "err", failed)
		return fmt.Errorf("spool %d unacknowledged messages: %w", batches, failed)
	}
	p.log.Warn("collector stopping before NATS acknowledged everything: unacknowledged messages spooled, sent at the next start", "dir", p.spool.dir, "messages", batches, "samples", samples)
	return nil
}

// ResendSpool sends what an earlier run spooled, oldest first, before
// anything new; each file is removed once its message is acknowledged.
// Call it once after NewPublisherConfig; without a spool it does nothing.
func (p *Publisher) ResendSpool(ctx context.Context) error {
	if p.spool == nil {
		return nil
	}
	entries, err := p.spool.list()
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	var samples int
	for _, e := range entries {
		msg, n, err := p.spool.read(e.name)
		if err != nil {
			// A torn or foreign file: keep it for a human, say so.
			p.log.Error("spool file unreadable, left in place", "file", e.name, "err", err)
			continue
		}
		samples += n
		if err := p.sendMsg(ctx, &inflight{msg: msg, samples: n, spooled: e.name}); err != nil {
			return err
		}
	}
	p.log.Info("resending spooled messages", "dir", p.spool.dir, "messages", len(entries), "samples", samples)
	return nil
}
