package schemas

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseRateGbps reads a port's speed out of its sysfs rate text: 200 from
// "200 Gb/sec (4X HDR)", 2.5 from "2.5 Gb/sec (1X SDR)". The sink's derived
// figures (PortFigures) and the detectors read rates with this one parser,
// and the collector writes a LAG member's rate in the form it reads; it
// allocates nothing on the way to a value, since detectors call it per
// sample.
func ParseRateGbps(rate string) (float64, error) {
	s := strings.TrimSpace(rate)
	sp := strings.IndexByte(s, ' ')
	if sp <= 0 || !strings.HasPrefix(s[sp+1:], "Gb/sec") || (len(s) > sp+7 && s[sp+7] != ' ') {
		return 0, fmt.Errorf("rate %q is not \"<n> Gb/sec ...\"", rate)
	}
	v, err := strconv.ParseFloat(s[:sp], 64)
	if err != nil || math.IsNaN(v) || v < 0 || v > 1e6 {
		return 0, fmt.Errorf("rate %q: %q is not a speed in Gb/s", rate, s[:sp])
	}
	return v, nil
}
