package stats

import "math"

// Series is the history of a rate as a fit reads it, oldest first: per
// bucket, K events (bit errors) out of B trials (bits) at time T (the
// bucket's centre, in minutes). T, K and B have the same length; a bucket
// has B > 0. ber_drift reads its links' per-minute BER this way.
type Series struct {
	T, K, B []float64
}

// HingeSearch is how BestHinge searches the onset of a hinge model.
type HingeSearch struct {
	// MinBefore and MinAfter are the buckets the onset needs before it (the
	// history of the baseline) and after it (for a slope).
	MinBefore, MinAfter int
	// CoarseStep and RefineReach: a coarse pass over every CoarseStep-th
	// bucket boundary, then every boundary within RefineReach of the best.
	CoarseStep, RefineReach int
	// Prior is added to the events before the onset (a pseudo count that
	// keeps the baseline of a series without events finite).
	Prior float64
}

// BestHinge searches the onset of the hinge model (Hinge) with the highest
// likelihood over the bucket boundaries that search allows, then refines it
// to a quarter of a bucket around the best boundary; false when no onset
// gives a rising fit.
func (s Series) BestHinge(search HingeSearch) (HingeResult, bool) {
	n := len(s.T)
	var kTot, bTot float64
	for i := 0; i < n; i++ {
		kTot += s.K[i]
		bTot += s.B[i]
	}
	kTot += search.Prior

	first, last := search.MinBefore, n-search.MinAfter
	best := HingeResult{LR: math.Inf(-1)}
	try := func(tau float64, from int) {
		r := Hinge(s.T, s.K, s.B, from, tau, kTot, bTot)
		if r.From >= first && r.From <= last && r.Slope > 0 && r.LR > best.LR {
			best = r
		}
	}
	for j := first; j <= last; j += search.CoarseStep {
		try(s.T[j]-0.5, j)
	}
	if math.IsInf(best.LR, -1) {
		return best, false
	}
	center := best.From
	for j := max(first, center-search.RefineReach); j <= min(last, center+search.RefineReach); j++ {
		if j != center {
			try(s.T[j]-0.5, j)
		}
	}
	// Sub-bucket onset around the best boundary.
	tau0 := best.Tau
	for _, off := range []float64{-0.75, -0.5, -0.25, 0.25, 0.5, 0.75} {
		try(tau0+off, best.From)
	}
	return best, true
}

// DispersionRule is how HingeDispersion weighs the buckets.
type DispersionRule struct {
	// MinMean: a bucket counts when the model expects at least this many
	// events (Pearson residuals are near normal from about 5).
	MinMean float64
	// Neighbour: two counted buckets closer than this (in T) are
	// neighbours for the lag-1 autocorrelation; a gap breaks the chain.
	Neighbour float64
	// MinBuckets: counted buckets needed to estimate anything; below, the
	// dispersion is 1.
	MinBuckets int
	// Params: the model's parameters, the degrees of freedom the Pearson
	// sum loses.
	Params int
	// MaxRho caps the autocorrelation.
	MaxRho float64
}

// HingeDispersion is the overdispersion of the series under the fitted
// hinge model h (Pearson): quasi-Poisson, at least 1. A rate that also
// wanders slowly makes neighbouring buckets' residuals agree, and n
// correlated buckets weigh like fewer independent ones: the lag-1
// autocorrelation rho of the residuals inflates the dispersion by
// (1+rho)/(1-rho), the AR(1) variance factor of a mean, so a slow wander
// is not read as a significant trend. It also counts the events, and the
// buckets with events, from the onset on.
func (s Series) HingeDispersion(h HingeResult, rule DispersionRule) (dispersion, postEvents float64, postBuckets int) {
	dispersion = 1
	var pearson, rr, r2 float64
	busyN := 0
	prevR, prevT := 0.0, math.Inf(-1)
	for i := range s.T {
		mu := s.B[i] * math.Exp(h.A+h.Slope*max(0, s.T[i]-h.Tau))
		if mu >= rule.MinMean {
			r := (s.K[i] - mu) / math.Sqrt(mu)
			pearson += r * r
			r2 += r * r
			if s.T[i]-prevT < rule.Neighbour {
				rr += r * prevR
			}
			prevR, prevT = r, s.T[i]
			busyN++
		}
		if i >= h.From {
			postEvents += s.K[i]
			if s.K[i] > 0 {
				postBuckets++
			}
		}
	}
	if busyN >= rule.MinBuckets {
		dispersion = max(1, pearson/float64(max(1, busyN-rule.Params)))
		rho := min(rule.MaxRho, max(0, rr/r2))
		dispersion *= (1 + rho) / (1 - rho)
	}
	return dispersion, postEvents, postBuckets
}

