package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// poisson draws a Poisson count (Knuth for small means, normal above).
func poisson(r *rand.Rand, mu float64) float64 {
	if mu > 50 {
		return math.Max(0, math.Round(mu+math.Sqrt(mu)*r.NormFloat64()))
	}
	l, k, p := math.Exp(-mu), 0.0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// TestRateTestQuasi: the exact and the normal paths agree, and
// overdispersion makes the same rise less significant.
func TestRateTestQuasi(t *testing.T) {
	tests := []struct {
		name          string
		k, b, kh, bh  float64
		phi           float64
		wantLo, wantH float64
	}{
		{"phi 1 is RateTest", 25, 10, 30, 60, 1, RateTest(25, 10, 30, 60), RateTest(25, 10, 30, 60)},
		{"phi below 1 is 1", 25, 10, 30, 60, 0.3, RateTest(25, 10, 30, 60), RateTest(25, 10, 30, 60)},
		{"no exposure", 5, 0, 30, 60, 1, 1, 1},
		// 20% above the history's rate on 20,000 expected events: ~28 sigma.
		{"large counts, normal path", 24000, 1, 200000, 10, 1, 0, 1e-100},
		{"large counts at the history's rate", 20000, 1, 200000, 10, 1, 1, 1},
		{"large counts a little above", 20200, 1, 200000, 10, 1, 0.05, 0.1},
		// The same rise with a dispersion of 100 is ~2.8 sigma.
		{"large counts, overdispersed", 24000, 1, 200000, 10, 100, 1e-3, 5e-3},
	}
	for _, tc := range tests {
		got := RateTestQuasi(tc.k, tc.b, tc.kh, tc.bh, tc.phi)
		if got < tc.wantLo || got > tc.wantH {
			t.Errorf("%s: P %.3g, want in [%g, %g]", tc.name, got, tc.wantLo, tc.wantH)
		}
	}
	// Near the switch between the exact sum and the normal approximation
	// the two give the same answer.
	exact := RateTest(5600, 1, 50000-5600, 9)
	approx := RateTestQuasi(5600, 1, 50000-5600, 9, 1)
	if math.Abs(math.Log(exact/approx)) > 0.3 {
		t.Errorf("exact %.3g, normal %.3g", exact, approx)
	}
}

// TestDispersion: Poisson counts give an index near 1; clumps of F give
// about F; PearsonIndex on the same counts agrees.
func TestDispersion(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name   string
		clump  float64
		lo, hi float64
	}{
		{"poisson", 1, 0.8, 1.25},
		{"clumps of 10", 10, 8, 12.5},
		{"clumps of 40", 40, 32, 50},
	} {
		var d Dispersion
		var sk, sn, sk2n float64
		const m = 2000
		for i := range m {
			n := 1e6 * (1 + float64(i%7)) // traffic varies: expectations follow it
			mu := 3e-6 * n
			k := tc.clump * poisson(r, mu/tc.clump)
			d.Add(k, mu, 1)
			sk, sn, sk2n = sk+k, sn+n, sk2n+k*k/n
		}
		if got := d.Index(10); got < tc.lo || got > tc.hi {
			t.Errorf("%s: Dispersion.Index %.3g, want in [%g, %g]", tc.name, got, tc.lo, tc.hi)
		}
		if got := PearsonIndex(sk, sn, sk2n, m, 2); got < tc.lo || got > tc.hi {
			t.Errorf("%s: PearsonIndex %.3g, want in [%g, %g]", tc.name, got, tc.lo, tc.hi)
		}
	}
	// Forgetting: a stream that turns Poisson forgets its old clumps.
	var d Dispersion
	for range 500 {
		d.Add(40*poisson(r, 0.5), 20, 1)
	}
	for range 3000 {
		d.Add(poisson(r, 20), 20, math.Exp(-1.0/300))
	}
	if got := d.Index(10); got > 1.5 {
		t.Errorf("after forgetting: index %.3g, want near 1", got)
	}
	// Priors: nothing known is Poisson; one wild count is damped.
	if got := (Dispersion{}).Index(10); got != 1 {
		t.Errorf("empty index %g", got)
	}
	if got := PearsonIndex(0, 10, 0, 3, 2); got != 1 {
		t.Errorf("no events: %g", got)
	}
}

// TestPearsonIndexUpper: the bound covers the true clump size about 95% of
// the time and narrows with more counts; chi-square quantiles are close to
// the tables.
func TestPearsonIndexUpper(t *testing.T) {
	for _, tc := range []struct{ df, z, want float64 }{
		{10, -1.645, 3.940}, {30, -1.645, 18.493}, {10, 1.645, 18.307}, {100, 0, 99.33},
	} {
		if got := ChiSquareQuantile(tc.df, tc.z); math.Abs(got/tc.want-1) > 0.02 {
			t.Errorf("ChiSquareQuantile(%g, %g) = %.4g, want %.4g", tc.df, tc.z, got, tc.want)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, m := range []int{8, 30} {
		covered, width := 0, 0.0
		const trials = 400
		for range trials {
			var sk, sn, sk2n float64
			for range m {
				n := 1e6
				k := 20 * poisson(r, 1e-5*n/20) // clumps of 20
				sk, sn, sk2n = sk+k, sn+n, sk2n+k*k/n
			}
			up := PearsonIndexUpper(sk, sn, sk2n, m, 1.645)
			if up >= 20 {
				covered++
			}
			width += up / trials
		}
		if covered < trials*90/100 {
			t.Errorf("m=%d: bound covers 20 in %d of %d", m, covered, trials)
		}
		t.Logf("m=%d: covered %d/%d, mean bound %.3g", m, covered, trials, width)
	}
	if !math.IsInf(PearsonIndexUpper(5, 10, 2.5, 1, 1.645), 1) {
		t.Error("one count: bound not +Inf")
	}
}
