package processor

import "github.com/rdmawatch/rdmawatch/schemas"

// RateGbps is a port's speed from its rate text, 0 when the text is not a
// rate (the detectors then fall back to the traffic they see).
func RateGbps(text string) float64 {
	v, _ := schemas.ParseRateGbps(text)
	return v
}
