package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/pipeline"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sim"
)

// release is when a reading was handed to the collector.
type release struct {
	dataMs int64
	wall   time.Time
}

// releaseSource wraps the simulated fleet, recording when each node's
// reading was released (the start of its sample-to-event latency) and how
// far the release is behind the real time its data time maps to.
type releaseSource struct {
	*sim.Source
	mu     sync.Mutex
	byNode map[string][]release
	all    []release
	w0     time.Time
	d0     int64
	behind atomic.Int64 // ns, of the newest release
	worst  atomic.Int64 // ns, the largest since the last take
}

func (s *releaseSource) Next(ctx context.Context) (*collector.Reading, error) {
	r, err := s.Source.Next(ctx)
	if err != nil || r == nil {
		return r, err
	}
	now := time.Now()
	ms := r.Time.UnixMilli()
	s.mu.Lock()
	if s.w0.IsZero() {
		s.w0, s.d0 = now, ms
	}
	rel := release{dataMs: ms, wall: now}
	s.byNode[r.Node] = append(s.byNode[r.Node], rel)
	s.all = append(s.all, rel)
	behind := now.Sub(s.w0.Add(time.Duration(ms-s.d0) * time.Millisecond))
	s.mu.Unlock()
	s.behind.Store(int64(behind))
	for {
		w := s.worst.Load()
		if int64(behind) <= w || s.worst.CompareAndSwap(w, int64(behind)) {
			break
		}
	}
	return r, nil
}

// released returns the wall time the first reading with data time >= ms
// was released: of node's readings, or of all readings when node has none
// (a fabric subject, or an event decided by another node's sample: a
// storm's spread, the watermark).
func (s *releaseSource) released(node string, ms int64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, list := range [][]release{s.byNode[node], s.all} {
		if i := sort.Search(len(list), func(i int) bool { return list[i].dataMs >= ms }); i < len(list) {
			return list[i].wall, true
		}
	}
	return time.Time{}, false
}

// second is one line of the per-second report.
type second struct {
	at                   time.Duration // since the start of the measured window
	published, processed float64       // port samples per second
	lag                  time.Duration
	backlog              uint64 // batches
	sinkPending          uint64 // messages
	behind               time.Duration
	events               uint64
}

// trial is one measured run: what the pipeline's callbacks record, and the
// CPU used in the measured window.
type trial struct {
	f      flags
	log    *slog.Logger
	stdout io.Writer
	src    *releaseSource
	cancel context.CancelFunc
	js     jetstream.JetStream

	mu        sync.Mutex
	latencies []time.Duration
	unmatched int
	seconds   []second
	prev      pipeline.Progress

	t0        time.Time
	timer     *time.Timer
	cpu0      syscall.Rusage
	sys0      cpuTimes
	profiling bool
	endOnce   sync.Once
	cpuWall   time.Duration
	cpuSelf   time.Duration
	sysBusy   float64
}

// startWindow starts the measured window (and the profile) once the
// pipeline is up; it ends after the duration, by cancelling the run.
func (t *trial) startWindow(js jetstream.JetStream) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.js = js
	if t.f.cpuProfile != "" {
		pf, err := os.Create(t.f.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			pf.Close()
			return err
		}
		t.profiling = true
	}
	t.t0 = time.Now()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &t.cpu0)
	t.sys0 = readCPUTimes()
	t.timer = time.AfterFunc(t.f.duration, t.endWindow)
	return nil
}

func (t *trial) endWindow() {
	t.endOnce.Do(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.timer != nil {
			t.timer.Stop()
		}
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		t.cpuWall = time.Since(t.t0)
		t.cpuSelf = rusageCPU(&ru) - rusageCPU(&t.cpu0)
		t.sysBusy = readCPUTimes().busySince(t.sys0)
		if t.profiling {
			pprof.StopCPUProfile()
		}
		t.cancel()
	})
}

func (t *trial) event(ev *schemas.Event) {
	arrived := time.Now()
	rel, ok := t.src.released(ev.Subject.Node, int64(ev.DetectedAt))
	t.mu.Lock()
	defer t.mu.Unlock()
	if !ok {
		t.unmatched++
		t.log.Warn("bench-e2e: no released reading at the event's data time", "id", ev.ID, "state", ev.State,
			"subject", ev.Subject.String(), "detected_at", ev.DetectedAt.Time())
		return
	}
	t.latencies = append(t.latencies, arrived.Sub(rel))
}

// sinkPending is the sink's counters consumer backlog: not yet delivered
// plus not yet acknowledged.
func (t *trial) sinkPending(js jetstream.JetStream) uint64 {
	if js == nil || t.f.clickhouse == "" {
		return 0
	}
	qctx, qc := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer qc()
	c, err := js.Consumer(qctx, schemas.StreamCounters, "rdmawatch-sink-counters")
	if err != nil {
		return 0
	}
	info, err := c.Info(qctx)
	if err != nil {
		return 0
	}
	return info.NumPending + uint64(info.NumAckPending)
}

func (t *trial) progress(p pipeline.Progress) {
	t.mu.Lock()
	js, t0, ended := t.js, t.t0, t.cpuWall > 0
	t.mu.Unlock()
	if p.Wall == 0 || t0.IsZero() || ended {
		return // before the window, or the run's closing total
	}
	s := second{at: time.Since(t0), lag: p.Lag(), backlog: p.Backlog, sinkPending: t.sinkPending(js),
		behind: time.Duration(t.src.worst.Swap(0)), events: p.Events}
	t.mu.Lock()
	if dt := (p.Wall - t.prev.Wall).Seconds(); dt > 0 {
		s.published = float64(p.Samples-t.prev.Samples) / dt
		s.processed = float64(p.ProcessedSamples-t.prev.ProcessedSamples) / dt
	}
	t.prev = p
	t.seconds = append(t.seconds, s)
	t.mu.Unlock()
	fmt.Fprintf(t.stdout, "%6s %10.0f %10.0f %8s %8d %8d %8s %7d\n", s.at.Round(time.Second), s.published, s.processed,
		s.lag.Round(10*time.Millisecond), s.backlog, s.sinkPending, s.behind.Round(10*time.Millisecond), s.events)
}
