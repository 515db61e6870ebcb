package schemas

import (
	"errors"
	"fmt"
	"time"
)

// Bounds of one message. Decoders enforce them before they allocate, and a
// collector uses them to bound (split) what it publishes: a batch a decoder
// refuses would be refused forever.
const (
	// MaxMessageBytes is the largest batch, inventory or event a decoder
	// reads: NATS's default max_payload (1 MiB). A port with every
	// dictionary counter moving takes about 1 KB, so 512 such ports fit; the
	// worst case (every counter flagged with 64-bit values) is about 3.5 KB
	// a port, so a writer checks the encoded size too and splits a batch
	// when EncodeBatch returns ErrTooLarge.
	MaxMessageBytes = 1 << 20
	// MaxBatchPorts is the largest number of ports one batch or inventory
	// carries. A batch is one host's ports: a real host has a few dozen at
	// most (8 GPUs x 2 HCAs x 2 ports is 32; SR-IOV functions are not
	// scraped), so 1024 leaves room for any host while a hostile count
	// cannot make a decoder allocate 100 MB of port samples.
	MaxBatchPorts = 1024
	// MaxPort is the largest port number a message or trace may carry: the
	// stores keep ports as UInt16, and a larger number would be stored as
	// some other port (or all of them as 65535).
	MaxPort = 65535
)

// ErrTooLarge is wrapped by every error about a message or port count past
// MaxMessageBytes or MaxBatchPorts: a writer that gets it splits the batch.
var ErrTooLarge = errors.New("message too large")

// The data times a decoder accepts, unix milliseconds: from 2000-01-01 to
// 2100-01-01 UTC. A reading outside them is a broken clock or a hostile
// message; accepted, one far-future time would move every watermark past
// all later data (ClickHouse's DateTime ends in 2105). Whether a time is
// plausible relative to the stream's own clock is the processor's decision,
// not the decoder's.
const (
	MinDataTimeMs int64 = 946684800000  // 2000-01-01T00:00:00Z
	MaxDataTimeMs int64 = 4102444800000 // 2100-01-01T00:00:00Z
)

// ErrImplausibleTime is wrapped by every error of CheckDataTime, so a role
// that refuses a message can give "implausible time" as the reason
// (errors.Is) rather than a generic decode error.
var ErrImplausibleTime = errors.New("implausible time")

// CheckDataTime returns an error naming the value when a data time is
// outside [MinDataTimeMs, MaxDataTimeMs).
func CheckDataTime(ms int64) error {
	if ms >= MinDataTimeMs && ms < MaxDataTimeMs {
		return nil
	}
	return fmt.Errorf("%w %d ms (%s): outside 2000-01-01..2100-01-01", ErrImplausibleTime, ms, time.UnixMilli(ms).UTC().Format(TimeLayout))
}
