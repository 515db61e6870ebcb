// Command bench-e2e is the end-to-end benchmark of BENCHMARKS.md (e2e-max-ports):
// it measures the pipeline, not the load generator.
//
// Before the measured window it runs the simulated RoCE fleet of test/bench
// (--ports ports, 8 per host) through the collector's delta engine for
// --templates reading rounds and keeps every node's batch encoded in
// memory: on a real fleet the simulator's work and the delta engine run on
// every host, not here. Then it starts, as separate processes so that each
// has its own CPU and memory: a nats-server (this program re-executed, the
// nats-server module of go.mod) with the production streams, --processors
// `rdmawatch processor` and --sinks `rdmawatch sink` into a private
// database of the ClickHouse of --clickhouse (migrated by `rdmawatch
// migrate`). During --duration it publishes the template batches, re-timed
// in place (data times and the sequence number are fixed-width fields), at
// --interval in wall time, and injects a link flap on a new port every
// --flap-every: the open event of each flap gives a sample-to-event latency
// (wall time from the publish of the reading that carries the flap to the
// arrival of its event on the events stream).
//
// Every --report-every it prints the samples published, processed and
// landed in ClickHouse per second, the processors' data-time lag and
// backlog, the sink's backlog, the CPU (cores) and memory of each stage and
// the load average. At the end: the figures of the first and the last
// window, the latency p50/p99, and "result: holds" or "result: does not
// hold" with the stage that saturates. Exit status 0 either way; an error
// is a failed run.
//
//	go run ./test/bench/cmd/bench-e2e --ports N --duration 5m
//
// It lives under test/ because test/bench imports testing: the product
// binary must not link it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/natsembed"
)

// flags are the settings of one trial.
type flags struct {
	ports       int
	interval    time.Duration
	duration    time.Duration
	processors  int
	sinks       int
	partitions  int
	duplicates  time.Duration
	templates   int
	flapEvery   time.Duration
	maxP99      time.Duration
	drainGrace  time.Duration
	reportEvery time.Duration
	clickhouse  string
	database    string
	keepDB      bool
	rdmawatch   string
	portBase    int
	dir         string
	profileDir  string
	logLevel    string
	sinkArgs    []string
	procArgs    []string
	storageNice int
}

