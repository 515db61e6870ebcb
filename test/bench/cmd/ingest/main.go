// Command ingest measures how fast ClickHouse takes port_samples rows
// (issue 13, BENCHMARKS.md), side by side in one run on the same rows: a
// simulated fleet's batches (the `make run` fleet by default: 64 hosts, 2
// ports each, 2 h at 10 s, 92 k port-samples) through the wire codec, then
//
//   - old: clickhouse-client inserting them in the layout before migration
//     0011 (every counter by name in the counter_* arrays, the
//     per-priority pause arrays), FORMAT Native, with the rollup views of
//     0005 (port_samples as issue 13 measured it);
//   - new: clickhouse-client inserting them in the 0011 layout, FORMAT
//     Native, without views (0012); then "roll": the minute and hour
//     rollups rolled over the rows' time range, as the sink does
//     (chdb.Roll), timed on its own and added in "new+roll";
//   - sink: the sink (sink.Sink: JetStream consume, decode, rows, blocks)
//     writing the same batches from an embedded JetStream into the 0011
//     layout, until its consumers are drained (rolling off: the rows
//     alone, as clickhouse-client's); twice, as a restarted sink
//     (its rows checked against the table first) and as a steady one.
//
// Each round truncates the tables (port_samples and the rollups) before
// each insert and waits until the server is idle (no merge, next to no
// CPU), so no step pays for the background work of the one before. It
// prints rows/s per round, the median and the ratios new/old and sink/new
// (restarted and steady), and, with --server-pid (a ClickHouse of your
// own), the server's CPU seconds per insert: on a shared, loaded machine
// CPU time varies much less than wall time.
//
//	go run ./test/bench/cmd/ingest --clickhouse clickhouse://127.0.0.1:19000/default
//
// The rows go into two new databases next to the DSN's (<db>_ingest_<n>_old
// and _new), dropped at the end unless --keep.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/procfs"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sim"
	"github.com/rdmawatch/rdmawatch/sink"
	"github.com/rdmawatch/rdmawatch/test/bench"
)

type config struct {
	dsn, client, scenario           string
	rounds, serverPID               int
	keep, sinkDefaults              bool
	cpuProfile, memProfile          string
	sinkBatchRows, compareBatchRows int
	duration                        time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.dsn, "clickhouse", "clickhouse://127.0.0.1:19000/default", "ClickHouse DSN; the benchmark's databases are created next to its database")
	flag.StringVar(&c.client, "client", "clickhouse-client", "clickhouse-client binary")
	flag.StringVar(&c.scenario, "scenario", "live-fleet", "live scenario whose fleet gives the rows (sim.LiveScenarios)")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds of old, new and sink, alternating")
	flag.IntVar(&c.serverPID, "server-pid", 0, "pid of the ClickHouse server, to report its CPU seconds per insert (0: wall time only)")
	flag.BoolVar(&c.keep, "keep", false, "keep the benchmark's databases")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of this process while the sink runs (go tool pprof)")
	flag.StringVar(&c.memProfile, "memprofile", "", "write this process's allocation profile before and after each sink (PREFIX.N.before, PREFIX.N.after: go tool pprof -sample_index=alloc_space -base ... ...)")
	flag.IntVar(&c.sinkBatchRows, "sink-batch-rows", 0, "rows per flush (0: the sink's default)")
	flag.DurationVar(&c.duration, "duration", 0, "data time the fleet runs (0: the scenario's; longer gives more rows, so the sink's last flush, which waits out its flush interval, weighs less)")
	flag.BoolVar(&c.sinkDefaults, "sink-defaults", false, "run the sink with its default config instead of the bulk one (the defaults but MaxAckPending as large as the backlog; either way the sink holds at most two flushes of rows)")
	flag.IntVar(&c.compareBatchRows, "compare-batch-rows", 0, "also time, each round, a steady sink with this many rows per flush, beside the other (0: not)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "ingest:", err)
		os.Exit(1)
	}
}