// Wander is the robust spread (RobustSpread) of the log rate ln(K/B) of
// the buckets before from that hold at least minEvents events (below that,
// Poisson noise dominates); 0 with fewer than minBuckets such buckets.
func (s Series) Wander(from int, minEvents float64, minBuckets int) float64 {
	v := make([]float64, 0, from)
	for i := 0; i < from; i++ {
		if s.K[i] >= minEvents {
			v = append(v, math.Log(s.K[i]/s.B[i]))
		}
	}
	if len(v) < minBuckets {
		return 0
	}
	return RobustSpread(v)
}

// BeyondOneBurst reports whether the rise from the first bucket with
// events at or after from still stands without its single worst bucket: the
// rest must exceed the rate before it (with doubt events of benefit of the
// doubt) minRise times, and be unlikely under it (PoissonTail below maxP,
// not counting the event that chose the start). One burst (a retrain, a
// reseat) dumps its events into one bucket; a drift spreads them. True with
// no history before the start: other tests decide.
func (s Series) BeyondOneBurst(from int, minRise, doubt, maxP float64) bool {
	n := len(s.T)
	for from < n && s.K[from] == 0 {
		from++
	}
	if from >= n {
		return false
	}
	var kh, bh, kw, bw float64
	worst := from
	for i := 0; i < n; i++ {
		if i < from {
			kh += s.K[i]
			bh += s.B[i]
			continue
		}
		kw += s.K[i]
		bw += s.B[i]
		if s.K[i] > s.K[worst] {
			worst = i
		}
	}
	if bh <= 0 {
		return true
	}
	kRest, bRest := kw-s.K[worst], bw-s.B[worst]
	expect := bRest * (kh + doubt) / bh
	return kRest >= minRise*expect && PoissonTail(kRest-1, expect) < maxP
}

// RecentTrend is the Theil-Sen slope of the log rate ln(K/B) over the
// latest (at most maxBuckets) buckets from from on that hold at least
// minEvents events; ok is false with fewer than minBuckets of them.
func (s Series) RecentTrend(from int, minEvents float64, minBuckets, maxBuckets int) (slope float64, ok bool) {
	xs := make([]float64, 0, maxBuckets)
	ys := make([]float64, 0, maxBuckets)
	for i := len(s.T) - 1; i >= from && len(xs) < maxBuckets; i-- {
		if s.K[i] < minEvents {
			continue
		}
		xs = append(xs, s.T[i])
		ys = append(ys, math.Log(s.K[i]/s.B[i]))
	}
	if len(xs) < minBuckets {
		return 0, false
	}
	slopes := make([]float64, maxBuckets*(maxBuckets-1)/2)
	return TheilSenSlope(xs, ys, slopes), true
}

// RecentRate is the rate K/B of the buckets of the last minutes (by T,
// from the newest) with ~95% Poisson bounds; 0 without trials.
func (s Series) RecentRate(minutes int) (rate, low, high float64) {
	n := len(s.T)
	if n == 0 {
		return 0, 0, 0
	}
	var k, b float64
	tEnd := s.T[n-1]
	for i := n - 1; i >= 0 && s.T[i] > tEnd-float64(minutes); i-- {
		k += s.K[i]
		b += s.B[i]
	}
	if b <= 0 {
		return 0, 0, 0
	}
	return k / b, PoissonLow(k) / b, PoissonHigh(k) / b
}

// RecentMedian is the median rate K/B of the newest buckets (at most
// buckets, and at most 8).
func (s Series) RecentMedian(buckets int) float64 {
	var v [8]float64
	m := 0
	for i := len(s.T) - 1; i >= 0 && m < buckets && m < len(v); i-- {
		v[m] = s.K[i] / s.B[i]
		m++
	}
	return Median(v[:m])
}
