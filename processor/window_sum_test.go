package processor

import (
	"math/rand"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// sumNaive is the definition of Buckets.Sum: every bucket whose start lies
// in [from, to), oldest first.
func sumNaive(b *Buckets, from, to schemas.Millis) float64 {
	var s float64
	for i := range b.sums {
		t := b.start + schemas.Millis(int64(i)*b.widthMs)
		if t >= from && t < to {
			s += float64(b.sums[(b.head+i)%len(b.sums)])
		}
	}
	return s
}

func TestBucketsSumMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := range 200 {
		n := 1 + rng.Intn(20)
		width := time.Duration(1+rng.Intn(10_000)) * time.Millisecond
		b := NewBuckets(n, width)
		now := schemas.Millis(rng.Int63n(1e12)) - 5e11
		for range 50 {
			now += schemas.Millis(rng.Int63n(3 * width.Milliseconds()))
			b.Add(now-schemas.Millis(rng.Int63n(int64(n)*width.Milliseconds()+1)), rng.Float64()*1000)
			span := int64(n+4) * width.Milliseconds()
			from := now - schemas.Millis(rng.Int63n(2*span)) + schemas.Millis(span/2)
			to := from + schemas.Millis(rng.Int63n(2*span)) - schemas.Millis(span/4)
			if got, want := b.Sum(from, to), sumNaive(b, from, to); got != want {
				t.Fatalf("trial %d: Sum(%d, %d) = %v, want %v", trial, from, to, got, want)
			}
		}
	}
}