// result is one timed insert.
type result struct {
	wall      time.Duration
	serverCPU time.Duration // -1: not measured
	// ownCPU is this process's CPU (the sink and the embedded nats-server
	// it reads from); 0 for clickhouse-client's inserts. ownSys is the
	// kernel's part of it and ownFaults the minor page faults it took: on
	// a VM whose page faults are slow (6-9 us each on a freshly booted
	// one, BENCHMARKS.md section 17) they tell whether a slow drain was
	// the kernel's.
	ownCPU, ownSys time.Duration
	ownFaults      uint64
}

func (r result) plus(o result) result {
	return result{wall: r.wall + o.wall, serverCPU: r.serverCPU + o.serverCPU}
}

func run(ctx context.Context, c config) error {
	sc, ok := sim.LiveScenarioByName(c.scenario)
	if !ok {
		return fmt.Errorf("--scenario %q: no such live scenario", c.scenario)
	}
	if c.duration > 0 {
		sc.Config.Duration = c.duration
	}
	batches, err := fleet(sc.Config)
	if err != nil {
		return err
	}
	var samples []sink.SampleRow
	for _, b := range batches {
		samples = append(samples, sink.SampleRows(b)...)
	}
	fmt.Printf("fleet %s: %d batches, %d port-samples\n", c.scenario, len(batches), len(samples))

	u, err := url.Parse(c.dsn)
	if err != nil {
		return fmt.Errorf("--clickhouse: %w", err)
	}
	base := fmt.Sprintf("%s_ingest_%d", strings.Trim(u.Path, "/"), time.Now().Unix())
	if strings.Trim(u.Path, "/") == "" {
		base = "default" + base
	}
	oldDB, err := newDatabase(ctx, c, u, base+"_old")
	if err != nil {
		return err
	}
	newDB, err := newDatabase(ctx, c, u, base+"_new")
	if err != nil {
		return err
	}
	if !c.keep {
		defer oldDB.drop(c)
		defer newDB.drop(c)
	}
	if _, err := chdb.Migrate(ctx, newDB.conn); err != nil {
		return err
	}
	if _, err := chdb.Migrate(ctx, oldDB.conn); err != nil {
		return err
	}
	// The layout before 0011: its columns dropped again, and the rollup
	// views of 0005 (dropped by 0012) created again from their text.
	if err := oldDB.conn.Exec(ctx, "ALTER TABLE port_samples DROP COLUMN "+strings.Join(columns0011, ", DROP COLUMN ")); err != nil {
		return fmt.Errorf("old layout: %w", err)
	}
	if err := createOldViews(ctx, oldDB); err != nil {
		return fmt.Errorf("old layout: %w", err)
	}
	from, to := timeRange(samples)

	// The reference rows, as clickhouse-client's Native blocks: written once
	// through clickhouse-go, read back by clickhouse-client.
	oldNative, err := nativeRows(ctx, c, oldDB, legacyColumns, legacyRows(batches, samples))
	if err != nil {
		return fmt.Errorf("old layout: %w", err)
	}
	newNative, err := nativeRows(ctx, c, newDB, sink.SampleColumns, rowValues(samples))
	if err != nil {
		return fmt.Errorf("new layout: %w", err)
	}

	js, stopNATS, err := publish(ctx, batches)
	if err != nil {
		return err
	}
	defer stopNATS()

	var olds, news, rolls, sinks, steadies, compared []result
	for round := 1; round <= c.rounds; round++ {
		o, err := clientInsert(ctx, c, oldDB, legacyColumns, oldNative, len(samples))
		if err != nil {
			return fmt.Errorf("old layout: %w", err)
		}
		n, err := clientInsert(ctx, c, newDB, sink.SampleColumns, newNative, len(samples))
		if err != nil {
			return fmt.Errorf("new layout: %w", err)
		}
		rl, err := roll(ctx, c, newDB, from, to)
		if err != nil {
			return fmt.Errorf("roll: %w", err)
		}
		s, err := sinkInsert(ctx, c, newDB, js, round, len(samples), false, c.sinkBatchRows)
		if err != nil {
			return fmt.Errorf("sink: %w", err)
		}
		st, err := sinkInsert(ctx, c, newDB, js, round, len(samples), true, c.sinkBatchRows)
		if err != nil {
			return fmt.Errorf("steady sink: %w", err)
		}
		olds, news, rolls, sinks, steadies = append(olds, o), append(news, n), append(rolls, rl), append(sinks, s), append(steadies, st)
		line := fmt.Sprintf("round %d: old %s | new %s | roll %s | sink restarted %s | sink steady %s", round, o.format(len(samples)), n.format(len(samples)), rl.format(len(samples)), s.format(len(samples)), st.format(len(samples)))
		if c.compareBatchRows > 0 {
			cb, err := sinkInsert(ctx, c, newDB, js, round, len(samples), true, c.compareBatchRows)
			if err != nil {
				return fmt.Errorf("steady sink, %d rows per flush: %w", c.compareBatchRows, err)
			}
			compared = append(compared, cb)
			line += fmt.Sprintf(" | sink steady, %d rows per flush %s", c.compareBatchRows, cb.format(len(samples)))
		}
		fmt.Println(line)
	}
	newRolled := make([]result, len(news))
	for i := range news {
		newRolled[i] = news[i].plus(rolls[i])
	}
	rate := func(rs []result) float64 {
		return float64(len(samples)) / median(rs, func(r result) time.Duration { return r.wall }).Seconds()
	}
	fmt.Printf("\nmedian rows/s (wall): old %.0f, new %.0f, new+roll %.0f, sink restarted %.0f, sink steady %.0f\n", rate(olds), rate(news), rate(newRolled), rate(sinks), rate(steadies))
	fmt.Printf("new/old %.2f, new+roll/old %.2f (target >= 5), sink/new %.2f restarted, %.2f steady (target >= 0.7)\n", rate(news)/rate(olds), rate(newRolled)/rate(olds), rate(sinks)/rate(news), rate(steadies)/rate(news))
	if c.compareBatchRows > 0 {
		fmt.Printf("sink steady, %d rows per flush: %.0f rows/s, sink/new %.2f; the other steady sink / this one %.2f\n", c.compareBatchRows, rate(compared), rate(compared)/rate(news), rate(steadies)/rate(compared))
	}
	if c.serverPID > 0 {
		cpu := func(rs []result) time.Duration {
			return median(rs, func(r result) time.Duration { return r.serverCPU })
		}
		fmt.Printf("median server CPU per insert: old %.2fs, new %.2fs, roll %.2fs, new+roll %.2fs, sink restarted %.2fs, sink steady %.2fs; old/new %.2f, old/(new+roll) %.2f\n",
			cpu(olds).Seconds(), cpu(news).Seconds(), cpu(rolls).Seconds(), cpu(newRolled).Seconds(), cpu(sinks).Seconds(), cpu(steadies).Seconds(),
			cpu(olds).Seconds()/cpu(news).Seconds(), cpu(olds).Seconds()/cpu(newRolled).Seconds())
	}
	return nil
}

