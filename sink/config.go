package sink

import (
	"errors"
	"fmt"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/rdmawatch/rdmawatch/internal/jsbatch"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("invalid sink config")

// The defaults of the fields the command line sets too (one owner).
const (
	DefaultBatchRows     = 65536
	DefaultMaxAckPending = 65536
	DefaultFlushInterval = time.Second
	// Rollups (sink/rollup.go): how often the sink rolls, how far data
	// time must be past a minute's end first, and how far back a start
	// rolls again.
	DefaultRollupEvery    = 10 * time.Second
	DefaultRollupDelay    = time.Minute
	DefaultRollupLookback = 15 * time.Minute
	// DefaultProbeEvery: how often the sink asks ClickHouse whether it can
	// write (Config.ProbeEvery).
	DefaultProbeEvery = 5 * time.Second
)

// Config sizes the sink. The zero value of a field means its default.
type Config struct {
	// DSN is the ClickHouse the caller opens the connection to, e.g.
	// clickhouse://127.0.0.1:19000/default; New does not dial it (it gets
	// the connection), Validate checks that it parses when it is set.
	DSN string
	// BatchRows flushes a table's buffer once it holds this many rows
	// (default 65536: ClickHouse takes fewer, larger INSERTs at a far
	// lower cost per row, 0.6 of the CPU per row of 32 768-row ones on
	// 18.16, sink-flush-rows; FlushInterval bounds the wait at low
	// rates).
	BatchRows int
	// BlockRows bounds one INSERT: a flush, or one message with very many
	// ports, is written in blocks of at most this many rows, so the
	// driver's buffers and the server's insert stay bounded and a timeout
	// costs one block, not the whole message (default twice BatchRows,
	// 131072 with its default: a flush takes whole messages, so it may
	// pass BatchRows by a few rows, and still goes in one block).
	BlockRows int
	// FlushInterval is the longest a row waits in the buffer (default 1s).
	FlushInterval time.Duration
	// ConsumerPrefix names the durable consumers <prefix>-counters,
	// <prefix>-events and <prefix>-inventory (default "rdmawatch-sink").
	// Sinks sharing a prefix share the work.
	ConsumerPrefix string
	// MaxAckPending bounds the messages each consumer hands out before they
	// are acked (default 65536). A flush takes at most half of them, so the
	// other half is pulled while it is inserted. The rows held are bounded
	// too, by two flushes (2 x BatchRows, plus one pull): that, not the
	// message count, bounds the memory an outage of ClickHouse holds, so
	// small messages (a node of 2 ports) still make full flushes.
	MaxAckPending int
	// AckWait is how long JetStream waits for an ack before redelivering
	// (default 10s). The sink sends InProgress for every message it holds
	// every AckWait/3, also during long inserts and retries, so AckWait only
	// decides how soon another sink takes over the messages of a sink that
	// died.
	AckWait time.Duration
	// InsertTimeout bounds one INSERT attempt (default 15s).
	InsertTimeout time.Duration
	// RetryMin and RetryMax bound the exponential backoff between INSERT
	// attempts while ClickHouse is down (defaults 100ms and 10s).
	RetryMin, RetryMax time.Duration
	// ShutdownTimeout bounds the last flush after the context is cancelled
	// (default 10s); rows that could not be written then are not acked and
	// JetStream delivers them again.
	ShutdownTimeout time.Duration
	// RefuseAttempts is how often ClickHouse must refuse one message's rows
	// as data (an exception about the values, not a connection or timeout)
	// before the message goes to the dead-letter stream (default 3). A
	// message is only given up on once the table accepted other rows since
	// its first refusal: a table that refuses everything is a schema or
	// server problem, and the sink keeps retrying instead.
	RefuseAttempts int
	// SuspectWindow is how long after a start or a NATS reconnect every
	// message counts as possibly written already, whatever its delivery
	// count, and its rows are checked against the table first: a broker
	// that lost its state redelivers as new what a sink wrote before
	// (default max(3*AckWait, 30s)). Negative: no window, only redelivered
	// messages are checked; for a sink whose broker cannot lose state, or
	// to measure the steady state.
	SuspectWindow time.Duration
	// RollupEvery is how often the sink rolls the minutes and hours it
	// stored samples of into rollup_minute and rollup_hour (default 10s;
	// negative: this sink does not roll, e.g. all but one of many sinks, or
	// `rdmawatch rollup` run by hand). RollupDelay is how far data time
	// (the newest sample stored) must be past a minute's or hour's end
	// before it is rolled (default 1m): rows of other nodes still on their
	// way land before, not after, the roll. A minute that gets rows later is
	// rolled again. RollupLookback: at a start, the minutes from the newest
	// rolled one minus this are rolled again (default 15m), since the sink
	// before may have died with them pending; keep it above RollupDelay
	// plus a minute.
	RollupEvery, RollupDelay, RollupLookback time.Duration
	// MaxAhead and MaxBehind bound a counter sample's data time relative
	// to the message's store time in JetStream, by the rule the processor
	// applies too (schemas.TimeBounds): at most MaxAhead (default
	// schemas.DefaultMaxAhead) ahead of the later of the store time and
	// the newest data time this sink accepted (a simulated fleet played
	// faster than real time walks that forward), and at most MaxBehind
	// behind the store time. A message with a sample outside is
	// dead-lettered whole, never inserted: port_samples is partitioned by
	// day, and one batch of 1024 ports on distinct days would add a
	// thousand partitions. MaxBehind zero sets no bound behind, for an
	// in-process run over a recorded trace (internal/pipeline), whose data
	// is as old as the trace; `rdmawatch sink` sets
	// schemas.DefaultMaxBehind.
	MaxAhead, MaxBehind time.Duration
	// ProbeEvery is how often the sink asks ClickHouse whether it can
	// write (it answers, and the sink's user is not read-only), so that
	// Ready says so while no INSERT is there to fail (default 5s).
	ProbeEvery time.Duration
	// ObserveInsert, when set, is called after every INSERT attempt of one
	// block with its table, rows, duration and error (nil: accepted), from
	// the table's goroutine: keep it fast (a histogram's Observe).
	ObserveInsert func(table string, rows int, took time.Duration, err error)
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.BatchRows == 0 {
		c.BatchRows = DefaultBatchRows
	}
	if c.BlockRows == 0 {
		c.BlockRows = 2 * c.BatchRows
	}
	if c.RefuseAttempts == 0 {
		c.RefuseAttempts = 3
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = DefaultMaxAckPending
	}
	if c.ConsumerPrefix == "" {
		c.ConsumerPrefix = "rdmawatch-sink"
	}
	def(&c.FlushInterval, DefaultFlushInterval)
	def(&c.AckWait, 10*time.Second)
	def(&c.InsertTimeout, 15*time.Second)
	def(&c.RetryMin, 100*time.Millisecond)
	def(&c.RetryMax, 10*time.Second)
	def(&c.ShutdownTimeout, 10*time.Second)
	def(&c.SuspectWindow, max(3*c.AckWait, 30*time.Second))
	def(&c.RollupEvery, DefaultRollupEvery)
	def(&c.RollupDelay, DefaultRollupDelay)
	def(&c.RollupLookback, DefaultRollupLookback)
	def(&c.MaxAhead, schemas.DefaultMaxAhead)
	def(&c.ProbeEvery, DefaultProbeEvery)
	return c
}

// Validate checks the configuration after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	if c.DSN != "" {
		if _, err := ch.ParseDSN(c.DSN); err != nil {
			return bad("dsn: %v", err)
		}
	}
	switch {
	case c.BatchRows < 0:
		return bad("batch rows %d < 0", c.BatchRows)
	case c.BlockRows < 0:
		return bad("block rows %d < 0", c.BlockRows)
	case c.RefuseAttempts < 0:
		return bad("refuse attempts %d < 0", c.RefuseAttempts)
	case c.MaxAckPending < 0:
		return bad("max ack pending %d < 0", c.MaxAckPending)
	case c.ConsumerPrefix != strings.Map(durableRune, c.ConsumerPrefix):
		return bad("consumer prefix %q: only letters, digits, '-' and '_' make a durable name", c.ConsumerPrefix)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"flush interval", c.FlushInterval}, {"ack wait", c.AckWait}, {"insert timeout", c.InsertTimeout},
		{"retry min", c.RetryMin}, {"retry max", c.RetryMax}, {"shutdown timeout", c.ShutdownTimeout},
		{"rollup delay", c.RollupDelay}, {"rollup lookback", c.RollupLookback},
		{"max ahead", c.MaxAhead}, {"max behind", c.MaxBehind}, {"probe every", c.ProbeEvery}} {
		if d.v < 0 {
			return bad("%s %v < 0", d.name, d.v)
		}
	}
	if c.RollupEvery > 0 && c.RollupLookback < c.RollupDelay+time.Minute {
		return bad("rollup lookback %v < rollup delay %v + 1m: a restarted sink would not roll again the minutes the one before left", c.RollupLookback, c.RollupDelay)
	}
	if c.RetryMin > c.RetryMax {
		return bad("retry min %v > retry max %v", c.RetryMin, c.RetryMax)
	}
	if c.AckWait < minAckWait {
		return bad("ack wait %v < %v: the sink could not send InProgress often enough", c.AckWait, minAckWait)
	}
	return nil
}

// minAckWait keeps the InProgress heartbeat (every AckWait/3) above a few
// round trips to NATS: the consumer's own bound, checked here so a bad
// value is the sink's config error.
const minAckWait = jsbatch.MinAckWait

func durableRune(r rune) rune {
	if r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
		return r
	}
	return -1
}
