package processor

import (
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestBucketsGroupIndependent: the windows of a group share one array but
// behave as windows made one by one, each on its own: what is added to one,
// and a slide of one, leaves the others as they were.
func TestBucketsGroupIndependent(t *testing.T) {
	const n, width = 4, 10 * time.Second
	g := NewBucketsGroup(3, n, width)
	alone := []*Buckets{NewBuckets(n, width), NewBuckets(n, width), NewBuckets(n, width)}
	steps := []struct {
		w int
		t schemas.Millis
		v float64
	}{
		{0, 5_000, 1}, {1, 5_000, 2}, {2, 5_000, 4},
		{0, 15_000, 8},
		{1, 95_000, 16}, // slides window 1 past everything it held
		{2, 25_000, 32},
		{0, 35_000, 64},
		{2, 39_999, 128},
	}
	for i, st := range steps {
		g[st.w].Add(st.t, st.v)
		alone[st.w].Add(st.t, st.v)
		for w := range g {
			for from := schemas.Millis(0); from <= 100_000; from += 10_000 {
				if got, want := g[w].Sum(from, from+40_000), alone[w].Sum(from, from+40_000); got != want {
					t.Fatalf("after step %d: window %d sums %v over [%d, %d), alone %v", i, w, got, from, from+40_000, want)
				}
			}
		}
	}
	if g[0].Span() != n*width {
		t.Errorf("span %v, want %v", g[0].Span(), n*width)
	}
}
