package stats

import "math"

// HingeResult is one hinge fit at a given onset.
type HingeResult struct {
	From       int // first point after the onset
	Tau        float64
	Slope, A   float64 // ln rate = A + Slope*max(0, t - Tau)
	LR         float64 // likelihood ratio statistic against a constant rate; -Inf when no fit
	Iterations int
}

// hingeMinPoints is the number of points after the onset a slope needs.
const hingeMinPoints = 3

// Bounds and start of the slope search, in ln rate per time unit (the
// detectors use minutes): 3 is a decade in under a minute, -0.5 allows the
// score to cross zero below a flat rate; 0.05 is a gentle start.
const (
	hingeSlopeLow   = -0.5
	hingeSlopeHigh  = 3.0
	hingeSlopeStart = 0.05
	hingeMaxIter    = 30
	hingeScoreTol   = 1e-9 // relative: |score| <= tol * kTot * (1 + mean h)
	hingeBracketTol = 1e-7 // the slope's bracket is narrower than this
)

// Hinge fits k_i ~ Poisson(b_i exp(a + s h_i)), h_i = max(0, t_i - tau),
// over the points t, k (events) and b (exposure), t ascending, by profile
// likelihood: a is solved in closed form, s by safeguarded Newton on the
// score. from is a hint of the first point after tau (it is moved to the
// right one); kTot and bTot are the totals of k and b (kTot may carry a
// pseudo count).
func Hinge(t, k, b []float64, from int, tau, kTot, bTot float64) HingeResult {
	n := len(t)
	for from > 0 && t[from-1] > tau {
		from--
	}
	for from < n && t[from] <= tau {
		from++
	}
	r := HingeResult{From: from, Tau: tau}
	if n-from < hingeMinPoints {
		r.LR = math.Inf(-1)
		return r
	}
	var bPre, skh float64
	for i := 0; i < from; i++ {
		bPre += b[i]
	}
	for i := from; i < n; i++ {
		skh += k[i] * (t[i] - tau)
	}
	// score(s) = skh - kTot * E_w[h], decreasing in s.
	moments := func(s float64) (z, zh, zhh float64) {
		z = bPre
		for i := from; i < n; i++ {
			h := t[i] - tau
			w := b[i] * math.Exp(s*h)
			z += w
			zh += w * h
			zhh += w * h * h
		}
		return
	}
	lo, hi := hingeSlopeLow, hingeSlopeHigh
	s := hingeSlopeStart
	for it := 0; it < hingeMaxIter; it++ {
		z, zh, zhh := moments(s)
		mean := zh / z
		score := skh - kTot*mean
		if score > 0 {
			lo = s
		} else {
			hi = s
		}
		if math.Abs(score) <= hingeScoreTol*kTot*(1+mean) || hi-lo < hingeBracketTol {
			break
		}
		variance := zhh/z - mean*mean
		next := s
		if variance > 0 {
			next = s + score/(kTot*variance)
		}
		if !(next > lo && next < hi) {
			next = (lo + hi) / 2
		}
		s = next
		r.Iterations = it + 1
	}
	z, _, _ := moments(s)
	r.Slope = s
	r.A = math.Log(kTot / z)
	r.LR = 2 * (s*skh - kTot*math.Log(z/bTot))
	return r
}
