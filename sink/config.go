package sink

import (
	"errors"
	"fmt"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("invalid sink config")

// Config sizes the sink. The zero value of a field means its default.
type Config struct {
	// DSN is the ClickHouse the caller opens the connection to, e.g.
	// clickhouse://127.0.0.1:19000/default; New does not dial it (it gets
	// the connection), Validate checks that it parses when it is set.
	DSN string
	// BatchRows flushes a table's buffer once it holds this many rows
	// (default 10000).
	BatchRows int
	// FlushInterval is the longest a row waits in the buffer (default 1s).
	FlushInterval time.Duration
	// ConsumerPrefix names the durable consumers <prefix>-counters,
	// <prefix>-events and <prefix>-inventory (default "rdmawatch-sink").
	// Sinks sharing a prefix share the work.
	ConsumerPrefix string
	// MaxAckPending bounds the messages each consumer hands out before they
	// are acked, so an outage of ClickHouse holds a bounded backlog in
	// memory (default 1000).
	MaxAckPending int
	// AckWait is how long JetStream waits for an ack before redelivering
	// (default 60s). The sink calls InProgress while it retries, so it must
	// exceed InsertTimeout + RetryMax.
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
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.BatchRows == 0 {
		c.BatchRows = 10000
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = 1000
	}
	if c.ConsumerPrefix == "" {
		c.ConsumerPrefix = "rdmawatch-sink"
	}
	def(&c.FlushInterval, time.Second)
	def(&c.AckWait, time.Minute)
	def(&c.InsertTimeout, 15*time.Second)
	def(&c.RetryMin, 100*time.Millisecond)
	def(&c.RetryMax, 10*time.Second)
	def(&c.ShutdownTimeout, 10*time.Second)
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
	case c.MaxAckPending < 0:
		return bad("max ack pending %d < 0", c.MaxAckPending)
	case c.ConsumerPrefix != strings.Map(durableRune, c.ConsumerPrefix):
		return bad("consumer prefix %q: only letters, digits, '-' and '_' make a durable name", c.ConsumerPrefix)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"flush interval", c.FlushInterval}, {"ack wait", c.AckWait}, {"insert timeout", c.InsertTimeout},
		{"retry min", c.RetryMin}, {"retry max", c.RetryMax}, {"shutdown timeout", c.ShutdownTimeout}} {
		if d.v < 0 {
			return bad("%s %v < 0", d.name, d.v)
		}
	}
	if c.RetryMin > c.RetryMax {
		return bad("retry min %v > retry max %v", c.RetryMin, c.RetryMax)
	}
	if c.InsertTimeout+c.RetryMax >= c.AckWait {
		return bad("ack wait %v must exceed insert timeout %v + retry max %v, or JetStream redelivers while the sink still retries", c.AckWait, c.InsertTimeout, c.RetryMax)
	}
	return nil
}

func durableRune(r rune) rune {
	if r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
		return r
	}
	return -1
}
