// Package retry is the one way rdmawatch waits before trying again:
// exponential backoff with jitter, so that many clients of one service do
// not come back in step. Do waits for a service that is not there yet
// (NATS, ClickHouse at start), each failed attempt logged with the wait
// before the next, until the operation succeeds, fails permanently or the
// context ends; Backoff and Sleep serve the loops that must do more between
// attempts (acknowledge progress, count attempts against a limit, log in
// their own words).
package retry

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Policy bounds the waits between attempts. The zero value gives the
// defaults: 250ms doubling to 10s, each wait up to 30% shorter (jitter), no
// limit on time.
type Policy struct {
	Initial time.Duration
	Max     time.Duration
	// MaxElapsed gives up after this long; 0 never gives up (a role keeps
	// waiting for its service, as a systemd or Kubernetes restart would).
	MaxElapsed time.Duration
}

// Permanent marks an error that retrying cannot fix (a bad password, a
// malformed address, a request the server refuses): Do returns it at once,
// and a loop of its own asks IsPermanent.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return backoff.Permanent(err)
}

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent.
func IsPermanent(err error) bool {
	var p *backoff.PermanentError
	return errors.As(err, &p)
}

// Defaults of the zero Policy.
const (
	defaultInitial = 250 * time.Millisecond
	defaultMax     = 10 * time.Second
	// jitter is the fraction a wait may fall short of its step: clients
	// that failed together spread out instead of coming back in step, and
	// no wait exceeds Policy.Max.
	jitter = 0.3
)

// Backoff is the one shape of every wait: steps doubling from Policy.Initial
// to Policy.Max, each wait drawn from the last 30% below its step and never
// shorter than Initial, so both bounds hold for every wait. Do uses it; a
// retry loop of its own (one that acknowledges progress between attempts,
// counts them against a limit or logs in its own words) asks Next. It
// implements backoff.BackOff. Not safe for concurrent use.
type Backoff struct {
	step *backoff.ExponentialBackOff // without randomization: the steps
}

// NewBackoff returns a Backoff whose first wait is p.Initial.
func NewBackoff(p Policy) *Backoff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = p.Initial
	if b.InitialInterval <= 0 {
		b.InitialInterval = defaultInitial
	}
	b.MaxInterval = p.Max
	if b.MaxInterval <= 0 {
		b.MaxInterval = defaultMax
	}
	b.MaxInterval = max(b.MaxInterval, b.InitialInterval)
	b.Multiplier = 2
	b.RandomizationFactor = 0
	return &Backoff{step: b}
}

// Next returns the wait before the next attempt and doubles the step after.
func (b *Backoff) Next() time.Duration {
	step := b.step.NextBackOff()
	wait := step - time.Duration(rand.Float64()*jitter*float64(step))
	return max(wait, b.step.InitialInterval)
}

// NextBackOff is Next, for backoff.Retry.
func (b *Backoff) NextBackOff() time.Duration { return b.Next() }

// Reset starts again from the first step, after a success.
func (b *Backoff) Reset() { b.step.Reset() }

// Sleep waits d, or less if ctx ends first; it returns ctx's error then.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Do calls op until it returns nil, a Permanent error, or ctx ends, and
// returns op's value. what names the service in the log ("nats",
// "clickhouse"); every failed attempt is a WARN line with the error, the
// attempt number and the wait, and success after failures an INFO line.
func Do[T any](ctx context.Context, log *slog.Logger, what string, p Policy, op func(context.Context) (T, error)) (T, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := NewBackoff(p)
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
