package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/collector/sim"
	"github.com/rdmawatch/rdmawatch/internal/pipeline"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/test/bench"
)

// benchE2EFlags are the settings of one end-to-end trial (BENCHMARKS.md,
// figure 5).
type benchE2EFlags struct {
	ports      int
	interval   time.Duration
	duration   time.Duration
	processors int
	faultEvery time.Duration
	maxP99     time.Duration
	cpuProfile string
	drainGrace time.Duration
}

func newBenchE2ECmd(g *global) *cobra.Command {
	var f benchE2EFlags
	cmd := &cobra.Command{
		Use:   "bench-e2e --ports N [--interval 1s] [--duration 5m] [--clickhouse DSN]",
		Short: "End-to-end benchmark: a simulated fleet in real time through NATS, processors and the sink",
		Long: `bench-e2e runs the whole pipeline of 'run' (embedded NATS JetStream, delta
engine and publisher, processors, and the sink into ClickHouse when a DSN is
set) over a simulated RoCE fleet of --ports ports (8 per host, the load
generator of test/bench) read every --interval, in real time (speed 1), for
--duration of wall time. A PFC storm and a link flap are injected every
--fault-every so that events exist.

Every second it prints the port samples published and processed, the lag
(newest published data time - newest processed data time), the batches
published but not yet processed, the sink's pending messages (counters
consumer: not yet delivered + not yet acked) and how far the load generator
is behind real time. At the end: p50/p99/max of the sample-to-event latency
(wall time from when the subject node's reading holding the event's data time
was released to the collector, to when the event arrived from the events
stream), the lag in the first and the last window (a minute, or a quarter of
a shorter run), the CPU used, and "result: holds" or "result: does not hold".
The exit status is 0 either way; an error is a failed run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchE2E(cmd.Context(), g, f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.ports, "ports", 1000, "ports in the simulated fleet (rounded up to whole hosts of 8)")
	fl.DurationVar(&f.interval, "interval", time.Second, "collection interval")
	fl.DurationVar(&f.duration, "duration", 5*time.Minute, "wall time measured")
	fl.IntVar(&f.processors, "processors", 1, "processor instances")
	fl.DurationVar(&f.faultEvery, "fault-every", 30*time.Second, "inject a PFC storm and a link flap this often")
	fl.DurationVar(&f.maxP99, "max-p99", 2*time.Second, "the p99 sample-to-event latency a trial must stay under to hold")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured window to this file")
	fl.DurationVar(&f.drainGrace, "drain-grace", 20*time.Second, "after the measured window, how long the pipeline may take to drain")
	return cmd
}

// benchRelease is when a reading was handed to the collector.
type benchRelease struct {
	dataMs int64
	wall   time.Time
}

// benchSource wraps the simulated fleet, recording when each node's reading
// was released (the start of its sample-to-event latency) and how far the
// release is behind the real time its data time maps to.
type benchSource struct {
	*collector.SimSource
	mu     sync.Mutex
	byNode map[string][]benchRelease
	all    []benchRelease
	w0     time.Time
	d0     int64
	behind atomic.Int64 // ns, of the newest release
	worst  atomic.Int64 // ns, the largest since the last take
}

func (s *benchSource) Next(ctx context.Context) (*collector.Reading, error) {
	r, err := s.SimSource.Next(ctx)
	if err != nil || r == nil {
		return r, err
	}
	now := time.Now()
	ms := r.Time.UnixMilli()
	s.mu.Lock()
	if s.w0.IsZero() {
		s.w0, s.d0 = now, ms
	}
	rel := benchRelease{dataMs: ms, wall: now}
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
func (s *benchSource) released(node string, ms int64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, list := range [][]benchRelease{s.byNode[node], s.all} {
		if i := sort.Search(len(list), func(i int) bool { return list[i].dataMs >= ms }); i < len(list) {
			return list[i].wall, true
		}
	}
	return time.Time{}, false
}

// benchSecond is one line of the per-second report.
type benchSecond struct {
	at                   time.Duration // since the start of the measured window
	published, processed float64       // port samples per second
	lag                  time.Duration
	backlog              uint64 // batches
	sinkPending          uint64 // messages
	behind               time.Duration
	events               uint64
}

func runBenchE2E(ctx context.Context, g *global, f benchE2EFlags, stdout io.Writer) error {
	if f.ports < 1 || f.interval <= 0 || f.duration <= 0 {
		return errors.New("bench-e2e: --ports, --interval and --duration must be positive")
	}
	// The fleet runs a little longer than the window: the window ends by
	// cancelling, so the end of the data never shortens it.
	start := time.Now().UTC().Truncate(time.Second)
	cfg := bench.FleetConfig(f.ports, f.interval, f.duration+time.Minute)
	cfg.Start = start
	cfg.Fabric = "bench-e2e"
	fleet, err := sim.NewFleet(cfg)
	if err != nil {
		return err
	}
	lay := fleet.Layout()
	var faults []string
	for i, at := 0, 10*time.Second; f.faultEvery > 0 && at < f.duration; i, at = i+1, at+f.faultEvery {
		// Spread over the fleet: a different leaf each time.
		origin := lay.Ports[(i*997+3)%len(lay.Ports)].PortRef
		flap := lay.Ports[(i*991+len(lay.Ports)/2)%len(lay.Ports)].PortRef
		storm := sim.PFCStorm{Port: origin, From: start.Add(at), Duration: f.faultEvery / 2, Spread: 200 * time.Millisecond, MaxAffected: 4}
		lf := sim.LinkFlap{Port: flap, At: start.Add(at + f.faultEvery/3)}
		for _, ft := range []sim.Fault{storm, lf} {
			if err := fleet.Inject(ft); err != nil {
				return fmt.Errorf("inject: %w", err)
			}
			faults = append(faults, sim.DescribeFault(ft, start))
		}
	}
	topo, err := sim.ParsedTopology(cfg)
	if err != nil {
		return err
	}
	simSrc, err := collector.NewSimSource(fleet, collector.WithSimSpeed(1))
	if err != nil {
		return err
	}
	src := &benchSource{SimSource: simSrc, byNode: map[string][]benchRelease{}}

	fmt.Fprintf(stdout, "bench-e2e: %d ports (%d hosts x %d) read every %s in real time for %s; %d processor(s); ClickHouse: %s\n",
		len(lay.Ports), len(lay.Nodes), bench.PortsPerHost, f.interval, f.duration, f.processors, orNone(g.clickhouse))
	fmt.Fprintf(stdout, "  %d faults injected (a PFC storm and a link flap every %s), first: %s\n", len(faults), f.faultEvery, strings.Join(faults[:min(2, len(faults))], "; "))
	fmt.Fprintf(stdout, "%6s %10s %10s %8s %8s %8s %8s %7s\n", "t", "pub/s", "proc/s", "lag", "backlog", "sinkpend", "behind", "events")

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		js        jetstream.JetStream
		mu        sync.Mutex
		latencies []time.Duration
		unmatched int
		seconds   []benchSecond
		prev      pipeline.Progress
		t0        time.Time
		cpu0      syscall.Rusage
		sys0      cpuTimes
		endOnce   sync.Once
		cpuWall   time.Duration
		cpuSelf   time.Duration
		sysBusy   float64
		profiling bool
	)
	endWindow := func() {
		endOnce.Do(func() {
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			cpuWall = time.Since(t0)
			cpuSelf = rusageCPU(&ru) - rusageCPU(&cpu0)
			sysBusy = readCPUTimes().busySince(sys0)
			if profiling {
				pprof.StopCPUProfile()
			}
			cancel()
		})
	}
	defer endWindow()
	sinkPending := func() uint64 {
		if js == nil || g.clickhouse == "" {
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
	var timer *time.Timer
	onStart := func(p *pipeline.Pipeline) error {
		js = p.JetStream()
		if f.cpuProfile != "" {
			pf, err := os.Create(f.cpuProfile)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(pf); err != nil {
				pf.Close()
				return err
			}
			profiling = true
		}
		t0 = time.Now()
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &cpu0)
		sys0 = readCPUTimes()
		timer = time.AfterFunc(f.duration, endWindow)
		return nil
	}
	p, err := pipeline.Start(runCtx, pipeline.Config{
		Source:     src,
		Topology:   topo,
		ClickHouse: g.clickhouse,
		Processors: f.processors,
		Log:        g.log,
		BootID:     func(string, int) string { return randomBootID() },
		DrainGrace: f.drainGrace,
		OnEvent: func(ev *schemas.Event) {
			arrived := time.Now()
			rel, ok := src.released(ev.Subject.Node, int64(ev.DetectedAt))
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				unmatched++
				g.log.Warn("bench-e2e: no released reading at the event's data time", "id", ev.ID, "state", ev.State,
					"subject", ev.Subject.String(), "detected_at", ev.DetectedAt.Time())
				return
			}
			latencies = append(latencies, arrived.Sub(rel))
		},
		OnProgress: func(p pipeline.Progress) {
			if p.Wall == 0 || runCtx.Err() != nil {
				return // the run's closing total
			}
			s := benchSecond{at: time.Since(t0), lag: p.Lag(), backlog: p.Backlog, sinkPending: sinkPending(),
				behind: time.Duration(src.worst.Swap(0)), events: p.Events}
			if dt := (p.Wall - prev.Wall).Seconds(); dt > 0 {
				s.published = float64(p.Samples-prev.Samples) / dt
				s.processed = float64(p.ProcessedSamples-prev.ProcessedSamples) / dt
			}
			prev = p
			mu.Lock()
			seconds = append(seconds, s)
			mu.Unlock()
			fmt.Fprintf(stdout, "%6s %10.0f %10.0f %8s %8d %8d %8s %7d\n", s.at.Round(time.Second), s.published, s.processed,
				s.lag.Round(10*time.Millisecond), s.backlog, s.sinkPending, s.behind.Round(10*time.Millisecond), s.events)
		},
	})
	if err != nil {
		return err
	}
	if err := onStart(p); err != nil {
		return errors.Join(err, p.Shutdown())
	}
	res, runErr := p.Run(runCtx)
	if timer != nil {
		timer.Stop()
	}
	endWindow()
	drainEnd := time.Now()
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	if ctx.Err() != nil {
		return ctx.Err() // interrupted: no verdict
	}
	drained := drainEnd.Sub(t0.Add(cpuWall)) < f.drainGrace
	mu.Lock()
	defer mu.Unlock()
	return reportBenchE2E(stdout, f, res, seconds, latencies, unmatched, drained, cpuWall, cpuSelf, sysBusy)
}

func orNone(s string) string {
	if s == "" {
		return "none (no sink)"
	}
	return s
}

func reportBenchE2E(w io.Writer, f benchE2EFlags, res *pipeline.Result, seconds []benchSecond, lat []time.Duration,
	unmatched int, drained bool, wall, self time.Duration, sysBusy float64) error {
	// The first seconds fill the pipeline (first batches are baselines);
	// they are left out of the windows.
	const warmUp = 5 * time.Second
	var steady []benchSecond
	for _, s := range seconds {
		if s.at >= warmUp {
			steady = append(steady, s)
		}
	}
	if len(steady) < 4 {
		return fmt.Errorf("bench-e2e: only %d steady seconds measured; run longer", len(steady))
	}
	win := min(time.Minute, (f.duration-warmUp)/4)
	var first, last []benchSecond
	end := steady[len(steady)-1].at
	for _, s := range steady {
		if s.at < warmUp+win {
			first = append(first, s)
		}
		if s.at > end-win {
			last = append(last, s)
		}
	}
	type agg struct {
		pub, proc                  float64
		lagMean, lagMax, behindMax time.Duration
		pendMean                   float64
		pendMax                    uint64
	}
	summarise := func(ss []benchSecond) agg {
		var a agg
		for _, s := range ss {
			a.pub += s.published / float64(len(ss))
			a.proc += s.processed / float64(len(ss))
			a.lagMean += s.lag / time.Duration(len(ss))
			a.lagMax = max(a.lagMax, s.lag)
			a.behindMax = max(a.behindMax, s.behind)
			a.pendMean += float64(s.sinkPending) / float64(len(ss))
			a.pendMax = max(a.pendMax, s.sinkPending)
		}
		return a
	}
	a, b := summarise(first), summarise(last)
	all := summarise(steady)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(q float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(q*float64(len(lat))))]
	}
	ports := float64(f.ports)
	// Lag grew: the last window is more than one interval behind the first
	// one, or the sink holds more than one interval of messages more.
	perInterval := ports / bench.PortsPerHost
	lagGrew := b.lagMean > a.lagMean+f.interval || b.lagMax > a.lagMax+f.interval
	sinkGrew := b.pendMean > a.pendMean+perInterval
	genBehind := all.behindMax > f.interval
	p99 := pct(0.99)
	holds := !lagGrew && !sinkGrew && !genBehind && drained && len(lat) > 0 && p99 < f.maxP99

	fmt.Fprintln(w)
	fmt.Fprintf(w, "window: %s measured, %d steady seconds (first %s left out); windows compared: first and last %s\n",
		wall.Round(time.Second), len(steady), warmUp, win.Round(time.Second))
	fmt.Fprintf(w, "samples/s published %.0f, processed %.0f (steady mean; %.0f ports at 1/%s = %.0f expected)\n",
		all.pub, all.proc, ports, f.interval, ports/f.interval.Seconds())
	fmt.Fprintf(w, "lag (data time): first window mean %s max %s; last window mean %s max %s; grew: %v\n",
		a.lagMean.Round(10*time.Millisecond), a.lagMax.Round(10*time.Millisecond), b.lagMean.Round(10*time.Millisecond), b.lagMax.Round(10*time.Millisecond), lagGrew)
	fmt.Fprintf(w, "sink pending (messages): first window mean %.0f max %d; last window mean %.0f max %d; grew: %v\n",
		a.pendMean, a.pendMax, b.pendMean, b.pendMax, sinkGrew)
	fmt.Fprintf(w, "load generator behind real time: max %s\n", all.behindMax.Round(time.Millisecond))
	fmt.Fprintf(w, "drained within %s after the window: %v\n", f.drainGrace, drained)
	fmt.Fprintf(w, "sample-to-event latency over %d events (%d unmatched): p50 %s p99 %s max %s\n",
		len(lat), unmatched, pct(0.5).Round(time.Millisecond), p99.Round(time.Millisecond), pct(1).Round(time.Millisecond))
	if res != nil {
		types := make([]string, 0, len(res.ByType))
		for t, st := range res.ByType {
			types = append(types, fmt.Sprintf("%s %d/%d/%d", t, st[schemas.StateOpen], st[schemas.StateUpdate], st[schemas.StateResolved]))
		}
		sort.Strings(types)
		fmt.Fprintf(w, "events by type (open/update/resolved): %s\n", strings.Join(types, ", "))
	}
	fmt.Fprintf(w, "cpu: this process %.2f cores (%s CPU in %s); whole machine busy %.0f%% of %d cores (ClickHouse and other users included)\n",
		self.Seconds()/wall.Seconds(), self.Round(100*time.Millisecond), wall.Round(time.Second), sysBusy*100, numCPU())
	verdict := "holds"
	if !holds {
		verdict = "does not hold"
	}
	fmt.Fprintf(w, "result: %s (ports %d)\n", verdict, f.ports)
	return nil
}

func rusageCPU(ru *syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuTimes is the first line of /proc/stat.
type cpuTimes struct{ busy, total uint64 }

func readCPUTimes() cpuTimes {
	fh, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	if !sc.Scan() {
		return cpuTimes{}
	}
	fields := strings.Fields(sc.Text())
	var t cpuTimes
	for i, v := range fields[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		t.total += n
		if i != 3 && i != 4 { // idle, iowait
			t.busy += n
		}
	}
	return t
}

func (t cpuTimes) busySince(t0 cpuTimes) float64 {
	if t.total <= t0.total {
		return 0
	}
	return float64(t.busy-t0.busy) / float64(t.total-t0.total)
}

func numCPU() int {
	n := 0
	fh, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "cpu") && len(l) > 3 && l[3] >= '0' && l[3] <= '9' {
			n++
		}
	}
	return n
}
