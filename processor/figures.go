package processor

import "math"

// How a detector writes a figure into its evidence or summary: the one home
// of the rounding, so every detector writes the same number the same way.
// Evidence is for people and travels as JSON and msgpack, where NaN and
// ±Inf are not numbers every reader takes: they become 0.

// finite is v, or 0 for NaN and ±Inf.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// roundTo rounds v to places decimals; 0 for NaN and ±Inf.
func roundTo(v float64, places int) float64 {
	v = finite(v)
	p := math.Pow(10, float64(places))
	r := math.Round(v*p) / p
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return v // so large it has no decimals to round
	}
	return r
}

// sigDigits rounds v to n significant digits; 0 for 0, NaN and ±Inf.
func sigDigits(v float64, n int) float64 {
	v = finite(v)
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
