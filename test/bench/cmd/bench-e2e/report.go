package main

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"
)

// warmUp: the first seconds fill the pipeline (the processors learn the
// interval, the sink's first flushes); they are left out of the windows.
const warmUp = 10 * time.Second

// window sums up seconds of the trial.
type window struct {
	n                          int
	pub, proc, rows            float64
	lagMean, lagMax, behindMax time.Duration
	procPendMean, sinkPendMean float64
	procPendMax, sinkPendMax   uint64
	cpu                        []float64 // mean cores per role
	rssMax                     []int
	loadMean                   float64
	insertBusy, inserts        float64 // per second
}

func summarise(ss []second) window {
	a := window{n: len(ss), cpu: make([]float64, len(roles)), rssMax: make([]int, len(roles))}
	if len(ss) == 0 {
		return a
	}
	n := float64(len(ss))
	for _, s := range ss {
		a.pub += s.published / n
		a.proc += s.processed / n
		a.rows += s.rows / n
		a.lagMean += s.procLag / time.Duration(len(ss))
		a.lagMax = max(a.lagMax, s.procLag)
		a.behindMax = max(a.behindMax, s.behind)
		a.procPendMean += float64(s.procPending) / n
		a.sinkPendMean += float64(s.sinkPending) / n
		a.procPendMax = max(a.procPendMax, s.procPending)
		a.sinkPendMax = max(a.sinkPendMax, s.sinkPending)
		a.loadMean += s.load1 / n
		a.insertBusy += s.insertBusy / n
		a.inserts += s.inserts / n
		for i := range roles {
			if i < len(s.cpu) {
				a.cpu[i] += s.cpu[i] / n
				a.rssMax[i] = max(a.rssMax[i], s.rss[i])
			}
		}
	}
	return a
}

