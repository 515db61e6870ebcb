package stats

import (
	"math"
	"testing"
)

// TestRateTest: the comparison of a window's events with the history's,
// by the conditional binomial test of two Poisson rates.
func TestRateTest(t *testing.T) {
	tests := []struct {
		name          string
		k, b, kh, bh  float64
		wantLo, wantH float64 // P within [wantLo, wantH]
	}{
		// No events in the history: P = (b/(b+bh))^k, no prior needed.
		{"4 errors in 5 min after 58 silent", 4, 5, 0, 58, 3.9e-5, 4.0e-5},
		{"7 errors in 6 min after 58 silent", 7, 6, 0, 58, 6.3e-8, 6.4e-8},
		// A short silent history cannot make a slow trickle significant.
		{"14 errors in 67 min after 30 silent", 13, 67, 0, 30, 0.005, 0.02},
		// The same rate in window and history: nothing.
		{"same rate", 10, 10, 60, 60, 1, 1},
		{"below the history's rate", 2, 10, 30, 60, 1, 1},
		// A rise against a history with events.
		{"5x the history's rate", 25, 10, 30, 60, 1e-9, 1e-6},
		{"no errors", 0, 10, 0, 60, 1, 1},
	}
	for _, tc := range tests {
		got := RateTest(tc.k, tc.b, tc.kh, tc.bh)
		if got < tc.wantLo || got > tc.wantH {
			t.Errorf("%s: P %.3g, want in [%g, %g]", tc.name, got, tc.wantLo, tc.wantH)
		}
	}
}

func TestBinomialTail(t *testing.T) {
	tests := []struct {
		name    string
		k, n, p float64
		want    float64
	}{
		{"k=0 is certain", 0, 10, 0.5, 1},
		{"k above n is impossible", 11, 10, 0.5, 0},
		{"p=0", 1, 10, 0, 0},
		{"p=1", 3, 10, 1, 1},
		{"at the mean", 5, 10, 0.5, 1},
		{"all heads of 10", 10, 10, 0.5, math.Pow(0.5, 10)},
		{"9 or 10 of 10", 9, 10, 0.5, 11 * math.Pow(0.5, 10)},
		{"3 of 3 at p=0.1", 3, 3, 0.1, 1e-3},
	}
	for _, tc := range tests {
		if got := BinomialTail(tc.k, tc.n, tc.p); math.Abs(got-tc.want) > 1e-12*max(1, tc.want) {
			t.Errorf("%s: BinomialTail(%g, %g, %g) = %.6g, want %.6g", tc.name, tc.k, tc.n, tc.p, got, tc.want)
		}
	}
}

func TestPoissonTail(t *testing.T) {
	tests := []struct {
		name         string
		k, mu        float64
		wantLo, want float64 // within [wantLo, want]
	}{
		{"k=0 is certain", 0, 3, 1, 1},
		{"mu=0", 1, 0, 0, 0},
		// P(X>=1 | mu=1) = 1 - e^-1.
		{"one event at mu=1", 1, 1, 1 - math.Exp(-1) - 1e-9, 1 - math.Exp(-1) + 1e-9},
		// P(X>=3 | mu=0.1) = 1 - e^-0.1 (1 + 0.1 + 0.005) ~ 1.547e-4.
		{"3 events at mu=0.1", 3, 0.1, 1.546e-4, 1.548e-4},
		// Below the mean the normal approximation answers: most of the mass.
		{"below the mean", 5, 20, 0.99, 1},
	}
	for _, tc := range tests {
		if got := PoissonTail(tc.k, tc.mu); got < tc.wantLo || got > tc.want {
			t.Errorf("%s: PoissonTail(%g, %g) = %.6g, want in [%g, %g]", tc.name, tc.k, tc.mu, got, tc.wantLo, tc.want)
		}
	}
}

