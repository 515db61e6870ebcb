package runtime

import (
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
