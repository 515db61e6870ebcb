package stats

import "math"

// Counters of real ports are rarely plain Poisson: one lost packet makes a
// clump of out-of-sequence packets (Go-Back-N resends all that was in
// flight), adaptive routing reorders in bursts. A quasi-Poisson count has a
// variance of phi times its mean; dividing it (and the history it is
// compared with) by phi gives a count that behaves like a Poisson one, which
// the tests here then judge. Phi is estimated from the counts themselves,
// by Pearson's statistic against their expected values.

// normalApproxCount is the total count above which RateTestQuasi uses a
// normal approximation of the binomial: the exact sum would walk thousands
// of terms per call, and at these counts the approximation is exact to far
// better than the thresholds the detectors use.
const normalApproxCount = 1e4

// RateTestQuasi is RateTest for overdispersed counts: k events over
// exposure b in the window against kh over bh in the history, where the
// counts' variance is phi (>= 1) times their mean. It returns the one-sided
// p-value that the window's rate is no higher than the history's.
func RateTestQuasi(k, b, kh, bh, phi float64) float64 {
	if phi < 1 || math.IsNaN(phi) {
		phi = 1
	}
	if b <= 0 {
		return 1
	}
	k, kh = k/phi, kh/phi
	n := k + kh
	p := b / (b + bh)
	if n > normalApproxCount && n*p*(1-p) > 100 {
		// The signed root of the likelihood ratio (deviance) is normal
		// to far into the tail, where the plain z of the binomial is off
		// by orders of magnitude; k - 0.5 is the continuity correction.
		x := k - 0.5
		if x <= n*p {
			return 1
		}
		dev := 2 * (x*math.Log(x/(n*p)) + (n-x)*math.Log((n-x)/(n-n*p)))
		return 0.5 * math.Erfc(math.Sqrt(math.Max(0, dev))/math.Sqrt2)
	}
	return RateTest(k, b, kh, bh)
}

// Dispersion accumulates Pearson's statistic of counts against their
// expected values, sum (k - mu)^2 / mu, and its degrees of freedom, with
// exponential forgetting: the index of dispersion of a stream of counts
// whose mean is known from elsewhere (a port's history).
type Dispersion struct {
	Sum, N float64
}

// Add ages what was accumulated by w (1 keeps everything) and adds one count
// k whose expected value is mu; a count with no expectation is skipped.
func (d *Dispersion) Add(k, mu, w float64) {
	if mu <= 0 {
		return
	}
	d.Sum, d.N = d.Sum*w, d.N*w
	d.Sum += (k - mu) * (k - mu) / mu
	d.N++
}

// Index is the estimated variance over mean, shrunk toward 1 (Poisson) by
// prior pseudo-observations and never below 1: a short or event-poor
// history does not make the counts look calmer than Poisson, nor one odd
// count make them look wild.
func (d Dispersion) Index(prior float64) float64 {
	if d.N+prior <= 0 {
		return 1
	}
	return math.Max(1, (d.Sum+prior)/(d.N+prior))
}

// PearsonIndex is the index of dispersion of m counts k_i over exposures
// n_i about their common rate, given sk = sum k_i, sn = sum n_i and
// sk2n = sum k_i^2 / n_i, shrunk toward 1 by prior pseudo degrees of
// freedom: Pearson's X^2 = sum k_i^2 / (r n_i) - sk with r = sk / sn, over
// m - 1 degrees of freedom. For a compound Poisson count (clumps of F
// events at Poisson times) it estimates E[F^2] / E[F], at least the mean
// clump size: the count over the index is then at most the number of
// clumps.
func PearsonIndex(sk, sn, sk2n float64, m int, prior float64) float64 {
	if sk <= 0 || sn <= 0 || m < 1 {
		return 1
	}
	r := sk / sn
	x2 := math.Max(0, sk2n/r-sk)
	return math.Max(1, (x2+prior)/(float64(m-1)+prior))
}

// PearsonIndexUpper is a one-sided upper confidence bound of the index of
// dispersion of PearsonIndex's counts (no prior): X^2 over the lower
// quantile of chi-square with m - 1 degrees of freedom at the normal
// quantile -z (z = 1.645: 95%). Few counts give a wide bound (+Inf for
// fewer than two); a count over the bound is then a lower bound of the
// number of clumps.
func PearsonIndexUpper(sk, sn, sk2n float64, m int, z float64) float64 {
	if m < 2 {
		return math.Inf(1)
	}
	if sk <= 0 || sn <= 0 {
		return 1
	}
	x2 := math.Max(0, sk2n/(sk/sn)-sk)
	q := ChiSquareQuantile(float64(m-1), -z)
	if q <= 0 {
		return math.Inf(1)
	}
	return math.Max(1, x2/q)
}

// ChiSquareQuantile is the quantile of chi-square with df degrees of
// freedom at the normal quantile z (Wilson-Hilferty: within a few percent
// from df = 3, and erring wide below).
func ChiSquareQuantile(df, z float64) float64 {
	if df <= 0 {
		return 0
	}
	a := 2 / (9 * df)
	c := 1 - a + z*math.Sqrt(a)
	if c <= 0 {
		return 0
	}
	return df * c * c * c
}
