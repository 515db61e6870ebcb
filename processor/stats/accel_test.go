package stats

import (
	"math"
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
