package processor

import (
	"math"
	"strconv"
)

// How a detector writes a figure into its evidence or summary: the one home
// of the rounding, so every detector writes the same number the same way.
// Evidence is for people and travels as JSON and msgpack, where NaN and
// ±Inf are not numbers every reader takes: they become 0.

// Finite is v, or 0 for NaN and ±Inf.
func Finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// RoundTo rounds v to places decimals; 0 for NaN and ±Inf.
func RoundTo(v float64, places int) float64 {
	v = Finite(v)
	p := math.Pow(10, float64(places))
	r := math.Round(v*p) / p
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return v // so large it has no decimals to round
	}
	return r
}

// SigDigits rounds v to n significant digits; 0 for 0, NaN and ±Inf.
func SigDigits(v float64, n int) float64 {
	v = Finite(v)
	if v == 0 {
		return 0
	}
	p := math.Pow(10, float64(n-1)-math.Floor(math.Log10(math.Abs(v))))
	r := math.Round(v*p) / p
	if math.IsInf(r, 0) || math.IsNaN(r) || math.IsInf(p, 0) || p == 0 {
		return v // at the ends of float64's range: already as short as it gets
	}
	return r
}

// HumanRate writes a rate the way the summaries do: 3.2k, 850, 0.4.
func HumanRate(v float64) string {
	switch {
	case v >= 1e6:
		return trimf(v/1e6) + "M"
	case v >= 1e3:
		return trimf(v/1e3) + "k"
	}
	return trimf(v)
}

// sig rounds to 3 significant digits for evidence.
func sig(v float64) float64 { return SigDigits(v, 3) }

func trimf(v float64) string { return strconv.FormatFloat(sig(v), 'f', -1, 64) }