func parseFlags(args []string) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("bench-e2e", flag.ContinueOnError)
	fs.IntVar(&f.ports, "ports", 1000, "ports in the simulated fleet (rounded up to whole hosts of 8)")
	fs.DurationVar(&f.interval, "interval", time.Second, "collection interval")
	fs.DurationVar(&f.duration, "duration", 5*time.Minute, "wall time measured")
	fs.IntVar(&f.processors, "processors", 1, "rdmawatch processor instances (--instance i --instances N)")
	fs.IntVar(&f.sinks, "sinks", 1, "rdmawatch sink processes (sharing the durable consumers)")
	fs.IntVar(&f.partitions, "partitions", 16, "partitions of the counters stream")
	fs.DurationVar(&f.duplicates, "duplicates", 0, "the counters stream's duplicate window (0: the shipped default, schemas.CountersDuplicates)")
	fs.IntVar(&f.templates, "templates", 10, "reading rounds of the fleet kept in memory and replayed in turn")
	fs.DurationVar(&f.flapEvery, "flap-every", 2*time.Second, "inject a link flap on a new port this often (the latency probes); 0: none")
	fs.DurationVar(&f.maxP99, "max-p99", 2*time.Second, "the p99 sample-to-event latency a trial must stay under to hold")
	fs.DurationVar(&f.drainGrace, "drain-grace", 30*time.Second, "after the window, how long the pipeline may take to process and store what was published")
	fs.DurationVar(&f.reportEvery, "report-every", 10*time.Second, "print a progress line this often (figures are sampled every second)")
	fs.StringVar(&f.clickhouse, "clickhouse", envOr("RDMAWATCH_CLICKHOUSE", "clickhouse://127.0.0.1:19000/default"), "ClickHouse DSN; its database is replaced by a private one (--database); empty: no sink (env RDMAWATCH_CLICKHOUSE)")
	fs.StringVar(&f.database, "database", "", "the private database (default bench_e2e_<unix time>); dropped at the end unless --keep-database")
	fs.BoolVar(&f.keepDB, "keep-database", false, "keep the private database after the run")
	fs.StringVar(&f.rdmawatch, "rdmawatch", envOr("RDMAWATCH_BIN", "bin/rdmawatch"), "the rdmawatch binary whose processor, sink and migrate run (env RDMAWATCH_BIN)")
	fs.IntVar(&f.portBase, "port-base", 24000, "TCP ports used: nats-server on base+222, telemetry of the roles from base+300")
	fs.StringVar(&f.dir, "dir", "", "directory for the nats-server's store, the topology and the logs (default: a new temporary one, removed after a successful run)")
	fs.StringVar(&f.profileDir, "profile", "", "write CPU profiles of every stage's measured run here (generator.pprof, nats.pprof, processor-0.pprof, sink-0.pprof)")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level of this program and the roles: debug, info, warn, error")
	sinkArgs := fs.String("sink-args", "", "more flags for every rdmawatch sink, space separated, e.g. \"--flush-interval 5s --batch-rows 20000\"; \"--rollup-every -1s\" measures storage without the rollups")
	procArgs := fs.String("processor-args", "", "more flags for every rdmawatch processor, space separated")
	fs.IntVar(&f.storageNice, "storage-nice", 0, "nice value of the sinks and of ClickHouse's threads while they run, set back after (docs/deploying.md, \"CPU priorities\"); 0: as started")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	f.sinkArgs, f.procArgs = strings.Fields(*sinkArgs), strings.Fields(*procArgs)
	switch {
	case f.storageNice < -20 || f.storageNice > 19:
		return f, fmt.Errorf("--storage-nice %d: a nice value is -20 to 19", f.storageNice)
	case f.ports < 1 || f.interval < time.Millisecond || f.duration <= 0:
		return f, errors.New("--ports, --interval (at least 1ms) and --duration must be positive")
	case f.processors < 1 || f.sinks < 1 || f.partitions < f.processors:
		return f, fmt.Errorf("--processors %d, --sinks %d, --partitions %d: want at least one of each and no fewer partitions than processors", f.processors, f.sinks, f.partitions)
	case f.templates < 1:
		return f, errors.New("--templates must be positive")
	case f.flapEvery < 0 || (f.flapEvery > 0 && f.flapEvery < f.interval):
		return f, fmt.Errorf("--flap-every %s: 0 or at least one interval (%s)", f.flapEvery, f.interval)
	case f.portBase < 1024 || f.portBase+300+f.processors+f.sinks > 65535:
		return f, fmt.Errorf("--port-base %d: out of range", f.portBase)
	case f.reportEvery < time.Second:
		return f, errors.New("--report-every: at least 1s")
	}
	return f, nil
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == serveNATSCommand {
		if err := serveNATS(ctx, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench-e2e nats-server:", err)
			os.Exit(1)
		}
		return
	}
	f, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err == nil {
		var lvl slog.Level
		if err = lvl.UnmarshalText([]byte(f.logLevel)); err == nil {
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			err = run(ctx, f, log, os.Stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-e2e:", err)
		os.Exit(1)
	}
}

// serveNATSCommand makes this program a nats-server (the module's, as
// embedded by the project) in a process of its own, so its CPU is its own.
const serveNATSCommand = "serve-nats"

func serveNATS(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet(serveNATSCommand, flag.ContinueOnError)
	dir := fs.String("dir", "", "JetStream store directory")
	port := fs.Int("port", 0, "client port on 127.0.0.1")
	profile := fs.String("profile-cpu", "", "write a CPU profile of the server's run here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *port <= 0 {
		return errors.New("--dir and --port are required")
	}
	if *profile != "" {
		pf, err := os.Create(*profile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			pf.Close()
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			pf.Close()
		}()
	}
	srv, err := natsembed.Start(*dir, *port)
	if err != nil {
		return err
	}
	<-ctx.Done()
	srv.Shutdown()
	return nil
}
