package schemas

import (
	"fmt"
	"time"
)

// Plausible time: the one definition the processor and the sink both apply
// to a counter sample's data time, relative to the stream (CheckDataTime is
// the absolute range every decoder enforces).
//
// One sample dated far in the future used to move the processor's watermark
// there for good: every later sample was late, every port was forgotten,
// silent incidents resolved. And port_samples is partitioned by day, so one
// batch of 1024 ports on distinct days added about 1 200 partitions to
// ClickHouse; a few such batches made every INSERT time out. So a sample's
// data time must be plausible before a reader lets it touch any state or
// any table:
//
//   - it is at most MaxAhead (DefaultMaxAhead) ahead of the later of two
//     clocks: the data clock, the newest data time this reader has
//     accepted, and the time the broker stored the message;
//   - where a reader stores what it reads (the sink), it is at most
//     MaxBehind behind the time the broker stored the message.
//
// Why the data clock: in a replay or on a simulated fleet played faster
// than real time (`collector --source sim --speed 60`), data time has
// nothing to do with the wall clock (a trace from March replayed in
// December; a simulation two hours ahead of now), so only the data the
// stream has already shown can say what "now" is. Consecutive readings of a
// fleet are an interval apart, far inside MaxAhead, so a fleet played fast
// walks the data clock forward one reading at a time.
//
// Why the store time as well: the data clock alone cannot start (the very
// first sample has nothing to be compared with) and cannot cross a
// legitimate gap longer than MaxAhead (the whole fleet silent for an hour,
// then back: with only the data clock every later sample would be refused
// for ever). A live collector's readings are dated when it stored them, give
// or take its clock skew, so the store time admits the first sample after a
// (re)start and the first ones after a fleet-wide gap. In a replay the store
// time is later than every line of a recorded trace, so nothing there is
// refused by it either; a line dated after today (the 9999-12-31 case) is
// ahead of both clocks and refused.
//
// Why behind the store time only for the sink: the processor stores
// nothing, and a sample behind its data clock is late there (counted, seen
// by the port detectors, not by fabric decisions already taken); a port
// whose only samples are far in the past is forgotten at the next eviction.
// The sink writes every sample into a daily partition: a sample far behind
// is a partition nobody asked for. A live collector publishes what it
// reads within seconds, or, after an outage of NATS, from its spool (hours,
// bounded by the spool's size), so DefaultMaxBehind leaves days of room. A
// replay's data is as old as its trace: an in-process run over a recorded
// trace sets no bound behind (MaxBehind 0).
//
// What it does not catch: in a replay, a line dated between the trace and
// the day of the replay passes the store-time check (detecting it would need
// corroboration by other nodes); and a collector that keeps sending up to
// MaxAhead ahead can walk the data clock forward, one day partition per 144
// messages at most. Both need a credential for the counters stream, and the
// spoofed-node check limits that to one's own node.

// DefaultMaxAhead is how far ahead of the later of the data clock and the
// store time a data time may be.
const DefaultMaxAhead = 10 * time.Minute

// DefaultMaxBehind is how far behind the store time a sample the sink
// stores may be (`rdmawatch sink --max-behind`): a week of a collector's
// spool, at most 8 daily partitions, all of which a live fleet writes
// anyway.
const DefaultMaxBehind = 7 * 24 * time.Hour

// TimeBounds is the window of plausible data times for one message.
type TimeBounds struct {
	// Clock is the newest data time the reader accepted so far; Stored the
	// time the broker stored the message. Zero: not known.
	Clock, Stored Millis
	// MaxAhead bounds how far ahead of max(Clock, Stored) a data time may
	// be; MaxBehind how far behind Stored (0: no bound behind).
	MaxAhead, MaxBehind time.Duration
}

// AheadLimit is the newest plausible data time; 0 when there is no limit
// (neither clock is known).
func (b TimeBounds) AheadLimit() Millis {
	clock := max(b.Clock, b.Stored)
	if clock <= 0 {
		return 0
	}
	return clock + Millis(b.MaxAhead.Milliseconds())
}

// BehindLimit is the oldest plausible data time; 0 when there is no limit
// (no MaxBehind, or the store time is not known).
func (b TimeBounds) BehindLimit() Millis {
	if b.MaxBehind <= 0 || b.Stored <= 0 {
		return 0
	}
	return b.Stored - Millis(b.MaxBehind.Milliseconds())
}

// Check returns an error wrapping ErrImplausibleTime and naming the bound
// when t is outside the window; a data time at or before 1970 is never
// plausible.
func (b TimeBounds) Check(t Millis) error {
	if t <= 0 {
		return fmt.Errorf("%w %d ms: not after 1970", ErrImplausibleTime, int64(t))
	}
	if limit := b.AheadLimit(); limit > 0 && t > limit {
		return fmt.Errorf("%w %s: %s ahead of the data clock %s and the store time %s (at most %s)", ErrImplausibleTime,
			fmtMillis(t), time.Duration(t-max(b.Clock, b.Stored))*time.Millisecond, fmtMillis(b.Clock), fmtMillis(b.Stored), b.MaxAhead)
	}
	if limit := b.BehindLimit(); limit > 0 && t < limit {
		return fmt.Errorf("%w %s: %s behind the store time %s (at most %s)", ErrImplausibleTime,
			fmtMillis(t), time.Duration(b.Stored-t)*time.Millisecond, fmtMillis(b.Stored), b.MaxBehind)
	}
	return nil
}

// fmtMillis prints a data time for a reason; "none" for an unknown clock.
func fmtMillis(t Millis) string {
	if t <= 0 {
		return "none"
	}
	return t.String()
}
