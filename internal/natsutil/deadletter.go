package natsutil

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// DeadLetter copies msg, untouched, to the dead-letter subject of role with
// reason in its headers, then terminates msg so it is never redelivered. The
// copy is published first: a crash between the two redelivers msg, and the
// copy's Nats-Msg-Id (stream and sequence) makes the second copy a duplicate.
func DeadLetter(ctx context.Context, js jetstream.JetStream, role string, msg jetstream.Msg, reason string) error {
	md, err := msg.Metadata()
	if err != nil {
		return fmt.Errorf("dead letter: metadata: %w", err)
	}
	// A header value is one line.
	reason = strings.ReplaceAll(strings.ReplaceAll(reason, "\r", " "), "\n", " ")
	dl := nats.NewMsg(schemas.DeadLetterSubject(role, md.Stream))
	dl.Data = msg.Data()
	dl.Header.Set(schemas.HeaderDeadReason, reason)
	dl.Header.Set(schemas.HeaderDeadRole, role)
	dl.Header.Set(schemas.HeaderDeadSubject, msg.Subject())
	dl.Header.Set(schemas.HeaderDeadStream, md.Stream)
	dl.Header.Set(schemas.HeaderDeadStreamSeq, strconv.FormatUint(md.Sequence.Stream, 10))
	dl.Header.Set(schemas.HeaderDeadDelivered, strconv.FormatUint(md.NumDelivered, 10))
	dl.Header.Set(nats.MsgIdHdr, schemas.DeadLetterMsgID(role, md.Stream, md.Sequence.Stream))
	if _, err := js.PublishMsg(ctx, dl); err != nil {
		return fmt.Errorf("dead letter %s seq %d: %w", md.Stream, md.Sequence.Stream, err)
	}
	if err := msg.Term(); err != nil {
		return fmt.Errorf("dead letter %s seq %d: term: %w", md.Stream, md.Sequence.Stream, err)
	}
	return nil
}
