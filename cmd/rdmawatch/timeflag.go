package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// parseTimeFlag is the one parser of every command's time flags (query and
// postmortem --from/--to, rollup, retention --now, events --since), so a
// time one command takes every other takes too:
//
//   - RFC 3339 ("2026-03-14T00:05:00Z", any offset, any sub-second
//     precision), read by schemas.ParseTime like every time in the data;
//   - a date ("2026-03-14", midnight UTC);
//   - "now";
//   - a duration back from now, with or without a leading '-': Go's units
//     ("90m", "6h", "-1h30m") or days ("7d", "1.5d"; a day is 24 h).
//
// "" is the zero time: the flag was not given.
func parseTimeFlag(name, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return time.Time{}, nil
	case "now":
		return now, nil
	}
	if t, err := schemas.ParseTime(s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t.UTC(), nil
	}
	if d, ok := backFromNow(strings.TrimPrefix(s, "-")); ok {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want RFC 3339 (2026-03-14T00:05:00Z), a date (2026-03-14), now, or a duration back from now (90m, 6h, 7d)", name, s)
}

// maxBack bounds a duration back from now: 100 years, far beyond any
// retention, and far from time.Duration's overflow.
const maxBack = 36500 * 24 * time.Hour

// backFromNow reads "90m", "6h" (time.ParseDuration) or "7d", "1.5d".
func backFromNow(s string) (time.Duration, bool) {
	if s == "" || s[0] == '-' || s[0] == '+' {
		return 0, false
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		// !(n >= 0) refuses NaN; the FormatFloat round trip "1e3d", "0x1p3d", "Infd".
		if err != nil || !(n >= 0) || strconv.FormatFloat(n, 'f', -1, 64) != days || n*24*float64(time.Hour) > float64(maxBack) {
			return 0, false
		}
		return time.Duration(n * 24 * float64(time.Hour)), true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxBack {
		return 0, false
	}
	return d, true
}