// windows splits the steady seconds (after warmUp) into the first and the
// last window of length win.
func windows(seconds []second, duration time.Duration) (steady, first, last []second, win time.Duration) {
	for _, s := range seconds {
		if s.at >= warmUp {
			steady = append(steady, s)
		}
	}
	if len(steady) == 0 {
		return nil, nil, nil, 0
	}
	win = min(time.Minute, (duration-warmUp)/4)
	end := steady[len(steady)-1].at
	for _, s := range steady {
		if s.at < warmUp+win {
			first = append(first, s)
		}
		if s.at > end-win {
			last = append(last, s)
		}
	}
	return steady, first, last, win
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// verdict is the rule of e2e-max-ports in BENCHMARKS.md: a trial holds when the
// generator kept the pace, the backlogs and the lag stayed flat (the last
// window's mean within one interval of the first window's maximum),
// everything was processed and stored within the drain grace, ClickHouse
// holds every sample once, and the probes' p99 stayed under maxP99.
type verdict struct {
	holds   bool
	reasons []string // why not, stage first
}

type verdictInput struct {
	first, last, all window
	perInterval      float64 // messages published per interval
	interval         time.Duration
	drained          bool
	flapP99          time.Duration
	flaps            int
	maxP99           time.Duration
	withSink         bool
	sinks            int
	published, rows  uint64
	rowsErr          error
}

func judge(in verdictInput) verdict {
	var why []string
	a, b := in.first, in.last
	if in.all.behindMax > in.interval {
		why = append(why, fmt.Sprintf("load generator: up to %s behind its schedule (this process or nats-server could not take the publishes; the stages saw less than the load)", in.all.behindMax.Round(time.Millisecond)))
	}
	// Growing: the last window's mean is above everything the first window
	// saw, by more than an interval's worth. A backlog that swings with the
	// sink's flushes (or the processors' scheduling) but comes back is flat.
	if b.lagMean > a.lagMax+in.interval || b.procPendMean > float64(a.procPendMax)+in.perInterval {
		why = append(why, fmt.Sprintf("processor: falls behind (lag %s -> %s, backlog %.0f -> %.0f messages, first -> last window; %.2f cores)",
			a.lagMean.Round(10*time.Millisecond), b.lagMean.Round(10*time.Millisecond), a.procPendMean, b.procPendMean, b.cpu[roleIndex("processor")]))
	}
	if in.withSink && b.sinkPendMean > float64(a.sinkPendMax)+in.perInterval {
		why = append(why, fmt.Sprintf("sink into ClickHouse: falls behind (backlog %.0f -> %.0f messages; stores %.0f of %.0f rows/s; sink %.2f cores, in INSERTs %.0f%% of the time; ClickHouse %.2f cores)",
			a.sinkPendMean, b.sinkPendMean, b.rows, b.pub, b.cpu[roleIndex("sink")], 100*b.insertBusy/float64(in.sinks), b.cpu[roleIndex("clickhouse")]))
	}
	if !in.drained {
		why = append(why, "drain: not everything published was processed and stored within the drain grace")
	}
	if in.withSink && in.rowsErr == nil && in.rows != in.published {
		why = append(why, fmt.Sprintf("storage: ClickHouse holds %d port_samples rows (FINAL) of %d published", in.rows, in.published))
	}
	switch {
	case in.flaps == 0:
		why = append(why, "latency: no link-flap probe came back as an event")
	case in.flapP99 >= in.maxP99:
		why = append(why, fmt.Sprintf("latency: p99 %s, not under %s", in.flapP99.Round(time.Millisecond), in.maxP99))
	}
	return verdict{holds: len(why) == 0, reasons: why}
}

// printLine prints the progress over the seconds of acc.
func (t *trial) printLine(acc []second) {
	w := summarise(acc)
	last := acc[len(acc)-1]
	var events uint64
	for _, s := range acc {
		events += s.events
	}
	cores := make([]string, len(roles))
	for i := range roles {
		cores[i] = fmt.Sprintf("%.2f", w.cpu[i])
	}
	fmt.Fprintf(t.stdout, "%6s %9.0f %9.0f %9.0f %7s %8d %8d %7d  %-31s %6.1f\n", last.at.Round(time.Second), w.pub, w.proc, w.rows,
		w.lagMax.Round(10*time.Millisecond), last.procPending, last.sinkPending, events, strings.Join(cores, "/"), last.load1)
}

// report prints the figures of the trial and its verdict.
func (t *trial) report() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, w := t.f, t.stdout
	steady, first, last, win := windows(t.seconds, f.duration)
	if len(steady) < 4 {
		return fmt.Errorf("only %d steady seconds measured; run longer than %s", len(steady), warmUp+4*time.Second)
	}
	a, b, all := summarise(first), summarise(last), summarise(steady)
	sort.Slice(t.flapLat, func(i, j int) bool { return t.flapLat[i] < t.flapLat[j] })
	sort.Slice(t.allLat, func(i, j int) bool { return t.allLat[i] < t.allLat[j] })
	perInterval := float64(t.gen.messagesPerTick())
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	ms10 := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

	fmt.Fprintln(w)
	fmt.Fprintf(w, "window: %d steady seconds (first %s left out); windows compared: first and last %s\n", len(steady), warmUp, win.Round(time.Second))
	fmt.Fprintf(w, "port samples/s: published %.0f (%d ports at 1/%s = %.0f expected), processed %.0f, stored in ClickHouse %.0f (steady means)\n",
		all.pub, f.ports, f.interval, float64(t.gen.samplesPerTick())/f.interval.Seconds(), all.proc, all.rows)
	fmt.Fprintf(w, "processor lag (wall - newest data time, max over partitions): first window mean %s max %s; last window mean %s max %s\n",
		ms10(a.lagMean), ms10(a.lagMax), ms10(b.lagMean), ms10(b.lagMax))
	fmt.Fprintf(w, "processor backlog (messages): first window mean %.0f max %d; last window mean %.0f max %d (%.0f messages per interval)\n",
		a.procPendMean, a.procPendMax, b.procPendMean, b.procPendMax, perInterval)
	if f.clickhouse != "" {
		fmt.Fprintf(w, "sink backlog (messages): first window mean %.0f max %d; last window mean %.0f max %d\n",
			a.sinkPendMean, a.sinkPendMax, b.sinkPendMean, b.sinkPendMax)
		perInsert, took := 0.0, time.Duration(0)
		if all.inserts > 0 {
			perInsert, took = all.rows/all.inserts, time.Duration(all.insertBusy/all.inserts*float64(time.Second))
		}
		fmt.Fprintf(w, "sink INSERTs into port_samples: %.2f/s of %.0f rows, %s each; a sink spends %.0f%% of its time in them (ClickHouse's time, block building included)\n",
			all.inserts, perInsert, took.Round(time.Millisecond), 100*all.insertBusy/float64(f.sinks))
		fmt.Fprintf(w, "stored: %d port_samples rows (FINAL) of %d published", t.final.rows, t.final.published)
		if t.final.err != nil {
			fmt.Fprintf(w, " (count failed: %v)", t.final.err)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "load generator behind its schedule: max %s; publish errors %d; stalls (two rounds unacknowledged for an interval) %d\n",
		ms(all.behindMax), t.gen.pubErrors.Load(), t.gen.stalls.Load())
	fmt.Fprintf(w, "drained within %s after the window: %v", f.drainGrace, t.drained)
	if t.drained {
		fmt.Fprintf(w, " (in %s)", t.drainTook.Round(100*time.Millisecond))
	}
	fmt.Fprintln(w)
	p99 := percentile(t.flapLat, 0.99)
	fmt.Fprintf(w, "sample-to-event latency, link-flap probes: %d of %d injected came back: p50 %s p99 %s max %s\n",
		len(t.flapLat), len(t.gen.flapList()), ms(percentile(t.flapLat, 0.5)), ms(p99), ms(percentile(t.flapLat, 1)))
	fmt.Fprintf(w, "data-time-to-event latency, every event (%d): p50 %s p99 %s max %s\n",
		len(t.allLat), ms(percentile(t.allLat, 0.5)), ms(percentile(t.allLat, 0.99)), ms(percentile(t.allLat, 1)))
	types := make([]string, 0, len(t.byType))
	for typ, st := range t.byType {
		types = append(types, fmt.Sprintf("%s %d/%d/%d", typ, st["open"], st["update"], st["resolved"]))
	}
	sort.Strings(types)
	fmt.Fprintf(w, "events by type (open/update/resolved): %s\n", strings.Join(types, ", "))
	// Cost per 10 000 samples/s of what each stage handled: the generator
	// and nats-server what was published, the processors what they
	// processed, the sinks and ClickHouse the rows stored. It is what
	// projects a larger fleet (on a machine as loaded as this one was).
	handled := map[string]float64{"generator": all.pub, "nats": all.pub, "processor": all.proc, "sink": all.rows, "clickhouse": all.rows}
	fmt.Fprintf(w, "%-11s %14s %14s %24s %12s\n", "stage", "cores (steady)", "cores (last)", "cores per 10k samples/s", "max RSS MiB")
	for i, r := range roles {
		if all.rssMax[i] == 0 && all.cpu[i] == 0 {
			continue
		}
		note := ""
		if r == "clickhouse" {
			note = "  (the shared server: other users' work included)"
		}
		per := "-"
		if h := handled[r]; h > 0 {
			per = fmt.Sprintf("%.3f", all.cpu[i]/(h/10000))
		}
		fmt.Fprintf(w, "%-11s %14.2f %14.2f %24s %12.0f%s\n", r, all.cpu[i], b.cpu[i], per, float64(all.rssMax[i])/(1<<20), note)
	}
	fmt.Fprintf(w, "machine: %d cores, load average (1 min) %.1f at the start, %.1f at the end, %.1f mean over the window\n",
		runtime.NumCPU(), t.load0, t.load1, all.loadMean)
	if f.storageNice != 0 {
		fmt.Fprintf(w, "priorities: sinks and ClickHouse at nice %d, the rest as started\n", f.storageNice)
	}
	v := judge(verdictInput{first: a, last: b, all: all, perInterval: perInterval, interval: f.interval, drained: t.drained,
		flapP99: p99, flaps: len(t.flapLat), maxP99: f.maxP99, withSink: f.clickhouse != "", sinks: f.sinks,
		published: t.final.published, rows: t.final.rows, rowsErr: t.final.err})
	result := "holds"
	if !v.holds {
		result = "does not hold"
	}
	fmt.Fprintf(w, "result: %s (ports %d, %s, load average %.1f)\n", result, f.ports, f.duration, all.loadMean)
	for _, r := range v.reasons {
		fmt.Fprintf(w, "  - %s\n", r)
	}
	if t.stopErr != nil {
		fmt.Fprintf(w, "note: a stage did not stop cleanly after the run: %v\n", t.stopErr)
	}
	t.reported = true
	return nil
}

// messagesPerTick and samplesPerTick are the mean batches and port samples
// of a template round.
func (g *generator) messagesPerTick() int {
	n := 0
	for _, t := range g.tt {
		n += len(t.batches)
	}
	return n / len(g.tt)
}

func (g *generator) samplesPerTick() int {
	n := 0
	for _, t := range g.tt {
		for _, b := range t.batches {
			n += b.ports
		}
	}
	return n / len(g.tt)
}
