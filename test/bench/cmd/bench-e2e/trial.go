package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/procfs"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/test/bench"
)

// roles are the stages whose CPU and memory a trial reports, in order.
var roles = []string{"generator", "nats", "processor", "sink", "clickhouse"}

// second is one sample of the trial, taken every second.
type second struct {
	at                          time.Duration // since the start of the window
	published, processed, rows  float64       // port samples (rows) per second
	procLag                     time.Duration // processors: wall - newest data time (max over partitions)
	procPending, sinkPending    uint64        // counters-stream messages not yet delivered (+ acked, for the sink)
	behind                      time.Duration // the generator, worst in the second
	events                      uint64
	cpu                         []float64 // cores, per role
	rss                         []int     // bytes, per role
	load1                       float64
	insertBusy                  float64 // seconds the sinks spent in port_samples INSERTs per second
	inserts                     float64 // port_samples INSERT blocks in the second
	publishedTotal, rowsTotal   float64
	processedTotal, eventsTotal float64
}

// trial is one measured run.
type trial struct {
	f      flags
	log    *slog.Logger
	stdout io.Writer
	fs     procfs.FS

	stages    []*stage // every watched process, generator (this one) first
	gen       *generator
	js        jetstream.JetStream
	nodeIndex map[string]int

	mu         sync.Mutex
	seconds    []second
	flapLat    []time.Duration // link-flap probes: publish of the flapped reading -> open event
	allLat     []time.Duration // every event: its data time (= the wall time its reading was published) -> arrival
	byType     map[string]map[string]int
	eventCount uint64
	flapByKey  map[string]bool // probes already matched

	stopOnce   sync.Once
	stopResult error
	stopErr    error // of the stop after the window, printed by the report
	reported   bool

	load0, load1 float64
	drained      bool
	drainTook    time.Duration
	final        finalCount
}

// finalCount is what ClickHouse holds at the end against what was published.
type finalCount struct {
	published uint64
	rows      uint64
	err       error
}

