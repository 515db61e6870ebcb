package engine

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Plausible time.
//
// One sample dated far in the future used to move the watermark there for
// good: every later sample was late, every port was forgotten, silent
// incidents resolved. So a sample's data time must be plausible before it
// may touch any state:
//
//   - it is positive (0 means "use the batch's time"; a batch at 0 or before
//     1970 is no reading of a counter);
//   - it is at most MaxAhead (default 10 min) ahead of the later of two
//     clocks: the data clock, the newest data time this processor has
//     accepted, and the time the broker stored the message.
//
// Why the data clock: in a replay or on a simulated fleet played faster
// than real time, data time has nothing to do with the wall clock (a trace
// from March replayed in December; a simulation two hours ahead of now), so
// only the data the stream has already shown can say what "now" is.
// Consecutive readings of a fleet are an interval apart, far inside MaxAhead.
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
// What it does not catch: in a replay, a line dated between the trace and
// the day of the replay passes the store-time check (detecting it would need
// corroboration by other nodes); and a collector that keeps sending up to
// MaxAhead ahead can walk the data clock forward. Both need a credential for
// the counters stream, and the spoofed-node check limits that to one's own
// node.
//
// Samples behind the data clock are never refused for that: they are late
// (counted, seen by the port detectors, not by fabric decisions already
// taken), and a port whose only samples are far in the past is forgotten at
// the next eviction.

// aheadLimit is the newest plausible data time for a message stored at
// storedMs (0: unknown); 0 means no limit yet (no clock at all).
func (p *Processor) aheadLimit(storedMs int64) schemas.Millis {
	clock := max(p.maxTime, schemas.Millis(storedMs))
	if clock <= 0 {
		return 0
	}
	return clock + schemas.Millis(p.cfg.MaxAhead.Milliseconds())
}

// implausible notes the first refused sample of a message for the dead
// letter's reason.
type implausible struct {
	n      int
	first  string
	t      schemas.Millis
	clock  schemas.Millis
	stored int64
}

func (im *implausible) add(id schemas.PortID, t, clock schemas.Millis, storedMs int64) {
	im.n++
	if im.n == 1 {
		im.first = id.Device + "/" + strconv.Itoa(id.Port)
		im.t, im.clock, im.stored = t, clock, storedMs
	}
}

func (im *implausible) reason(total int) string {
	if im.n == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d of %d samples; first: port %s at %s (%d ms)", ReasonImplausibleTime, im.n, total, im.first, fmtMillis(im.t), int64(im.t))
	if im.t > 0 {
		fmt.Fprintf(&b, ", data clock %s, stored %s", fmtMillis(im.clock), fmtMillis(schemas.Millis(im.stored)))
	}
	return b.String()
}

// fmtMillis prints a data time; times time.Time cannot format (year
// 292278994) print as milliseconds.
func fmtMillis(t schemas.Millis) string {
	if t <= 0 {
		return "none"
	}
	tm := time.UnixMilli(int64(t)).UTC()
	if tm.Year() > 9999 {
		return strconv.FormatInt(int64(t), 10) + "ms"
	}
	return tm.Format(time.RFC3339Nano)
}
