package collector

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Publisher sends batches to JetStream asynchronously with a bounded number
// in flight. Every message carries a Nats-Msg-Id (node/boot/seq for batches),
// so a publish retried after a lost ack is dropped by the stream's duplicate
// window instead of being counted twice.
type Publisher struct {
	js          jetstream.JetStream
	maxInFlight int
	log         *slog.Logger
	inflight    []*inflight
	published   uint64
}

type inflight struct {
	msg      *nats.Msg
	fut      jetstream.PubAckFuture
	attempts int
}

// NewPublisher returns a publisher; maxInFlight bounds unacknowledged messages.
func NewPublisher(js jetstream.JetStream, maxInFlight int, log *slog.Logger) *Publisher {
	if maxInFlight < 1 {
		maxInFlight = 256
	}
	if log == nil {
		log = slog.Default()
	}
	return &Publisher{js: js, maxInFlight: maxInFlight, log: log}
}

// Published counts messages acknowledged by the stream.
func (p *Publisher) Published() uint64 { return p.published }

// PublishBatch encodes and sends a counter batch.
func (p *Publisher) PublishBatch(ctx context.Context, b *schemas.CounterBatch) error {
	data, err := schemas.EncodeBatch(b)
	if err != nil {
		return fmt.Errorf("encode batch %s: %w", b.MsgID(), err)
	}
	return p.send(ctx, schemas.CountersSubject(b.Node), b.MsgID(), data)
}

// PublishInventory encodes and sends an inventory record.
func (p *Publisher) PublishInventory(ctx context.Context, inv *schemas.Inventory) error {
	data, err := schemas.EncodeInventory(inv)
	if err != nil {
		return fmt.Errorf("encode inventory of %s: %w", inv.Node, err)
	}
	id := fmt.Sprintf("inv/%s/%s/%d", inv.Node, inv.BootID, inv.TimeMs)
	return p.send(ctx, schemas.InventorySubject(inv.Node), id, data)
}

func (p *Publisher) send(ctx context.Context, subject, msgID string, data []byte) error {
	for len(p.inflight) >= p.maxInFlight {
		if err := p.waitOldest(ctx); err != nil {
			return err
		}
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, msgID)
	f := &inflight{msg: msg}
	if err := p.start(ctx, f); err != nil {
		return err
	}
	p.inflight = append(p.inflight, f)
	return nil
}

func (p *Publisher) start(ctx context.Context, f *inflight) error {
	backoff := 100 * time.Millisecond
	for {
		f.attempts++
		fut, err := p.js.PublishMsgAsync(f.msg)
		if err == nil {
			f.fut = fut
			return nil
		}
		p.log.Warn("publish failed, retrying", "subject", f.msg.Subject, "msg_id", f.msg.Header.Get(jetstream.MsgIDHeader), "attempt", f.attempts, "err", err)
		if err := sleepCtx(ctx, backoff); err != nil {
			return err
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// waitOldest waits for the oldest message's ack and re-sends it (same
// Nats-Msg-Id) when the stream did not take it; it gives up only when ctx ends.
func (p *Publisher) waitOldest(ctx context.Context) error {
	f := p.inflight[0]
	select {
	case <-f.fut.Ok():
		p.inflight = p.inflight[1:]
		p.published++
		return nil
	case err := <-f.fut.Err():
		p.log.Warn("publish not acknowledged, re-sending", "subject", f.msg.Subject, "msg_id", f.msg.Header.Get(jetstream.MsgIDHeader), "attempt", f.attempts, "err", err)
		if err := sleepCtx(ctx, min(time.Duration(f.attempts)*100*time.Millisecond, 5*time.Second)); err != nil {
			return err
		}
		return p.start(ctx, f)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Flush waits until every message sent so far is acknowledged.
func (p *Publisher) Flush(ctx context.Context) error {
	for len(p.inflight) > 0 {
		if err := p.waitOldest(ctx); err != nil {
			return fmt.Errorf("flush %d unacknowledged messages: %w", len(p.inflight), err)
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