func run(ctx context.Context, f flags, log *slog.Logger, stdout io.Writer) (err error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return fmt.Errorf("procfs: %w", err)
	}
	bin, err := exec.LookPath(f.rdmawatch)
	if err != nil {
		return fmt.Errorf("--rdmawatch %s: %w (make build, or go build -o bin/rdmawatch ./cmd/rdmawatch)", f.rdmawatch, err)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}

	t0 := time.Now()
	nodes, tt, err := fleetTemplates(f.ports, f.templates, f.interval)
	if err != nil {
		return err
	}
	// The simulator's state is garbage now: give it back, so the
	// generator's memory is what it publishes from.
	debug.FreeOSMemory()
	var tmplBytes, samples int
	for _, tick := range tt {
		for _, b := range tick.batches {
			tmplBytes += len(b.data)
			samples += b.ports
		}
	}
	dup := schemas.CountersDuplicates
	if f.duplicates > 0 {
		dup = f.duplicates
	}
	fmt.Fprintf(stdout, "bench-e2e: %d ports (%d hosts x %d) at %s for %s; %d processor(s), %d sink(s), %d partitions, %s duplicate window\n",
		f.ports, len(nodes), bench.PortsPerHost, f.interval, f.duration, f.processors, f.sinks, f.partitions, dup)
	fmt.Fprintf(stdout, "  load generator: %d reading rounds pre-built in %s (%d port samples, %.1f MiB encoded, %.1f B/sample), replayed re-timed\n",
		len(tt), time.Since(t0).Round(time.Millisecond), samples, float64(tmplBytes)/(1<<20), float64(tmplBytes)/float64(max(1, samples)))

	dir := f.dir
	removeDir := false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "bench-e2e-"); err != nil {
			return err
		}
		removeDir = true // on success; a failed run keeps its logs
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if f.profileDir != "" {
		if err := os.MkdirAll(f.profileDir, 0o755); err != nil {
			return err
		}
	}
	tr := &trial{f: f, log: log, stdout: stdout, fs: fs, byType: map[string]map[string]int{}, flapByKey: map[string]bool{},
		nodeIndex: map[string]int{}}
	for i, n := range nodes {
		tr.nodeIndex[n] = i
	}
	tr.stages = append(tr.stages, &stage{name: "generator", role: "generator", pid: os.Getpid()})
	defer func() {
		if stopErr := tr.stopAll(); !tr.reported {
			err = errors.Join(err, stopErr)
		}
		if removeDir && err == nil {
			os.RemoveAll(dir)
		} else {
			fmt.Fprintf(stdout, "logs and store kept in %s\n", dir)
		}
	}()

	// nats-server, with the production streams.
	natsPort := f.portBase + 222
	natsAddr := fmt.Sprintf("127.0.0.1:%d", natsPort)
	if err := freeAddr(natsAddr); err != nil {
		return err
	}
	natsArgs := []string{serveNATSCommand, "--dir", filepath.Join(dir, "jetstream"), "--port", strconv.Itoa(natsPort)}
	if f.profileDir != "" {
		natsArgs = append(natsArgs, "--profile-cpu", filepath.Join(f.profileDir, "nats.pprof"))
	}
	ns, err := startStage(dir, "nats", "nats", "", self, natsArgs...)
	if err != nil {
		return err
	}
	tr.stages = append(tr.stages, ns)
	natsURL := "nats://" + natsAddr
	nc, err := connectNATS(ctx, natsURL, ns)
	if err != nil {
		return err
	}
	defer nc.Close()
	if tr.js, err = jetstream.New(nc); err != nil {
		return err
	}
	apply := natsutil.ApplyOptions{Partitions: f.partitions}
	if f.duplicates > 0 {
		apply.Duplicates = map[string]time.Duration{schemas.StreamCounters: f.duplicates}
	}
	if _, err := natsutil.ApplyStreams(ctx, tr.js, apply); err != nil {
		return fmt.Errorf("streams: %w", err)
	}

	topo, err := fleetTopology(f.ports, f.interval)
	if err != nil {
		return err
	}
	topoPath := filepath.Join(dir, "topology.json")
	if err := writeFile(topoPath, topo.Write); err != nil {
		return err
	}

	common := []string{"--nats", natsURL, "--log-level", f.logLevel}
	dsn := ""
	if f.clickhouse != "" {
		if dsn, err = privateDSN(f.clickhouse, f.database); err != nil {
			return err
		}
		out, err := exec.CommandContext(ctx, bin, "migrate", "--clickhouse", dsn, "--topology", topoPath, "--log-level", "warn").CombinedOutput()
		if err != nil {
			return fmt.Errorf("rdmawatch migrate: %w: %s", err, out)
		}
		if !f.keepDB {
			defer func() {
				// The sinks first: they write what they hold before they stop.
				_ = tr.stopAll()
				err = errors.Join(err, dropDatabase(dsn))
			}()
		}
		fmt.Fprintf(stdout, "  ClickHouse: %s (private database, %s)\n", redactDSN(dsn), map[bool]string{true: "kept", false: "dropped at the end"}[f.keepDB])
	}
	start := func(name, role string, port int, args ...string) error { // args: the command and its flags
		listen := fmt.Sprintf("127.0.0.1:%d", port)
		if err := freeAddr(listen); err != nil {
			return err
		}
		args = append(args, common...)
		args = append(args, "--listen", listen)
		if f.profileDir != "" {
			args = append(args, "--profile-cpu", filepath.Join(f.profileDir, name+".pprof"))
		}
		st, err := startStage(dir, name, role, listen, bin, args...)
		if err != nil {
			return err
		}
		tr.stages = append(tr.stages, st)
		return nil
	}
	for i := range f.processors {
		args := append([]string{"processor", "--instance", strconv.Itoa(i), "--instances", strconv.Itoa(f.processors), "--topology", topoPath}, f.procArgs...)
		if err := start(fmt.Sprintf("processor-%d", i), "processor", f.portBase+300+i, args...); err != nil {
			return err
		}
	}
	if dsn != "" {
		for i := range f.sinks {
			args := append([]string{"sink", "--clickhouse", dsn}, f.sinkArgs...)
			if err := start(fmt.Sprintf("sink-%d", i), "sink", f.portBase+300+f.processors+i, args...); err != nil {
				return err
			}
		}
		if u, err := url.Parse(dsn); err == nil {
			if pid := listenerPID(fs, u.Host); pid != 0 {
				tr.stages = append(tr.stages, &stage{name: "clickhouse", role: "clickhouse", pid: pid})
			}
		}
	}
	for _, st := range tr.stages {
		if st.listen != "" {
			if err := st.waitReady(ctx, time.Minute); err != nil {
				return err
			}
		}
	}

	if f.storageNice != 0 {
		// Storage at a lower priority than detection, as the sink's
		// systemd unit runs (docs/deploying.md): ClickHouse's merges come
		// in bursts, a sample can wait in JetStream for the sink, and a
		// processor that waits makes its events late.
		for _, st := range tr.stages {
			if st.role != "sink" && st.role != "clickhouse" {
				continue
			}
			restore, err := renice(st.pid, f.storageNice)
			if err != nil {
				return err
			}
			defer restore()
		}
	}
	if err := tr.watchEvents(ctx); err != nil {
		return err
	}
	if err := tr.measure(ctx, nc, nodes, tt); err != nil {
		return err
	}
	tr.stopErr = tr.stopAll()
	return tr.report()
}

