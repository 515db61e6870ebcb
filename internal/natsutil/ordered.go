package natsutil

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultResetAttempts bounds how often an ordered consumer of
// BoundedResets tries to re-create itself after it lost its server-side
// consumer (a node died, heartbeats stopped) before Next returns the error.
const DefaultResetAttempts = 3

// BoundedResets returns js whose ordered consumers give up re-creating
// themselves after attempts failed tries (DefaultResetAttempts when
// attempts <= 0; a config that sets MaxResetAttempts keeps it).
//
// Why: nats.go's ordered consumer re-creates its consumer inside Next,
// retrying for ever by default, and that loop watches neither Next's
// context nor anything but Stop, which the caller cannot reach while it
// waits in Next. On a NATS cluster where consumer creation keeps failing
// after a node's death (seen for more than a minute on the 3-node test
// cluster), a processor being stopped for a rebalance then hangs in Next,
// and whoever waits for it hangs too. Bounded, Next returns the last
// creation error after at most attempts times the 10 s request timeout
// plus the backoff between them (1 s, 2 s, ...), the iterator is closed,
// and the caller starts over with a fresh consumer.
func BoundedResets(js jetstream.JetStream, attempts int) jetstream.JetStream {
	if attempts <= 0 {
		attempts = DefaultResetAttempts
	}
	return boundedResets{JetStream: js, attempts: attempts}
}

type boundedResets struct {
	jetstream.JetStream
	attempts int
}

// OrderedConsumer implements jetstream.JetStream.
func (b boundedResets) OrderedConsumer(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	if cfg.MaxResetAttempts == 0 {
		cfg.MaxResetAttempts = b.attempts
	}
	return b.JetStream.OrderedConsumer(ctx, stream, cfg)
}