func (r result) format(rows int) string {
	s := fmt.Sprintf("%6.0f rows/s (%.2fs)", float64(rows)/r.wall.Seconds(), r.wall.Seconds())
	if r.serverCPU >= 0 {
		s += fmt.Sprintf(" server CPU %.2fs", r.serverCPU.Seconds())
	}
	if r.ownCPU > 0 {
		s += fmt.Sprintf(" own CPU %.2fs (system %.2fs, %d page faults)", r.ownCPU.Seconds(), r.ownSys.Seconds(), r.ownFaults)
	}
	return s
}

func median(rs []result, f func(result) time.Duration) time.Duration {
	v := make([]time.Duration, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// fleet runs the scenario's fleet through the delta engine and the wire
// codec: the batches as the sink decodes them (raw values only where flags
// make them matter).
func fleet(cfg sim.Config) ([]*schemas.CounterBatch, error) {
	var out []*schemas.CounterBatch
	err := bench.Run(cfg, func(t *bench.Tick) error {
		for _, b := range t.Batches {
			data, err := schemas.EncodeBatch(b)
			if err != nil {
				return err
			}
			d, err := schemas.DecodeBatch(data)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// database is one of the benchmark's databases.
type database struct {
	name string
	dsn  string
	args []string // clickhouse-client connection arguments
	conn driver.Conn
}

func newDatabase(ctx context.Context, c config, u *url.URL, name string) (*database, error) {
	d := *u
	d.Path = "/" + name
	db := &database{name: name, dsn: d.String(), args: []string{"--host", u.Hostname(), "--port", u.Port(), "--database", name}}
	if u.User != nil {
		db.args = append(db.args, "--user", u.User.Username())
		if pw, ok := u.User.Password(); ok {
			db.args = append(db.args, "--password", pw)
		}
	}
	if err := chdb.EnsureDatabase(ctx, db.dsn); err != nil {
		return nil, err
	}
	conn, err := chdb.Open(ctx, db.dsn)
	if err != nil {
		return nil, err
	}
	db.conn = conn
	return db, nil
}

func (db *database) drop(c config) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db.name); err != nil {
		fmt.Fprintln(os.Stderr, "ingest: drop database", db.name+":", err)
	}
	_ = db.conn.Close()
}

// clickhouse runs clickhouse-client with stdin; it returns stdout and the
// client's CPU time.
func clickhouse(ctx context.Context, c config, db *database, stdin []byte, query string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.client, append(db.args, "--query", query)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("clickhouse-client %.60q: %w: %s", query, err, stderr.Bytes())
	}
	return out, nil
}

// truncate empties the tables, then waits until the server is idle: every
// timed step starts on a server that is not still merging the parts of the
// step before (the steady sink ran right after the restarted one, and
// clickhouse-client's insert into the new layout right after the old one's,
// whose background work counted against them).
func (db *database) truncate(ctx context.Context, c config) error {
	for _, t := range []string{"port_samples", "port_minute", "port_hour", "rollup_minute", "rollup_hour"} {
		if err := db.conn.Exec(ctx, "TRUNCATE TABLE "+t); err != nil {
			return err
		}
	}
	return db.settle(ctx, c)
}

// settle waits, up to settleMax, until the server runs no merge and (with
// --server-pid) used under settleCPU of CPU over the last settleWindow.
func (db *database) settle(ctx context.Context, c config) error {
	const (
		settleMax    = time.Minute
		settleWindow = 300 * time.Millisecond
		settleCPU    = 20 * time.Millisecond // 2 clock ticks: under 7 % of a core
	)
	deadline := time.Now().Add(settleMax)
	for time.Now().Before(deadline) {
		var merges uint64
		if err := db.conn.QueryRow(ctx, "SELECT count() FROM system.merges").Scan(&merges); err != nil {
			return fmt.Errorf("settle: %w", err)
		}
		cpu0 := processCPU(c.serverPID)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(settleWindow):
		}
		if merges == 0 && (cpu0 < 0 || cpuSince(c.serverPID, cpu0) < settleCPU) {
			return nil
		}
	}
	fmt.Fprintf(os.Stderr, "ingest: the server was still busy after %s; measuring anyway\n", settleMax)
	return nil
}

// nativeRows writes rows through clickhouse-go and returns them as
// clickhouse-client exports them (FORMAT Native).
func nativeRows(ctx context.Context, c config, db *database, columns []string, rows [][]any) ([]byte, error) {
	const block = 16384
	for start := 0; start < len(rows); start += block {
		b, err := db.conn.PrepareBatch(ctx, "INSERT INTO port_samples ("+strings.Join(columns, ", ")+")")
		if err != nil {
			return nil, err
		}
		for _, r := range rows[start:min(start+block, len(rows))] {
			if err := b.Append(r...); err != nil {
				return nil, err
			}
		}
		if err := b.Send(); err != nil {
			return nil, err
		}
	}
	return clickhouse(ctx, c, db, nil, "SELECT "+strings.Join(columns, ", ")+" FROM port_samples ORDER BY time_ms, node, device, port FORMAT Native")
}

// clientInsert times clickhouse-client inserting the Native rows into the
// emptied tables.
func clientInsert(ctx context.Context, c config, db *database, columns []string, native []byte, rows int) (result, error) {
	if err := db.truncate(ctx, c); err != nil {
		return result{}, err
	}
	cpu0 := processCPU(c.serverPID)
	t0 := time.Now()
	if _, err := clickhouse(ctx, c, db, native, "INSERT INTO port_samples ("+strings.Join(columns, ", ")+") FORMAT Native"); err != nil {
		return result{}, err
	}
	r := result{wall: time.Since(t0), serverCPU: cpuSince(c.serverPID, cpu0)}
	return r, db.check(ctx, rows)
}

func (db *database) check(ctx context.Context, rows int) error {
	var n uint64
	if err := db.conn.QueryRow(ctx, "SELECT count() FROM port_samples").Scan(&n); err != nil {
		return err
	}
	if n != uint64(rows) {
		return fmt.Errorf("%s.port_samples holds %d rows, want %d", db.name, n, rows)
	}
	return nil
}

// publish puts the batches on an embedded JetStream's counters stream.
func publish(ctx context.Context, batches []*schemas.CounterBatch) (jetstream.JetStream, func(), error) {
	dir, err := os.MkdirTemp("", "ingest-nats-")
	if err != nil {
		return nil, nil, err
	}
	ns, err := natsutil.StartEmbedded(dir, 0)
	if err != nil {
		return nil, nil, err
	}
	stop := func() { ns.Shutdown(); _ = os.RemoveAll(dir) }
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		stop()
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		err = natsutil.EnsureStreams(ctx, js, schemas.StreamOptions{Memory: true})
	}
	for _, b := range batches {
		if err != nil {
			break
		}
		var data []byte
		if data, err = schemas.EncodeBatch(b); err == nil {
			_, err = js.Publish(ctx, schemas.CountersSubject(b.Node), data, jetstream.WithMsgID(b.MsgID()))
		}
	}
	if err != nil {
		nc.Close()
		stop()
		return nil, nil, err
	}
	return js, func() { nc.Close(); stop() }, nil
}

// sinkInsert times a fresh sink (new consumers) writing the whole stream
// into the emptied tables. The bulk config (default here) is the sink's
// defaults (65536-row flushes, 1 s flush interval) with an ack window
// as large as the backlog. Since the sink bounds what it holds by rows
// (two flushes) and its default window is 65 536 messages, the two differ
// little on this fleet's 2-port messages (the old 10 000-message window
// made 10 000-row flushes). --sink-defaults runs the defaults alone;
// --sink-batch-rows overrides the flush size. A restarted
// sink counts every message as possibly written already for its first
// 30 s (sink.Config.SuspectWindow), so its rows are checked against
// port_samples before they go in; steady is a sink past that window.
func sinkInsert(ctx context.Context, c config, db *database, js jetstream.JetStream, round, rows int, steady bool, batchRows int) (result, error) {
	if err := db.truncate(ctx, c); err != nil {
		return result{}, err
	}
	cfg := sink.Config{DSN: db.dsn, ConsumerPrefix: fmt.Sprintf("ingest-%d-%t-%d", round, steady, batchRows), RollupEvery: -1, BatchRows: batchRows}
	if !c.sinkDefaults {
		cfg.MaxAckPending = rows
	}
	if steady {
		cfg.SuspectWindow = -1
	}
	s, err := sink.New(js, db.conn, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return result{}, err
	}
	if c.cpuProfile != "" {
		f, err := os.Create(fmt.Sprintf("%s.%d", c.cpuProfile, round))
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return result{}, err
		}
		defer pprof.StopCPUProfile()
	}
	if c.memProfile != "" {
		if err := writeAllocs(fmt.Sprintf("%s.%d.before", c.memProfile, round)); err != nil {
			return result{}, err
		}
		defer func() {
			if err := writeAllocs(fmt.Sprintf("%s.%d.after", c.memProfile, round)); err != nil {
				fmt.Fprintln(os.Stderr, "ingest:", err)
			}
		}()
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	self := os.Getpid()
	cpu0 := processCPU(c.serverPID)
	own0, _ := usageOf(self)
	t0 := time.Now()
	go func() { done <- s.Run(rctx) }()
	err = s.WaitDrained(ctx)
	own1, _ := usageOf(self)
	own := own1.minus(own0)
	r := result{wall: time.Since(t0), serverCPU: cpuSince(c.serverPID, cpu0), ownCPU: own.user + own.sys, ownSys: own.sys, ownFaults: own.faults}
	cancel()
	if runErr := <-done; err == nil {
		err = runErr
	}
	if err != nil {
		return result{}, err
	}
	return r, db.check(ctx, rows)
}

// writeAllocs writes the allocation profile so far (cumulative: the sink's
// share is the difference of two, pprof -base).
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC() // the profile is as of the last GC
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// usage is a process's CPU time, user and system, and its minor page
// faults, from /proc.
type usage struct {
	user, sys time.Duration
	faults    uint64
}

// usageOf reads pid's usage; ok is false without a pid or when /proc
// cannot say.
func usageOf(pid int) (u usage, ok bool) {
	if pid <= 0 {
		return usage{}, false
	}
	p, err := procfs.NewProc(pid)
	if err != nil {
		return usage{}, false
	}
	st, err := p.Stat()
	if err != nil {
		return usage{}, false
	}
	tick := time.Second / userHZ
	return usage{user: time.Duration(st.UTime) * tick, sys: time.Duration(st.STime) * tick, faults: uint64(st.MinFlt)}, true
}

// userHZ is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const userHZ = 100

func (u usage) minus(o usage) usage {
	return usage{user: u.user - o.user, sys: u.sys - o.sys, faults: u.faults - o.faults}
}

// processCPU is a process's user and system time, -1 without a pid or
// when /proc cannot say.
func processCPU(pid int) time.Duration {
	u, ok := usageOf(pid)
	if !ok {
		return -1
	}
	return u.user + u.sys
}

// cpuSince is the CPU time of process pid since cpu0, -1 when not measured.
func cpuSince(pid int, cpu0 time.Duration) time.Duration {
	now := processCPU(pid)
	if now < 0 || cpu0 < 0 {
		return -1
	}
	return now - cpu0
}

func rowValues(rows []sink.SampleRow) [][]any {
	out := make([][]any, len(rows))
	for i := range rows {
		out[i] = rows[i].Values()
	}
	return out
}

// createOldViews creates the rollup views of migration 0005 in db, from the
// migration's own text: the storage issue 13 started from.
func createOldViews(ctx context.Context, db *database) error {
	stmts, err := chdb.MigrationStatements("0005_rollups.sql")
	if err != nil {
		return err
	}
	n := 0
	for _, stmt := range stmts {
		if !strings.HasPrefix(stmt, "CREATE MATERIALIZED VIEW") {
			continue
		}
		if err := db.conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("the views of 0005: %w", err)
		}
		n++
	}
	if n != 2 {
		return fmt.Errorf("the views of 0005: found %d, want 2", n)
	}
	return nil
}

// timeRange is the minutes the samples cover, for the roll.
func timeRange(samples []sink.SampleRow) (from, to time.Time) {
	lo, hi := samples[0].TimeMs, samples[0].TimeMs
	for _, s := range samples {
		lo, hi = min(lo, s.TimeMs), max(hi, s.TimeMs)
	}
	return time.UnixMilli(lo), time.UnixMilli(hi).Add(time.Minute)
}

// roll rolls the rows just inserted into the rollups, as the sink does,
// and times it.
func roll(ctx context.Context, c config, db *database, from, to time.Time) (result, error) {
	cpu0 := processCPU(c.serverPID)
	t0 := time.Now()
	for _, r := range []chdb.Rollup{chdb.Minute, chdb.Hour} {
		if err := chdb.Roll(ctx, db.conn, r, from, to); err != nil {
			return result{}, err
		}
	}
	return result{wall: time.Since(t0), serverCPU: cpuSince(c.serverPID, cpu0)}, nil
}