// connectNATS waits for the nats-server child to accept clients.
func connectNATS(ctx context.Context, url string, ns *stage) (*nats.Conn, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := nats.Connect(url, nats.Name("bench-e2e"), nats.MaxReconnects(-1))
		if err == nil {
			return nc, nil
		}
		if done, werr := ns.exited(); done {
			return nil, fmt.Errorf("nats-server exited (%v): %s", werr, ns.tail())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("nats-server at %s: %w", url, errors.Join(err, ctx.Err()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func writeFile(path string, write func(io.Writer) error) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(fh); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// privateDSN is dsn with its database replaced by db (default
// bench_e2e_<unix time>): a trial never writes into a database it did not
// create.
func privateDSN(dsn, db string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--clickhouse %q: not a DSN like clickhouse://host:port/db", redactDSN(dsn))
	}
	if db == "" {
		db = fmt.Sprintf("bench_e2e_%d", time.Now().Unix())
	}
	for _, r := range db {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return "", fmt.Errorf("--database %q: letters, digits and _ only", db)
		}
	}
	u.Path = "/" + db
	return u.String(), nil
}

func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Redacted()
	}
	return "(unparsable DSN)"
}

// dropDatabase removes the private database of the trial.
func dropDatabase(dsn string) error {
	u, err := url.Parse(dsn)
	if err != nil {
		return err
	}
	db := strings.TrimPrefix(u.Path, "/")
	u.Path = "/default"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := chdb.Open(ctx, u.String())
	if err != nil {
		return fmt.Errorf("drop database %s: %w", db, err)
	}
	defer conn.Close()
	if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS `"+db+"`"); err != nil {
		return fmt.Errorf("drop database %s: %w", db, err)
	}
	return nil
}

// rowsIn counts the port_samples rows in the trial's database, FINAL: a
// redelivered batch counts once.
func rowsIn(ctx context.Context, dsn string) (uint64, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return 0, err
	}
	conn, err := chdb.Open(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var n uint64
	err = conn.QueryRow(ctx, "SELECT toUInt64(count()) FROM port_samples FINAL").Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count rows in %s: %w", strings.TrimPrefix(u.Path, "/"), err)
	}
	return n, nil
}

// stopAll stops every child (SIGTERM: the roles write their profiles),
// the nats-server last. Only the first call stops; later ones return its
// result.
func (t *trial) stopAll() error {
	t.stopOnce.Do(func() { t.stopResult = t.stopStages() })
	return t.stopResult
}

func (t *trial) stopStages() error {
	var errs []error
	for i := len(t.stages) - 1; i >= 0; i-- {
		st := t.stages[i]
		if err := st.stop(20 * time.Second); err != nil && !isSignalExit(err) {
			errs = append(errs, fmt.Errorf("%s: %w (log %s)", st.name, err, st.log))
		}
	}
	return errors.Join(errs...)
}

func isSignalExit(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && !ee.Exited()
}

// watchEvents reads the events stream in order: the latency probes and
// the event counts.
func (t *trial) watchEvents(ctx context.Context) error {
	c, err := t.js.OrderedConsumer(ctx, schemas.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{schemas.EventsAllFilter}})
	if err != nil {
		return fmt.Errorf("events consumer: %w", err)
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		arrived := time.Now()
		ev, err := schemas.DecodeEvent(m.Data())
		if err != nil {
			t.log.Error("undecodable event", "subject", m.Subject(), "err", err)
			return
		}
		t.event(ev, arrived)
	})
	if err != nil {
		return fmt.Errorf("events consumer: %w", err)
	}
	context.AfterFunc(ctx, cc.Stop)
	return nil
}

