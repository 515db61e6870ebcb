package schemas

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Dead letters. A message that a role cannot use (it does not decode, its node
// does not match its subject, its time is implausible, a row ClickHouse
// refuses) is copied, untouched, to rdmawatch.deadletter.<role>.<stream> with
// the reason in headers, and then terminated on its own stream, so one poison
// message never stops a role and never disappears without a trace.
const (
	StreamDeadLetter = "RDMAWATCH_DEADLETTER"

	deadLetterPrefix = "rdmawatch.deadletter"

	// DeadLetterAllFilter selects every dead letter.
	DeadLetterAllFilter = deadLetterPrefix + ".>"

	// Headers on a dead letter.
	HeaderDeadReason    = "Rdmawatch-Dead-Reason"     // why the role refused it, one line
	HeaderDeadRole      = "Rdmawatch-Dead-Role"       // collector, processor, sink, alert
	HeaderDeadSubject   = "Rdmawatch-Dead-Subject"    // the subject it was stored under
	HeaderDeadStream    = "Rdmawatch-Dead-Stream"     // the stream it came from
	HeaderDeadStreamSeq = "Rdmawatch-Dead-Stream-Seq" // its sequence there
	HeaderDeadDelivered = "Rdmawatch-Dead-Delivered"  // how often it had been delivered
)

// DeadLetterSubject is where role puts what it refused from stream.
func DeadLetterSubject(role, stream string) string {
	return deadLetterPrefix + "." + SubjectToken(role) + "." + SubjectToken(stream)
}

// DeadLetterMsgID makes a dead letter idempotent: a role that crashes between
// publishing it and terminating the original publishes the same id again.
func DeadLetterMsgID(role, stream string, streamSeq uint64) string {
	return fmt.Sprintf("dead/%s/%s/%d", role, stream, streamSeq)
}

// DeadLetterStream keeps refused messages for an operator to read.
func DeadLetterStream(o StreamOptions) jetstream.StreamConfig {
	o = o.withDefaults()
	return jetstream.StreamConfig{
		Name:        StreamDeadLetter,
		Description: "rdmawatch messages a role refused, with the reason in headers",
		Subjects:    []string{DeadLetterAllFilter},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      30 * 24 * time.Hour,
		// Bounded so a flood of poison cannot fill the broker's disk.
		MaxBytes:   1 << 30,
		Discard:    jetstream.DiscardOld,
		Storage:    storage(o),
		Replicas:   o.Replicas,
		Duplicates: 10 * time.Minute,
	}
}