func TestPoissonBounds(t *testing.T) {
	tests := []struct {
		k                        float64
		lowLo, lowHi, hiLo, hiHi float64
	}{
		// Exact 95% (Garwood) bounds: 0 -> [0, 3.69], 10 -> [4.80, 18.39], 100 -> [81.4, 121.6].
		{0, 0, 0, 3.6, 3.8},
		{10, 4.7, 4.9, 18.2, 18.5},
		{100, 81, 82, 121, 122.5},
	}
	for _, tc := range tests {
		lo, hi := PoissonLow(tc.k), PoissonHigh(tc.k)
		if lo < tc.lowLo || lo > tc.lowHi || hi < tc.hiLo || hi > tc.hiHi {
			t.Errorf("k=%g: bounds [%.3g, %.3g], want [%g..%g, %g..%g]", tc.k, lo, hi, tc.lowLo, tc.lowHi, tc.hiLo, tc.hiHi)
		}
	}
}

func TestMedianSpreadSlope(t *testing.T) {
	tests := []struct {
		name   string
		v      []float64
		median float64
		spread float64
	}{
		{"empty", nil, 0, 0},
		{"odd", []float64{3, 1, 2}, 2, 1.4826},
		{"even", []float64{4, 1, 3, 2}, 2.5, 1.4826},
		{"constant", []float64{5, 5, 5, 5}, 5, 0},
	}
	for _, tc := range tests {
		if got := Median(append([]float64(nil), tc.v...)); got != tc.median {
			t.Errorf("%s: Median %g, want %g", tc.name, got, tc.median)
		}
		if got := RobustSpread(append([]float64(nil), tc.v...)); math.Abs(got-tc.spread) > 1e-12 {
			t.Errorf("%s: RobustSpread %g, want %g", tc.name, got, tc.spread)
		}
	}
	xs := []float64{0, 1, 2, 3, 4}
	ys := []float64{0, 2, 4, 100, 8} // one outlier: Theil-Sen keeps slope 2
	if got := TheilSenSlope(xs, ys, make([]float64, 10)); got != 2 {
		t.Errorf("TheilSenSlope %g, want 2", got)
	}
}

// TestHinge: a flat rate that starts rising at a known onset is found with
// its slope and level; a flat rate shows no significant rise.
func TestHinge(t *testing.T) {
	const n = 60
	tests := []struct {
		name      string
		onset     float64
		slope     float64
		base      float64
		wantSlope float64 // within 10%
		wantLRMin float64
		wantLRMax float64
	}{
		{"rise from minute 40", 40, 0.2, 1e-6, 0.2, 100, math.Inf(1)},
		{"flat", 1e9, 0, 1e-6, 0, -1, 1},
	}
	for _, tc := range tests {
		ts, k, b := make([]float64, n), make([]float64, n), make([]float64, n)
		var kTot, bTot float64
		for i := range n {
			ts[i] = float64(i)
			b[i] = 1e9
			k[i] = b[i] * tc.base * math.Exp(tc.slope*max(0, ts[i]-tc.onset)) // the expected count: no noise
			kTot += k[i]
			bTot += b[i]
		}
		tau := min(tc.onset, 40)
		r := Hinge(ts, k, b, 0, tau, kTot, bTot)
		if r.From != int(tau)+1 {
			t.Errorf("%s: From %d, want %d", tc.name, r.From, int(tau)+1)
		}
		if math.Abs(r.Slope-tc.wantSlope) > 0.1*max(tc.wantSlope, 0.01) {
			t.Errorf("%s: slope %g, want %g", tc.name, r.Slope, tc.wantSlope)
		}
		if r.LR < tc.wantLRMin || r.LR > tc.wantLRMax {
			t.Errorf("%s: LR %g, want in [%g, %g]", tc.name, r.LR, tc.wantLRMin, tc.wantLRMax)
		}
		if base := math.Exp(r.A); math.Abs(base/tc.base-1) > 0.05 {
			t.Errorf("%s: base %g, want %g", tc.name, base, tc.base)
		}
	}
	// Too few points after the onset: no fit.
	if r := Hinge([]float64{0, 1, 2}, []float64{1, 1, 1}, []float64{1, 1, 1}, 0, 1, 3, 3); !math.IsInf(r.LR, -1) {
		t.Errorf("short window: LR %g, want -Inf", r.LR)
	}
}
