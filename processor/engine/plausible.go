package engine

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Plausible time: the rule and why are schemas.TimeBounds (one definition,
// which the sink applies too). The processor bounds data time ahead only: a
// sample behind its data clock is late here, not refused, and it stores
// nothing a sample far behind could bloat.

// aheadLimit is the newest plausible data time for a message stored at
// storedMs (0: unknown); 0 means no limit yet (no clock at all).
func (p *Processor) aheadLimit(storedMs int64) schemas.Millis {
	return schemas.TimeBounds{Clock: p.maxTime, Stored: schemas.Millis(storedMs), MaxAhead: p.cfg.MaxAhead}.AheadLimit()
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
