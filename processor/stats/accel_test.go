package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAccelFit: on exact counts the fit finds the slope's growth rate of an
// accelerating rise and none on a straight one, and projects both to the
// level they reach.
func TestAccelFit(t *testing.T) {
	const b = 1.2e13 // a minute of 200 Gb/s
	for _, tc := range []struct {
		name string
		tau  float64 // 0: straight line in ln rate
	}{{"straight", 0}, {"accelerating tau 20", 20}} {
		t.Run(tc.name, func(t *testing.T) {
			ln := func(m float64) float64 {
				if tc.tau == 0 {
					return math.Log(1e-8) + 0.1*m
				}
				return math.Log(1e-8) + 2*math.Expm1(m/tc.tau)
			}
			var ts, ks, bs []float64
			for m := 0.5; m < 25; m++ {
				ts, ks, bs = append(ts, m), append(ks, math.Round(b*math.Exp(ln(m)))), append(bs, b)
			}
			r := AccelFit(ts, ks, bs, 25, 3, 480)
			if !r.OK {
				t.Fatal("no fit")
			}
			level := ln(35)
			got := r.Reach(level)
			if tc.tau == 0 {
				got = r.LinReach(level)
				if r.LR() > 1 {
					t.Errorf("straight line called accelerating: LR %v, R %v", r.LR(), r.R)
				}
			} else if math.Abs(1/r.R-tc.tau) > 0.5 || r.LR() < 100 {
				t.Errorf("tau %v, LR %v", 1/r.R, r.LR())
			}
			if math.Abs(got-10) > 0.1 {
				t.Errorf("reaches the level in %v, want 10", got)
			}
		})
	}
}

// TestReachSD: on Poisson counts of a straight rise in log rate, the
// delta-method standard error of the reach matches the spread of the
// reach over independent draws (within a third), and the profile spread
// of a straight line is small beside it.
func TestReachSD(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	const b = 1.0
	ln := func(m float64) float64 { return math.Log(0.5) + 0.08*m } // 0.5 to ~60 a minute
	level := ln(40)
	var reaches, sds []float64
	for range 400 {
		var ts, ks, bs []float64
		for m := 0.5; m < 30; m++ {
			ts, ks, bs = append(ts, m), append(ks, poissonSample(r, b*math.Exp(ln(m)))), append(bs, b)
		}
		fit := AccelFit(ts, ks, bs, 30, 3, 480)
		if !fit.OK {
			t.Fatal("no fit")
		}
		reaches = append(reaches, fit.LinReach(level))
		sds = append(sds, fit.ReachSD(ts, bs, 30, level, false))
		if sp := fit.ReachSpread(level, 1, fit.LinReach(level)); math.IsInf(sp, 0) {
			t.Fatalf("spread %v", sp)
		}
	}
	var mean, sq, sdMean float64
	for i := range reaches {
		mean += reaches[i]
		sdMean += sds[i]
	}
	mean /= float64(len(reaches))
	sdMean /= float64(len(sds))
	for _, v := range reaches {
		sq += (v - mean) * (v - mean)
	}
	emp := math.Sqrt(sq / float64(len(reaches)-1))
	// The reach is a ratio (distance over slope): skewed, so its median,
	// not its mean, sits at the truth.
	sorted := slices.Clone(reaches)
	slices.Sort(sorted)
	if med := sorted[len(sorted)/2]; math.Abs(med-10) > 0.5 {
		t.Errorf("median reach %.2f, want 10", med)
	}
	if sdMean < emp/1.33 || sdMean > emp*1.33 {
		t.Errorf("ReachSD %.3f on average, the reach's spread over draws %.3f", sdMean, emp)
	}
	t.Logf("reach %.2f, spread over draws %.3f, ReachSD %.3f", mean, emp, sdMean)
}

func poissonSample(r *rand.Rand, mu float64) float64 {
	l, k, p := math.Exp(-mu), 0.0, 1.0
	if mu > 50 {
		return math.Max(0, math.Round(mu+math.Sqrt(mu)*r.NormFloat64()))
	}
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}
