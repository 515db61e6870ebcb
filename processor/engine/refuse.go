package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Reasons a message or a sample is refused; they start the dead letter's
// reason header and name the Stats fields.
const (
	ReasonDecode          = "decode error"
	ReasonSpoofedNode     = "spoofed node"
	ReasonImplausibleTime = "implausible time"
	ReasonPanic           = "panic"
)

// deadLetterRole is the role in the dead-letter subject.
const deadLetterRole = "processor"

// partitionOf returns the partition token of a stored counters subject
// (rdmawatch.counters.<partition>.<node>), -1 when there is none.
func partitionOf(subject string) int {
	const prefix = "rdmawatch.counters."
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return -1
	}
	tok, _, ok := strings.Cut(rest, ".")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(tok)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// deadLetter copies msg with reason to the processor's dead-letter subject,
// unless a previous run already did (seq in p.deadKnown: the dead letter's
// Nats-Msg-Id covers only the stream's duplicate window, a warm-up re-reads
// hours). The processor reads with an ordered consumer (no acks), so the
// Term in natsutil.DeadLetter is a no-op there; what counts is the copy,
// which is retried until it is stored or ctx ends: a refused message is
// never dropped without a trace.
func (p *Processor) deadLetter(ctx context.Context, msg jetstream.Msg, seq uint64, reason string) error {
	if _, known := p.deadKnown[seq]; known && seq != 0 {
		p.st.deadKnown.Add(1)
		return nil
	}
	if err := p.copyDeadLetter(ctx, msg, seq, reason); err != nil {
		return err
	}
	p.st.deadLetters.Add(1)
	return nil
}

// copyDeadLetter copies msg to the dead-letter stream, retrying until the
// copy is stored or ctx ends.
func (p *Processor) copyDeadLetter(ctx context.Context, msg jetstream.Msg, seq uint64, reason string) error {
	backoff := retry.NewBackoff(retry.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second})
	for {
		err := natsutil.DeadLetter(ctx, p.js, deadLetterRole, msg, reason)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, merr := msg.Metadata(); merr != nil {
			// Not a JetStream message: nothing to copy it with.
			p.log.Error("cannot dead-letter a message without metadata", "subject", msg.Subject(), "reason", reason, "err", err)
			return nil
		}
		wait := backoff.Next()
		p.log.Warn("dead letter; retrying", "stream_seq", seq, "reason", reason, "err", err, "backoff", wait)
		if err := retry.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// loadDeadLetters returns the sequences of stream (counters, inventory)
// this role has already dead-lettered since from (zero: ever). Only
// headers are read.
func loadDeadLetters(ctx context.Context, js jetstream.JetStream, stream string, from time.Time) (map[uint64]struct{}, error) {
	known := map[uint64]struct{}{}
	err := readStream(ctx, js, schemas.StreamDeadLetter, schemas.DeadLetterSubject(deadLetterRole, stream), from, true, func(m jetstream.Msg) {
		h := m.Headers()
		if h.Get(schemas.HeaderDeadStream) != stream {
			return
		}
		if seq, err := strconv.ParseUint(h.Get(schemas.HeaderDeadStreamSeq), 10, 64); err == nil {
			known[seq] = struct{}{}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	return known, nil
}

// readStream calls fn with every message of stream on filter stored since
// from (zero: all), only its headers when headersOnly, and returns once it
// has seen the last one that was there when it started.
func readStream(ctx context.Context, js jetstream.JetStream, stream, filter string, from time.Time, headersOnly bool, fn func(jetstream.Msg)) error {
	occ := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		HeadersOnly:    headersOnly,
	}
	if !from.IsZero() {
		occ.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		occ.OptStartTime = &from
	}
	rctx, cancel := requestContext(ctx)
	defer cancel()
	str, err := js.Stream(rctx, stream)
	if err != nil {
		return fmt.Errorf("stream %s (created by the admin step, rdmawatch streams apply): %w", stream, err)
	}
	// Stop at what was there at the start: on a busy stream the pending
	// count of a message need never reach 0.
	last := str.CachedInfo().State.LastSeq
	cons, err := js.OrderedConsumer(rctx, stream, occ)
	if err != nil {
		return err
	}
	info, err := cons.Info(rctx)
	if err != nil {
		return err
	}
	if info.NumPending == 0 || last == 0 {
		return nil
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return err
		}
		fn(m)
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		if md.NumPending == 0 || md.Sequence.Stream >= last {
			return nil
		}
	}
}
