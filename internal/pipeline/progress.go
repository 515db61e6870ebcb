package pipeline

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmawatch/rdmawatch/collector"
)

// Progress is a snapshot of a running pipeline.
type Progress struct {
	// Published is the data time of the newest reading the source gave the
	// collector, Processed that of the newest one the processors handled.
	Published, Processed time.Time
	// Samples counts port samples read from the source; SamplesPerSec is
	// their rate since the previous snapshot.
	Samples       uint64
	SamplesPerSec float64
	// Backlog is the number of batches read but not yet processed.
	Backlog uint64
	Events  uint64
	Wall    time.Duration
	// ProcessedSamples counts port samples the processors handled.
	ProcessedSamples uint64
}

// Lag is how far processing is behind the source, in data time.
func (p Progress) Lag() time.Duration {
	if p.Processed.IsZero() || p.Published.IsZero() {
		return 0
	}
	return max(0, p.Published.Sub(p.Processed))
}

// trackingSource remembers the data time of each reading that carries
// ports, in order: with one publisher, the n-th counters message is the n-th
// such reading, so the processors' message count gives the data time they
// have reached. (A trace reading made only of duplicates publishes nothing
// and skews this a little; the simulator never sends one.)
type trackingSource struct {
	collector.Source
	mu      sync.Mutex
	times   []int64 // unix ms, one per reading with ports
	samples atomic.Uint64
}

func (t *trackingSource) Next(ctx context.Context) (*collector.Reading, error) {
	r, err := t.Source.Next(ctx)
	if err == nil && r != nil && len(r.Ports) > 0 {
		t.samples.Add(uint64(len(r.Ports)))
		t.mu.Lock()
		t.times = append(t.times, r.Time.UnixMilli())
		t.mu.Unlock()
	}
	return r, err
}

// at returns the data time of the n-th reading (1-based) and how many
// readings there are.
func (t *trackingSource) at(n uint64) (time.Time, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	total := uint64(len(t.times))
	if n == 0 || total == 0 {
		return time.Time{}, total
	}
	n = min(n, total)
	return time.UnixMilli(t.times[n-1]).UTC(), total
}

func (t *trackingSource) newest() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.times) == 0 {
		return time.Time{}
	}
	return time.UnixMilli(t.times[len(t.times)-1]).UTC()
}

// Progress returns a snapshot; prev, when given, is the previous one, from
// which the rate is computed.
func (p *Pipeline) Progress(prev *Progress) Progress {
	var processed, samples uint64
	for _, proc := range p.procs {
		processed += proc.Processed()
		samples += proc.Stats().Samples
	}
	pt, total := p.src.at(processed)
	s := Progress{Published: p.src.newest(), Processed: pt, Samples: p.src.samples.Load(),
		Events: p.events.count(), Wall: time.Since(p.start), ProcessedSamples: samples}
	if total > processed {
		s.Backlog = total - processed
	}
	if prev != nil && s.Wall > prev.Wall {
		s.SamplesPerSec = float64(s.Samples-prev.Samples) / (s.Wall - prev.Wall).Seconds()
	}
	return s
}

// startProgress calls OnProgress every ProgressEvery until the returned
// function is called, which calls it a last time with the whole run's rate.
func (p *Pipeline) startProgress() (stop func()) {
	if p.cfg.OnProgress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(p.cfg.ProgressEvery)
		defer t.Stop()
		prev := p.Progress(nil)
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			s := p.Progress(&prev)
			p.cfg.OnProgress(s)
			prev = s
		}
	})
	return func() {
		close(done)
		wg.Wait()
		p.cfg.OnProgress(p.Progress(&Progress{}))
	}
}
