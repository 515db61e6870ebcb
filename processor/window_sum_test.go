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

func TestBuckets(t *testing.T) {
	b := NewBuckets(4, time.Minute)
	b.Add(at(0), 1)
	b.Add(at(61), 2)
	b.Add(at(125), 3)
	if s := b.Sum(at(0), at(240)); s != 6 {
		t.Fatalf("sum %v", s)
	}
	b.Add(at(300), 10) // slides past minute 0 and 1
	if s := b.Sum(at(0), at(400)); s != 13 {
		t.Fatalf("after slide %v", s)
	}
	b.Add(at(0), 100) // older than the window: dropped
	if s := b.Sum(at(0), at(400)); s != 13 {
		t.Fatalf("old value counted: %v", s)
	}
	b.Add(at(5000), 1) // far ahead: everything cleared
	if s := b.Sum(at(0), at(6000)); s != 1 {
		t.Fatalf("after jump %v", s)
	}
}
