package stats

import (
	"math"
	"testing"
)

// series makes a Series of one-minute buckets at minutes 0.5, 1.5, ... with
// b trials each and the given counts.
func series(b float64, k ...float64) Series {
	s := Series{T: make([]float64, len(k)), K: k, B: make([]float64, len(k))}
	for i := range k {
		s.T[i], s.B[i] = float64(i)+0.5, b
	}
	return s
}

// ramp is 60 flat buckets at rate 1e-9 of 1e10 trials (10 events each),
// then rising by e^0.1 a bucket for 30 buckets: the shape of a drifting
// link's BER.
func ramp() Series {
	k := make([]float64, 90)
	for i := range k {
		k[i] = 10
		if i >= 60 {
			k[i] = math.Round(10 * math.Exp(0.1*float64(i-60)))
		}
	}
	return series(1e10, k...)
}

func TestSeriesRecent(t *testing.T) {
	s := series(100, 1, 2, 3, 4, 50)
	tests := []struct {
		name        string
		minutes     int
		rate        float64
		median      float64
		medianCount int
	}{
		{"the newest bucket", 1, 0.5, 0.5, 1},
		{"the newest three", 3, 57.0 / 300, 0.04, 3},
		{"more than the series", 10, 60.0 / 500, 0.03, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rate, low, high := s.RecentRate(tt.minutes)
			if math.Abs(rate-tt.rate) > 1e-12 || !(low < rate && rate < high) {
				t.Errorf("RecentRate(%d) = %v [%v, %v], want %v inside its bounds", tt.minutes, rate, low, high, tt.rate)
			}
			if got := s.RecentMedian(tt.medianCount); math.Abs(got-tt.median) > 1e-12 {
				t.Errorf("RecentMedian(%d) = %v, want %v", tt.medianCount, got, tt.median)
			}
		})
	}
	var empty Series
	if r, l, h := empty.RecentRate(5); r != 0 || l != 0 || h != 0 {
		t.Errorf("RecentRate of no buckets = %v %v %v, want zeros", r, l, h)
	}
	if got := empty.RecentMedian(3); got != 0 {
		t.Errorf("RecentMedian of no buckets = %v, want 0", got)
	}
}

func TestSeriesBestHinge(t *testing.T) {
	s := ramp()
	search := HingeSearch{MinBefore: 30, MinAfter: 3, CoarseStep: 3, RefineReach: 2, Prior: 0.5}
	h, ok := s.BestHinge(search)
	if !ok || math.Abs(h.Tau-60) > 1.5 || math.Abs(h.Slope-0.1) > 0.02 {
		t.Fatalf("BestHinge = %+v %v, want an onset near minute 60 rising by about 0.1 a minute", h, ok)
	}
	flat := series(1e10, make([]float64, 90)...)
	for i := range flat.K {
		flat.K[i] = 10
	}
	if h, ok := flat.BestHinge(search); ok && h.Slope > 0.01 {
		t.Errorf("a flat series has a rising hinge: %+v", h)
	}
	if _, ok := series(1e10, 1, 2, 3).BestHinge(search); ok {
		t.Error("a series shorter than MinBefore+MinAfter has an onset")
	}

	rule := DispersionRule{MinMean: 5, Neighbour: 1.5, MinBuckets: 5, Params: 3, MaxRho: 0.9}
	phi, post, postBuckets := s.HingeDispersion(h, rule)
	if phi < 1 || phi > 3 {
		t.Errorf("HingeDispersion of a Poisson-like ramp = %v, want near 1", phi)
	}
	var want float64
	for i := h.From; i < len(s.K); i++ {
		want += s.K[i]
	}
	if post != want || postBuckets != len(s.K)-h.From {
		t.Errorf("events from the onset %v over %d buckets, want %v over %d", post, postBuckets, want, len(s.K)-h.From)
	}
	if phi, _, _ := series(1e10, 10, 10).HingeDispersion(h, rule); phi != 1 {
		t.Errorf("HingeDispersion of too few buckets = %v, want 1", phi)
	}

	if slope, ok := s.RecentTrend(h.From, 20, 4, 20); !ok || math.Abs(slope-0.1) > 0.02 {
		t.Errorf("RecentTrend = %v %v, want about 0.1", slope, ok)
	}
	if _, ok := s.RecentTrend(h.From, 1e6, 4, 20); ok {
		t.Error("RecentTrend judged buckets below minEvents")
	}
}

func TestSeriesWander(t *testing.T) {
	flat := series(1e10, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100)
	if got := flat.Wander(10, 20, 8); got != 0 {
		t.Errorf("Wander of a flat series = %v, want 0", got)
	}
	// Rates of three levels a factor e apart: ln rate -1, 0 and +1 around
	// its median, so the median absolute deviation is 1.
	alt := series(1e10, 36.78794412, 100, 271.8281828, 36.78794412, 100, 271.8281828, 36.78794412, 100, 271.8281828)
	if got := alt.Wander(9, 20, 8); math.Abs(got-1.4826) > 1e-3 {
		t.Errorf("Wander of an alternating series = %v, want 1.4826 (MAD 1)", got)
	}
	if got := alt.Wander(5, 20, 8); got != 0 {
		t.Errorf("Wander with fewer than minBuckets buckets = %v, want 0", got)
	}
}

func TestSeriesBeyondOneBurst(t *testing.T) {
	tests := []struct {
		name string
		s    Series
		from int
		want bool
	}{
		{"one burst after a quiet history", series(1e10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 60, 1, 1), 10, false},
		{"errors spread over the minutes", series(1e10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 8, 9, 10, 12), 10, true},
		{"no history: the other tests decide", series(1e10, 5, 60, 5), 0, true},
		{"no events from the onset", series(1e10, 1, 1, 0, 0), 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.BeyondOneBurst(tt.from, 2, 1, 1e-3); got != tt.want {
				t.Errorf("BeyondOneBurst = %v, want %v", got, tt.want)
			}
		})
	}
}