func (t *trial) event(ev *schemas.Event, arrived time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.eventCount++
	if t.byType[ev.Type] == nil {
		t.byType[ev.Type] = map[string]int{}
	}
	t.byType[ev.Type][ev.State]++
	// Data time is wall time here (each batch is published at its data
	// time), so this is the latency from the reading that decided it.
	t.allLat = append(t.allLat, arrived.Sub(ev.DetectedAt.Time()))
	if ev.Type != schemas.TypeLinkFlap || ev.State != schemas.StateOpen {
		return
	}
	key := ev.Subject.String()
	if t.flapByKey[key] {
		return
	}
	for _, fl := range t.gen.flapList() {
		if fmt.Sprintf("%s/%s/%d", fl.node, fl.device, fl.port) == key {
			t.flapByKey[key] = true
			t.flapLat = append(t.flapLat, arrived.Sub(fl.released))
			return
		}
	}
}

func (g *generator) flapList() []flap {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]flap(nil), g.flaps...)
}

// measure runs the generator for the window, sampling every second, then
// lets the pipeline drain.
func (t *trial) measure(ctx context.Context, nc *nats.Conn, nodes []string, tt []templateTick) error {
	f := t.f
	startWall := time.Now().Add(time.Second).Truncate(time.Second)
	flapEvery, flapAfter := 0, 0
	if f.flapEvery > 0 {
		flapEvery = int(f.flapEvery / f.interval)
		flapAfter = int((warmUp + f.interval - 1) / f.interval)
	}
	gen, err := newGenerator(nc, nodes, tt, f.interval, startWall, flapEvery, flapAfter)
	if err != nil {
		return err
	}
	t.gen = gen
	if la, err := t.fs.LoadAvg(); err == nil {
		t.load0 = la.Load1
	}
	if f.profileDir != "" {
		pf, err := os.Create(filepath.Join(f.profileDir, "generator.pprof"))
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			pf.Close()
			return err
		}
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	genCtx, stopGen := context.WithCancel(ctx)
	defer stopGen()
	genDone := make(chan error, 1)
	go func() { genDone <- gen.run(genCtx) }()

	fmt.Fprintf(t.stdout, "%6s %9s %9s %9s %7s %8s %8s %7s  %-31s %6s\n", "t", "pub/s", "proc/s", "rows/s", "lag", "procpend", "sinkpend", "events",
		"cores gen/nats/proc/sink/ch", "load1")
	var prev cumulative
	t.sample(startWall, &prev)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := startWall.Add(f.duration)
	var acc []second
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-genDone:
			if err == nil {
				err = errors.New("the generator stopped early")
			}
			return err
		case <-tick.C:
		}
		s := t.sample(startWall, &prev)
		if err := t.checkStages(); err != nil {
			return err
		}
		t.mu.Lock()
		t.seconds = append(t.seconds, s)
		t.mu.Unlock()
		acc = append(acc, s)
		if time.Duration(len(acc))*time.Second >= f.reportEvery {
			t.printLine(acc)
			acc = acc[:0]
		}
	}
	stopGen()
	if err := <-genDone; err != nil {
		return err
	}
	if la, err := t.fs.LoadAvg(); err == nil {
		t.load1 = la.Load1
	}
	ackCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = gen.wait(ackCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("generator: %w", err)
	}
	// Drain: everything published processed and stored.
	drainStart := time.Now()
	published := gen.published.Load()
	for {
		s := t.sample(startWall, &prev)
		done := s.procPending == 0 && (t.f.clickhouse == "" || (s.sinkPending == 0 && s.rowsTotal >= float64(published)))
		if done {
			t.drained, t.drainTook = true, time.Since(drainStart)
			break
		}
		if time.Since(drainStart) > f.drainGrace || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.final.published = published
	if t.f.clickhouse != "" {
		if dsn, err := privateDSNOf(t); err == nil {
			qctx, qc := context.WithTimeout(ctx, time.Minute)
			t.final.rows, t.final.err = rowsIn(qctx, dsn)
			qc()
		}
	}
	return nil
}

