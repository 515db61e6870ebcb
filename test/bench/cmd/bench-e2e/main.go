// Command bench-e2e is the end-to-end benchmark of BENCHMARKS.md (figure 5):
// the pipeline of `rdmawatch run` (embedded NATS JetStream, delta engine and
// publisher, processors, and the sink into ClickHouse when a DSN is set)
// over a simulated RoCE fleet of --ports ports (8 per host, the load
// generator of test/bench) read every --interval, in real time (speed 1),
// for --duration of wall time. A PFC storm and a link flap are injected
// every --fault-every so that events exist.
//
// Every second it prints the port samples published and processed, the lag
// (newest published data time - newest processed data time), the batches
// published but not yet processed, the sink's pending messages (counters
// consumer: not yet delivered + not yet acked) and how far the load
// generator is behind real time. At the end: p50/p99/max of the
// sample-to-event latency (wall time from when the subject node's reading
// holding the event's data time was released to the collector, to when the
// event arrived from the events stream), the lag in the first and the last
// window (a minute, or a quarter of a shorter run), the CPU used, and
// "result: holds" or "result: does not hold". The exit status is 0 either
// way; an error is a failed run.
//
//	go run ./test/bench/cmd/bench-e2e --ports N --interval 1s --duration 1m --clickhouse "$dsn"
//
// It lives under test/ because test/bench imports testing and natstest: the
// product binary must not link them.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/pipeline"
	"github.com/rdmawatch/rdmawatch/sim"
	"github.com/rdmawatch/rdmawatch/test/bench"
)

// flags are the settings of one trial.
type flags struct {
	ports      int
	interval   time.Duration
	duration   time.Duration
	processors int
	faultEvery time.Duration
	maxP99     time.Duration
	cpuProfile string
	drainGrace time.Duration
	clickhouse string
	logLevel   string
}

func parseFlags(args []string) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("bench-e2e", flag.ContinueOnError)
	fs.IntVar(&f.ports, "ports", 1000, "ports in the simulated fleet (rounded up to whole hosts of 8)")
	fs.DurationVar(&f.interval, "interval", time.Second, "collection interval")
	fs.DurationVar(&f.duration, "duration", 5*time.Minute, "wall time measured")
	fs.IntVar(&f.processors, "processors", 1, "processor instances")
	fs.DurationVar(&f.faultEvery, "fault-every", 30*time.Second, "inject a PFC storm and a link flap this often")
	fs.DurationVar(&f.maxP99, "max-p99", 2*time.Second, "the p99 sample-to-event latency a trial must stay under to hold")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured window to this file")
	fs.DurationVar(&f.drainGrace, "drain-grace", 20*time.Second, "after the measured window, how long the pipeline may take to drain")
	fs.StringVar(&f.clickhouse, "clickhouse", os.Getenv("RDMAWATCH_CLICKHOUSE"), "ClickHouse DSN of the sink; empty: no sink (env RDMAWATCH_CLICKHOUSE)")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if f.ports < 1 || f.interval <= 0 || f.duration <= 0 {
		return f, errors.New("--ports, --interval and --duration must be positive")
	}
	return f, nil
}

func main() {
	f, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err == nil {
		var lvl slog.Level
		if err = lvl.UnmarshalText([]byte(f.logLevel)); err == nil {
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			err = run(ctx, f, log, os.Stdout)
			stop()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-e2e:", err)
		os.Exit(1)
	}
}

// fleet builds the simulated fleet with its faults. It runs a little longer
// than the window: the window ends by cancelling, so the end of the data
// never shortens it.
func fleet(f flags) (*sim.Fleet, sim.Config, []string, error) {
	start := time.Now().UTC().Truncate(time.Second)
	cfg := bench.FleetConfig(f.ports, f.interval, f.duration+time.Minute)
	cfg.Start = start
	cfg.Fabric = "bench-e2e"
	fl, err := sim.NewFleet(cfg)
	if err != nil {
		return nil, cfg, nil, err
	}
	lay := fl.Layout()
	var faults []string
	for i, at := 0, 10*time.Second; f.faultEvery > 0 && at < f.duration; i, at = i+1, at+f.faultEvery {
		// Spread over the fleet: a different leaf each time.
		origin := lay.Ports[(i*997+3)%len(lay.Ports)].PortRef
		flap := lay.Ports[(i*991+len(lay.Ports)/2)%len(lay.Ports)].PortRef
		storm := sim.PFCStorm{Port: origin, From: start.Add(at), Duration: f.faultEvery / 2, Spread: 200 * time.Millisecond, MaxAffected: 4}
		lf := sim.LinkFlap{Port: flap, At: start.Add(at + f.faultEvery/3)}
		for _, ft := range []sim.Fault{storm, lf} {
			if err := fl.Inject(ft); err != nil {
				return nil, cfg, nil, fmt.Errorf("inject: %w", err)
			}
			faults = append(faults, sim.DescribeFault(ft, start))
		}
	}
	return fl, cfg, faults, nil
}

func run(ctx context.Context, f flags, log *slog.Logger, stdout io.Writer) error {
	fl, cfg, faults, err := fleet(f)
	if err != nil {
		return err
	}
	topo, err := sim.ParsedTopology(cfg)
	if err != nil {
		return err
	}
	simSrc, err := sim.NewSource(fl, sim.WithSpeed(1))
	if err != nil {
		return err
	}
	lay := fl.Layout()
	fmt.Fprintf(stdout, "bench-e2e: %d ports (%d hosts x %d) read every %s in real time for %s; %d processor(s); ClickHouse: %s\n",
		len(lay.Ports), len(lay.Nodes), bench.PortsPerHost, f.interval, f.duration, f.processors, orNone(f.clickhouse))
	fmt.Fprintf(stdout, "  %d faults injected (a PFC storm and a link flap every %s), first: %s\n", len(faults), f.faultEvery, strings.Join(faults[:min(2, len(faults))], "; "))
	fmt.Fprintf(stdout, "%6s %10s %10s %8s %8s %8s %8s %7s\n", "t", "pub/s", "proc/s", "lag", "backlog", "sinkpend", "behind", "events")

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	tr := &trial{f: f, log: log, stdout: stdout, cancel: cancel,
		src: &releaseSource{Source: simSrc, byNode: map[string][]release{}}}
	defer tr.endWindow()
	p, err := pipeline.Start(runCtx, pipeline.Config{
		Source:     tr.src,
		Topology:   topo,
		ClickHouse: f.clickhouse,
		Processors: f.processors,
		Log:        log,
		BootID:     func(string, int) string { return rand.Text() },
		DrainGrace: f.drainGrace,
		OnEvent:    tr.event,
		OnProgress: tr.progress,
	})
	if err != nil {
		return err
	}
	if err := tr.startWindow(p.JetStream()); err != nil {
		return errors.Join(err, p.Shutdown())
	}
	res, runErr := p.Run(runCtx)
	tr.endWindow()
	drainEnd := time.Now()
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	if ctx.Err() != nil {
		return ctx.Err() // interrupted: no verdict
	}
	return tr.report(res, drainEnd.Sub(tr.t0.Add(tr.cpuWall)) < f.drainGrace)
}

func orNone(s string) string {
	if s == "" {
		return "none (no sink)"
	}
	return s
}
