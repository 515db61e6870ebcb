package engine

import (
	"math/rand"
	"slices"
	"testing"
	"time"
)

func TestLatenessAdaptsToInterval(t *testing.T) {
	tests := []struct {
		name      string
		cfg       time.Duration
		intervals []int64
		want      int64 // ms
	}{
		{"nothing seen yet", 0, nil, 10_000},
		{"baselines only", 0, []int64{0, 0, 0}, 10_000},
		{"1 s fleet", 0, []int64{1000, 1010, 990, 1000, 1005}, 1100},
		// A gap gives one sample an interval of several; the median ignores it.
		{"1 s fleet with a gap", 0, []int64{1000, 1000, 4000, 1000, 1000}, 1100},
		{"10 s fleet", 0, []int64{10_000, 10_020, 9980}, 11_000},
		{"configured", 3 * time.Second, []int64{1000, 1000}, 3000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Processor{cfg: Config{AllowedLateness: tt.cfg}}
			for _, iv := range tt.intervals {
				p.intervals.observe(iv)
			}
			if got := int64(p.lateness()); got != tt.want {
				t.Errorf("lateness %d ms, want %d", got, tt.want)
			}
			if got, want := int64(p.tick()), max(100, min(1000, tt.want/4)); got != want {
				t.Errorf("tick %d ms, want %d", got, want)
			}
		})
	}
}

func TestIntervalEstimatorFollowsAChange(t *testing.T) {
	var e intervalEstimator
	for range 100 {
		e.observe(5000)
	}
	for range 100 {
		e.observe(1000)
	}
	if e.median != 1000 {
		t.Errorf("median %d after the fleet moved to 1 s", e.median)
	}
}

// The estimator keeps its values sorted as they come; the median must be
// the one a sort of the ring gives, at the same samples.
func TestIntervalEstimatorMatchesSort(t *testing.T) {
	var e intervalEstimator
	var ring [64]int64
	median := int64(0)
	rng := rand.New(rand.NewSource(3))
	for n := 0; n < 5000; n++ {
		v := []int64{1000, 1000, 1000, 5000, 10_000, 999, 1001, 2000}[rng.Intn(8)]
		if n > 2500 {
			v = 1000 + rng.Int63n(30)
		}
		e.observe(v)
		ring[n%64] = v
		if n+1 < 16 || (n+1)%16 == 0 {
			k := min(n+1, 64)
			buf := append([]int64(nil), ring[:k]...)
			slices.Sort(buf)
			median = buf[k/2]
		}
		if e.median != median {
			t.Fatalf("after %d values: median %d, want %d", n+1, e.median, median)
		}
	}
}