// privateDSNOf is the DSN the sinks were given.
func privateDSNOf(t *trial) (string, error) {
	for _, st := range t.stages {
		if st.role == "sink" && st.cmd != nil {
			args := st.cmd.Args
			for i := range args[:len(args)-1] {
				if args[i] == "--clickhouse" {
					return args[i+1], nil
				}
			}
		}
	}
	return "", errors.New("no sink")
}

// checkStages fails the trial when a child died.
func (t *trial) checkStages() error {
	for _, st := range t.stages {
		if done, err := st.exited(); done {
			return fmt.Errorf("%w: %s (%v); its log %s ends:\n%s", errStageExited, st.name, err, st.log, st.tail())
		}
	}
	return nil
}

// cumulative is the running totals a sample differences.
type cumulative struct {
	at                                    time.Time
	published, processed, rows, eventsNum float64
	insertSec, inserts                    float64
	cpu                                   []float64
}

// sample takes one second's figures; prev holds the totals of the last
// sample (none yet: zero) and is advanced.
func (t *trial) sample(startWall time.Time, prev *cumulative) second {
	now := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cur := cumulative{at: now, cpu: make([]float64, len(roles))}
	s := second{at: now.Sub(startWall), cpu: make([]float64, len(roles)), rss: make([]int, len(roles))}
	for _, st := range t.stages {
		r := roleIndex(st.role)
		u := st.usage(t.fs)
		cur.cpu[r] += u.cpu
		s.rss[r] += u.rss
		ms, err := st.scrape(ctx)
		if err != nil {
			t.log.Debug("scrape", "stage", st.name, "err", err)
			continue
		}
		switch st.role {
		case "processor":
			cur.processed += metric(ms, "rdmawatch_processor_samples_processed_total").sum
			s.procLag = max(s.procLag, time.Duration(metric(ms, "rdmawatch_processor_lag_seconds").max*float64(time.Second)))
		case "sink":
			cur.rows += metric(ms, "rdmawatch_sink_rows_inserted_total{port_samples}").sum
			cur.insertSec += metric(ms, "rdmawatch_sink_insert_duration_seconds_sum{port_samples}").sum
			cur.inserts += metric(ms, "rdmawatch_sink_insert_duration_seconds_count{port_samples}").sum
		}
	}
	if t.gen != nil {
		cur.published = float64(t.gen.published.Load())
		s.behind = time.Duration(t.gen.worstBehnd.Swap(0))
	}
	t.mu.Lock()
	cur.eventsNum = float64(t.eventCount)
	t.mu.Unlock()
	s.procPending, s.sinkPending = t.pending(ctx)
	if la, err := t.fs.LoadAvg(); err == nil {
		s.load1 = la.Load1
	}
	s.publishedTotal, s.processedTotal, s.rowsTotal, s.eventsTotal = cur.published, cur.processed, cur.rows, cur.eventsNum
	if prev.cpu != nil {
		if dt := now.Sub(prev.at).Seconds(); dt > 0 {
			s.published = (cur.published - prev.published) / dt
			s.processed = (cur.processed - prev.processed) / dt
			s.rows = (cur.rows - prev.rows) / dt
			s.events = uint64(cur.eventsNum - prev.eventsNum)
			s.insertBusy = (cur.insertSec - prev.insertSec) / dt
			s.inserts = cur.inserts - prev.inserts
			for i := range roles {
				s.cpu[i] = (cur.cpu[i] - prev.cpu[i]) / dt
			}
		}
	}
	*prev = cur
	return s
}

func roleIndex(role string) int {
	for i, r := range roles {
		if r == role {
			return i
		}
	}
	panic("unknown role " + role)
}

// pending is the counters stream's backlog: messages not yet delivered to
// the processors' consumers, and not yet delivered or acknowledged by the
// sinks' durable consumer.
func (t *trial) pending(ctx context.Context) (proc, sink uint64) {
	str, err := t.js.Stream(ctx, schemas.StreamCounters)
	if err != nil {
		return 0, 0
	}
	l := str.ListConsumers(ctx)
	for ci := range l.Info() {
		if strings.HasPrefix(ci.Name, "rdmawatch-sink") {
			sink += ci.NumPending + uint64(ci.NumAckPending)
		} else {
			proc += ci.NumPending
		}
	}
	return proc, sink
}
