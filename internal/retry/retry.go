// Package retry is the one way rdmawatch waits for a service that is not
// there yet (NATS, ClickHouse at start): exponential backoff with jitter,
// each failed attempt logged with the wait before the next, until the
// operation succeeds, fails permanently or the context ends.
package retry

import (
	"context"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Policy bounds the waits between attempts. The zero value gives the
// defaults: 250ms doubling to 10s, ±30% jitter, no limit on time.
type Policy struct {
	Initial time.Duration
	Max     time.Duration
	// MaxElapsed gives up after this long; 0 never gives up (a role keeps
	// waiting for its service, as a systemd or Kubernetes restart would).
	MaxElapsed time.Duration
}

// Permanent marks an error that retrying cannot fix (a bad password, a
// malformed address): Do returns it at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return backoff.Permanent(err)
}

// Do calls op until it returns nil, a Permanent error, or ctx ends, and
// returns op's value. what names the service in the log ("nats",
// "clickhouse"); every failed attempt is a WARN line with the error, the
// attempt number and the wait, and success after failures an INFO line.
func Do[T any](ctx context.Context, log *slog.Logger, what string, p Policy, op func(context.Context) (T, error)) (T, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = p.Initial
	if b.InitialInterval <= 0 {
		b.InitialInterval = 250 * time.Millisecond
	}
	b.MaxInterval = p.Max
	if b.MaxInterval <= 0 {
		b.MaxInterval = 10 * time.Second
	}
	b.Multiplier = 2
	b.RandomizationFactor = 0.3
	start := time.Now()
	attempts := 0
	v, err := backoff.Retry(ctx, func() (T, error) {
		attempts++
		return op(ctx)
	},
		backoff.WithBackOff(b),
		backoff.WithMaxElapsedTime(p.MaxElapsed),
		backoff.WithNotify(func(err error, next time.Duration) {
			log.Warn(what+" not reachable yet, retrying", "attempt", attempts, "retry_in", next.Round(time.Millisecond), "err", err)
		}),
	)
	if err == nil && attempts > 1 {
		log.Info(what+" reachable", "attempts", attempts, "waited", time.Since(start).Round(time.Millisecond))
	}
	return v, err
}
