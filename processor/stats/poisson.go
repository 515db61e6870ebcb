// Package stats holds the pure statistics the detectors decide with:
// Poisson and binomial tails, confidence bounds of a Poisson mean, the
// comparison of two Poisson rates, medians, the hinge fit of a rising rate
// and the statistics of a rate's bucketed history (Series: the onset
// search, overdispersion, wander, trend and recent rate ber_drift reads).
// Everything here works on plain numbers; the detectors own the thresholds
// and the decisions.
package stats

import (
	"math"
	"slices"
)

// tailTermCutoff stops the binomial sum once a term adds less than this
// share of the sum: past the mode the terms fall geometrically, so the
// rest cannot change the result at float64 precision.
const tailTermCutoff = 1e-15

// poissonSeriesTerms and poissonSeriesCutoff bound the series of the
// Poisson upper tail: 200 terms or a term under 1e-12 of the first, far
// beyond what a rise test reads.
const (
	poissonSeriesTerms  = 200
	poissonSeriesCutoff = 1e-12
)

// z95 is the two-sided 95% normal quantile of the Poisson bounds.
const z95 = 1.96

// RateTest compares two Poisson counts, k events over exposure b in the
// window against kh over bh in the history: under one common rate, the
// window's share of the k+kh events is Binomial(k+kh, b/(b+bh)), and the
// result is P(share >= k). It needs no prior for a history with no events
// (P is then (b/(b+bh))^k), and it carries the history's own uncertainty:
// a short or event-poor history cannot make a handful of events over a
// long window significant, where a fixed expected count from it would.
func RateTest(k, b, kh, bh float64) float64 {
	return BinomialTail(k, k+kh, b/(b+bh))
}

// BinomialTail is P(X >= k) for X ~ Binomial(n, p); k and n are rounded.
func BinomialTail(k, n, p float64) float64 {
	k, n = math.Round(k), math.Round(n)
	switch {
	case k <= 0:
		return 1
	case k > n || p <= 0:
		return 0
	case p >= 1:
		return 1
	case k <= n*p:
		return 1 // at or below the mean: nothing to see (and not worth the sum)
	}
	lgn, _ := math.Lgamma(n + 1)
	lp, lq := math.Log(p), math.Log1p(-p)
	var sum float64
	for j := k; j <= n; j++ {
		lgj, _ := math.Lgamma(j + 1)
		lgr, _ := math.Lgamma(n - j + 1)
		term := math.Exp(lgn - lgj - lgr + j*lp + (n-j)*lq)
		sum += term
		if term < tailTermCutoff*sum {
			break // past the mode the terms fall geometrically
		}
	}
	return min(1, sum)
}

// PoissonTail is P(X >= k) for X ~ Poisson(mu).
func PoissonTail(k, mu float64) float64 {
	if k <= 0 {
		return 1
	}
	if mu <= 0 {
		return 0
	}
	lg, _ := math.Lgamma(k + 1)
	logPmf := k*math.Log(mu) - mu - lg
	var sum float64
	term := 1.0
	for j := 1.0; j < poissonSeriesTerms && term > poissonSeriesCutoff; j++ {
		sum += term
		term *= mu / (k + j)
	}
	if k < mu {
		// The upper tail is most of the mass: the series above converges
		// slowly; a normal approximation is enough for a rise test.
		z := (k - 0.5 - mu) / math.Sqrt(mu)
		return 0.5 * math.Erfc(z/math.Sqrt2)
	}
	return math.Exp(logPmf) * sum
}

// PoissonLow and PoissonHigh are ~95% bounds of a Poisson mean given k
// events (Wilson-Hilferty): 0 events still allow up to ~3.7.
func PoissonLow(k float64) float64 {
	if k <= 0 {
		return 0
	}
	c := 1 - 1/(9*k) - z95/(3*math.Sqrt(k))
	return k * c * c * c
}

// PoissonHigh: see PoissonLow.
func PoissonHigh(k float64) float64 {
	k1 := k + 1
	c := 1 - 1/(9*k1) + z95/(3*math.Sqrt(k1))
	return k1 * c * c * c
}

// Median sorts v in place and returns its median; 0 for no values.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// madToSigma scales a median absolute deviation to the standard deviation
// of a normal distribution (1/Phi^-1(3/4)).
const madToSigma = 1.4826

// RobustSpread is the median absolute deviation of v scaled to a normal
// standard deviation (MAD x 1.4826). It reorders v in place.
func RobustSpread(v []float64) float64 {
	med := Median(v)
	for i := range v {
		v[i] = math.Abs(v[i] - med)
	}
	return madToSigma * Median(v)
}

// TheilSenSlope is the median of the pairwise slopes (ys[i]-ys[j])/(xs[i]-xs[j])
// of the points with distinct x, written into scratch (which must hold
// len(xs)*(len(xs)-1)/2 values); 0 for fewer than two such points.
func TheilSenSlope(xs, ys, scratch []float64) float64 {
	p := 0
	for i := range xs {
		for j := i + 1; j < len(xs); j++ {
			if dx := xs[i] - xs[j]; dx != 0 {
				scratch[p] = (ys[i] - ys[j]) / dx
				p++
			}
		}
	}
	return Median(scratch[:p])
}
