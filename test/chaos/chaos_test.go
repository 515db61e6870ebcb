//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// The simulated fleet of the main phase: 8 hosts (16 ports) read every 5 s,
// 40 minutes of data time played at 30x (80 s wall), with faults whose
// incidents open before the processor outage, change during it and resolve
// after it. The outage lasts longer than 9 minutes of data time (the old
// resend window) at this speed.
const (
	simNodes    = "8"
	simInterval = "5s"
	simDuration = "40m"
	simSpeed    = 30
)

var simFaults = []string{
	"ber_drift@+2m,20m:gpu-003/mlx5_1/1",
	"pfc_storm@+3m,16m:gpu-001/mlx5_0/1",
	"cnp_np_disabled@+5m,14m:gpu-006/mlx5_0/1",
	"counter_saturated@+10m:gpu-004/mlx5_1/1",
	"link_flap@+12m:gpu-005/mlx5_0/1",
}

// injectedIncidents are the incidents simFaults must raise; mustResolve
// when the fault ends long (quietFor) before the 40 minutes of data do.
var injectedIncidents = []struct {
	spec, typ, port string
	mustResolve     bool
	quietFor        time.Duration
}{
	{simFaults[0], schemas.TypeBERDrift, "gpu-003/mlx5_1/1", false, 0},
	{simFaults[1], schemas.TypePFCStorm, "gpu-001/mlx5_0/1", true, 21 * time.Minute},
	{simFaults[2], schemas.TypeCNPECNImbalance, "gpu-006/mlx5_0/1", true, 21 * time.Minute},
	{simFaults[3], schemas.TypeCounterSaturated, "gpu-004/mlx5_1/1", false, 0},
	{simFaults[4], schemas.TypeLinkFlap, "gpu-005/mlx5_0/1", false, 0},
}

func maxKey(m map[int]int) int {
	k := -1
	for r := range m {
		k = max(k, r)
	}
	return k
}

// oldResendWindow is the processor's former rule: after a restart only the
// events decided from the last 9 minutes of stream were published again.
const oldResendWindow = 9 * time.Minute

// processorOutage is how long both processors stay down (wall time):
// RDMAWATCH_CHAOS_PROCESSOR_OUTAGE, default 28 s.
func processorOutage(t *testing.T) time.Duration {
	v := os.Getenv("RDMAWATCH_CHAOS_PROCESSOR_OUTAGE")
	if v == "" {
		return 28 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 5*time.Second {
		t.Fatalf("RDMAWATCH_CHAOS_PROCESSOR_OUTAGE=%q: want a duration of at least 5s", v)
	}
	return d
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

// natsServer is deploy/nats/server.sh on a port and store of the test.
type natsServer struct {
	dir  string
	port int
	url  string
}

func (n *natsServer) run(verb string) (string, error) {
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "deploy", "nats", "server.sh"), verb)
	cmd.Env = append(os.Environ(), "RDMAWATCH_NATS_DIR="+n.dir, "RDMAWATCH_NATS_PORT="+strconv.Itoa(n.port))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("deploy/nats/server.sh %s: %v\n%s", verb, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// clickHouse is deploy/clickhouse/local.sh on ports and a folder of the test.
type clickHouse struct {
	dir       string
	tcp, http int
}

func (c *clickHouse) run(verb string) (string, error) {
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "deploy", "clickhouse", "local.sh"), verb)
	cmd.Env = append(os.Environ(), "RDMAWATCH_CH_DIR="+c.dir,
		"RDMAWATCH_CH_TCP_PORT="+strconv.Itoa(c.tcp), "RDMAWATCH_CH_HTTP_PORT="+strconv.Itoa(c.http))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("deploy/clickhouse/local.sh %s: %v\n%s", verb, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// TestChaos runs the pipeline as separate processes on a standalone
// nats-server with file storage and a private ClickHouse, kills every part
// with SIGKILL (collector, both processors, sink, nats-server) and stops
// ClickHouse for a while, then checks from the outside: every sample the
// stream acknowledged is in port_samples FINAL, no duplicate survives FINAL,
// the rollups equal the raw rows, and every incident's revisions 0..n are on
// the events stream exactly once, across a processor outage longer than 9
// minutes of data time.
func TestChaos(tt *testing.T) {
	// t records every failure so the run's last lines name them: CI shows
	// the end of a failing run, after the roles' log tails.
	t := &recorder{T: tt}
	begin := time.Now()
	base := portBase()
	ns := &natsServer{dir: filepath.Join(t.TempDir(), "nats"), port: base}
	ch := &clickHouse{dir: filepath.Join(t.TempDir(), "clickhouse"), tcp: base + 90, http: base + 91}
	url, err := ns.run("up")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := ns.run("down"); err != nil {
			t.Errorf("stop nats-server: %v", err)
		}
	})
	chDSN, err := ch.run("up")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := ch.run("down"); err != nil {
			t.Errorf("stop clickhouse: %v", err)
		}
	})
	dsn := strings.TrimSuffix(chDSN, "/default") + "/chaos"
	t.Logf("nats %s (store %s), clickhouse %s: up in %s", url, ns.dir, dsn, time.Since(begin).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute+processorOutage(t.T))
	defer cancel()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The admin steps: streams and tables exist before any role starts.
	if args := streamsApplyArgs(url); args != nil {
		if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("rdmawatch %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	} else if err := natsutil.EnsureStreams(ctx, js, schemas.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, bin, "migrate", "--clickhouse", dsn).CombinedOutput(); err != nil {
		t.Fatalf("rdmawatch migrate: %v\n%s", err, out)
	}

	// Inventory messages count in a collector's acknowledged total, but the
	// inventory stream keeps only the last few per node: follow it from the
	// start to count them all.
	inv := &inventoryLog{times: map[string]int64{}}
	invCons, err := js.OrderedConsumer(ctx, schemas.StreamInventory, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	invCC, err := invCons.Consume(inv.add)
	if err != nil {
		t.Fatal(err)
	}
	defer invCC.Stop()

	// The processors serve /metrics: the drain waits until what they have
	// processed stops growing (caught up), not only until the sink is.
	procMetrics := []string{fmt.Sprintf("http://127.0.0.1:%d/metrics", base+80), fmt.Sprintf("http://127.0.0.1:%d/metrics", base+81)}
	proc0 := newRole(t, "processor-0", "processor", "--nats", url, "--instance", "0", "--instances", "2", "--listen", fmt.Sprintf("127.0.0.1:%d", base+80))
	proc1 := newRole(t, "processor-1", "processor", "--nats", url, "--instance", "1", "--instances", "2", "--listen", fmt.Sprintf("127.0.0.1:%d", base+81))
	snk := newRole(t, "sink", "sink", "--nats", url, "--clickhouse", dsn, "--flush-interval", "500ms", "--rollup-every", "1s", "--rollup-delay", "5s", "--rollup-lookback", "2m")
	// Phase A: the fleet in real time (speed 1), so that the collector
	// started after its kill -9 publishes later data times, as a real
	// collector restarted on a host does. (A simulated collector restarted
	// at 30x would replay data times already published with new ids; no
	// flag starts the simulator at a given data time.)
	colA := newRole(t, "collector-a", "collector", "--source", "sim", "--nats", url,
		"--sim-nodes", simNodes, "--sim-interval", "1s", "--sim-duration", "1h", "--speed", "1")
	argsB := []string{"collector", "--source", "sim", "--nats", url,
		"--sim-nodes", simNodes, "--sim-interval", simInterval, "--sim-duration", simDuration, "--speed", strconv.Itoa(simSpeed)}
	for _, f := range simFaults {
		argsB = append(argsB, "--inject", f)
	}
	colB := newRole(t, "collector-b", argsB...)
	colB.endsByItself = true
	roles := []*role{proc0, proc1, snk, colA, colB}

	// The schedule, in wall time from the start of the roles. The
	// processors stay down for processorOutage (at 30x, 28 s are 14 minutes
	// of data time); RDMAWATCH_CHAOS_PROCESSOR_OUTAGE=10m30s makes it longer
	// than the old resend window in wall time too (run with -timeout 30m).
	outage := processorOutage(t.T)
	var outageFrom, outageTo time.Time
	steps := []struct {
		at   time.Duration
		what string
		do   func()
	}{
		{10 * time.Second, "kill -9 collector (phase A, real time)", colA.kill9},
		{12 * time.Second, "start collector (phase B: 40 min of data at 30x, faults injected)", colB.start},
		{20 * time.Second, "kill -9 sink", snk.kill9},
		{23 * time.Second, "restart sink", snk.start},
		{28 * time.Second, "kill -9 both processors (outage starts)", func() {
			proc0.kill9()
			proc1.kill9()
			var err error
			if outageFrom, err = lastDataTime(ctx, js); err != nil {
				t.Fatalf("data time at the processor kill: %v", err)
			}
		}},
		{32 * time.Second, "kill -9 nats-server", func() {
			if _, err := ns.run("kill"); err != nil {
				t.Fatal(err)
			}
		}},
		// The sink still writes what it had fetched into ClickHouse, but
		// its acks cannot reach the broker: a kill -9 now is the crash
		// between INSERT and ack, and those messages come again after the
		// ack wait.
		{33500 * time.Millisecond, "kill -9 sink while nats-server is down (rows inserted, acks not delivered)", snk.kill9},
		{37 * time.Second, "restart nats-server on its store", func() {
			if _, err := ns.run("up"); err != nil {
				t.Fatal(err)
			}
		}},
		{38 * time.Second, "restart sink", snk.start},
		{44 * time.Second, "stop ClickHouse", func() {
			if _, err := ch.run("down"); err != nil {
				t.Fatal(err)
			}
		}},
		{28*time.Second + outage, "restart both processors (outage ends)", func() {
			var err error
			if outageTo, err = lastDataTime(ctx, js); err != nil {
				t.Fatalf("data time at the processor restart: %v", err)
			}
			proc0.start()
			proc1.start()
			t.Logf("processor outage: %s wall, data time %s to %s (%s of data time; the old resend window was %s)",
				outage, outageFrom.Format(time.RFC3339), outageTo.Format(time.RFC3339), outageTo.Sub(outageFrom), oldResendWindow)
		}},
		{66 * time.Second, "restart ClickHouse", func() {
			if _, err := ch.run("up"); err != nil {
				t.Fatal(err)
			}
		}},
		{70 * time.Second, "kill -9 sink", snk.kill9},
		{72 * time.Second, "restart sink", snk.start},
		// A second crash between INSERT and ack, in case the first found
		// the sink with nothing fetched.
		{78 * time.Second, "kill -9 nats-server", func() {
			if _, err := ns.run("kill"); err != nil {
				t.Fatal(err)
			}
		}},
		{79500 * time.Millisecond, "kill -9 sink while nats-server is down", snk.kill9},
		{82 * time.Second, "restart nats-server on its store", func() {
			if _, err := ns.run("up"); err != nil {
				t.Fatal(err)
			}
		}},
		{83 * time.Second, "restart sink", snk.start},
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].at < steps[j].at })
	t0 := time.Now()
	proc0.start()
	proc1.start()
	snk.start()
	colA.start()
	for _, s := range steps {
		if w := time.Until(t0.Add(s.at)); w > 0 {
			time.Sleep(w)
		}
		t.Logf("+%5.1fs %s", time.Since(t0).Seconds(), s.what)
		s.do()
	}

	// The collector ends by itself at the end of its data.
	waitCtx, cancelWait := context.WithTimeout(ctx, 4*time.Minute)
	err = colB.wait(waitCtx)
	cancelWait()
	if err != nil {
		t.Errorf("collector (phase B) did not end cleanly at the end of its data: %v\n%s", err, colB.log.tail(20))
	}
	t.Logf("+%5.1fs collector finished its data", time.Since(t0).Seconds())

	if err := waitDrained(ctx, js, procMetrics); err != nil {
		t.Errorf("the pipeline did not drain: %v", err)
	}
	t.Logf("+%5.1fs drained", time.Since(t0).Seconds())
	for _, r := range []*role{proc0, proc1, snk} {
		r.stop(20 * time.Second)
	}
	for _, r := range roles {
		for _, c := range r.crashes() {
			t.Errorf("a role died by itself: %s\n%s", c, r.log.tail(20))
		}
	}

	conn, err := chdb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	published := checkSamples(ctx, t, js, conn, colB, inv)
	checkDuplicates(ctx, t, conn)
	checkRollups(ctx, t, conn, "port_minute_v", "minute", "toStartOfMinute(ts)")
	checkRollups(ctx, t, conn, "port_hour_v", "hour", "toStartOfHour(ts)")
	checkRevisions(ctx, t, js, conn, outageFrom, outageTo)
	checkNoDeadLetters(ctx, t, js)
	t.Logf("%d port samples on the stream; whole run %s", published, time.Since(begin).Round(time.Second))
	// How the restarted processors matched the revisions the killed ones
	// had published: what to look at first if checkRevisions fails.
	for _, r := range []*role{proc0, proc1} {
		for _, line := range strings.Split(r.log.String(), "\n") {
			if strings.Contains(line, "caught up with the counters stream") || strings.Contains(line, "resolution renumbered") {
				t.Logf("%s: %s", r.name, line)
			}
		}
	}
	if t.Failed() {
		for _, r := range roles {
			t.Logf("--- %s: %d runs, log tail:\n%s", r.name, r.starts, r.log.tail(12))
		}
		t.Logf("=== failed checks:\n%s", strings.Join(t.failures(), "\n"))
	}
}

// recorder is a testing.T that keeps the first line of every failure.
type recorder struct {
	*testing.T
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.T.Helper()
	r.note(fmt.Sprintf(format, args...))
	r.T.Errorf(format, args...)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.T.Helper()
	r.note(fmt.Sprintf(format, args...))
	r.T.Fatalf(format, args...)
}

func (r *recorder) Fatal(args ...any) {
	r.T.Helper()
	r.note(fmt.Sprint(args...))
	r.T.Fatal(args...)
}

func (r *recorder) note(msg string) {
	first, _, _ := strings.Cut(msg, "\n")
	r.mu.Lock()
	r.msgs = append(r.msgs, first)
	r.mu.Unlock()
}

func (r *recorder) failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// metricSum sums every series of metric that url's Prometheus text shows.
func metricSum(ctx context.Context, url, metric string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", url, line, err)
		}
		sum += v
	}
	return sum, nil
}

// lastDataTime is the data time of the newest batch on the counters stream.
func lastDataTime(ctx context.Context, js jetstream.JetStream) (time.Time, error) {
	var out time.Time
	err := testwait.Poll(20*time.Second, "a batch on the counters stream", func() error {
		s, err := js.Stream(ctx, schemas.StreamCounters)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs == 0 {
			return errors.New("counters stream is empty")
		}
		m, err := s.GetMsg(ctx, info.State.LastSeq)
		if err != nil {
			return err
		}
		b, err := schemas.DecodeBatch(m.Data)
		if err != nil {
			return err
		}
		out = time.UnixMilli(b.TimeMs).UTC()
		return nil
	})
	return out, err
}

// waitDrained waits until the sink's consumers have nothing pending or
// unacknowledged and the events stream has stopped growing (the processors
// are through the counters stream), stable for 5 s. The ack wait of a
// killed sink's messages (60 s) bounds how long this can take.
func waitDrained(ctx context.Context, js jetstream.JetStream, procMetrics []string) error {
	var stableSince time.Time // zero: not stable
	lastEvents, lastProcessed := uint64(0), -1.0
	return testwait.Poll(3*time.Minute, "the pipeline drained", func() error {
		// The processors first: a processor catching up after its outage
		// may decide nothing for seconds while it reads minutes of data,
		// and the events stream alone would look settled.
		processed := 0.0
		for _, u := range procMetrics {
			v, err := metricSum(ctx, u, "rdmawatch_processor_samples_processed_total")
			if err != nil {
				stableSince = time.Time{}
				return err
			}
			processed += v
		}
		if processed != lastProcessed {
			stableSince, lastProcessed = time.Time{}, processed
			return fmt.Errorf("the processors are still processing (%.0f samples)", processed)
		}
		for _, name := range []string{"counters", "events", "inventory"} {
			stream := map[string]string{"counters": schemas.StreamCounters, "events": schemas.StreamEvents, "inventory": schemas.StreamInventory}[name]
			c, err := js.Consumer(ctx, stream, "rdmawatch-sink-"+name)
			if err != nil {
				stableSince = time.Time{}
				return fmt.Errorf("sink consumer %s: %w", name, err)
			}
			info, err := c.Info(ctx)
			if err != nil {
				stableSince = time.Time{}
				return err
			}
			if info.NumPending > 0 || info.NumAckPending > 0 {
				stableSince = time.Time{}
				return fmt.Errorf("sink consumer %s: %d pending, %d unacknowledged", name, info.NumPending, info.NumAckPending)
			}
		}
		s, err := js.Stream(ctx, schemas.StreamEvents)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.LastSeq != lastEvents {
			stableSince, lastEvents = time.Time{}, info.State.LastSeq
			return fmt.Errorf("events stream still growing (%d)", lastEvents)
		}
		if stableSince.IsZero() {
			stableSince = time.Now()
		}
		if stable := time.Since(stableSince); stable < 5*time.Second {
			return fmt.Errorf("stable for %v", stable.Round(time.Second))
		}
		return nil
	})
}

// readStream returns every message of a stream, in order.
func readStream(ctx context.Context, js jetstream.JetStream, stream string) ([]jetstream.Msg, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, err
	}
	var out []jetstream.Msg
	for uint64(len(out)) < info.State.Msgs {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			out = append(out, m)
			n++
		}
		if batch.Error() != nil && !errors.Is(batch.Error(), nats.ErrTimeout) {
			return nil, batch.Error()
		}
		if n == 0 {
			return out, fmt.Errorf("%s: read %d of %d messages, then nothing", stream, len(out), info.State.Msgs)
		}
	}
	return out, nil
}

type sampleKey struct {
	node, device string
	port         int
	timeMs       int64
}

func (k sampleKey) String() string {
	return fmt.Sprintf("%s/%s/%d@%s", k.node, k.device, k.port, time.UnixMilli(k.timeMs).UTC().Format(schemas.TimeLayout))
}

var (
	publishedRE = regexp.MustCompile(`simulated collectors stopped.*published=(\d+)`)
	dataStartRE = regexp.MustCompile(`simulated collectors started.*data_start=(\S+)`)
)

// checkSamples: every port sample in a batch the counters stream holds
// (what NATS acknowledged to the collectors) is a row of port_samples FINAL,
// and nothing else is.
func checkSamples(ctx context.Context, t *recorder, js jetstream.JetStream, conn driver.Conn, colB *role, inv *inventoryLog) int {
	t.Helper()
	msgs, err := readStream(ctx, js, schemas.StreamCounters)
	if err != nil {
		t.Errorf("read the counters stream: %v", err)
		return 0
	}
	// Phase B's batches are those from its first data time on (phase A ran
	// in real time before it started).
	var startB int64 = -1
	if m := dataStartRE.FindStringSubmatch(colB.log.String()); m != nil {
		if ts, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
			startB = ts.UnixMilli()
		}
	}
	if startB < 0 {
		t.Errorf("collector (phase B) logged no 'simulated collectors started ... data_start=' line")
	}
	want := map[sampleKey]uint64{} // -> stream seq
	undecodable, fromB := 0, 0
	for _, m := range msgs {
		b, err := schemas.DecodeBatch(m.Data())
		if err != nil {
			undecodable++
			continue
		}
		if startB >= 0 && b.TimeMs >= startB {
			fromB++
		}
		md, _ := m.Metadata()
		for _, p := range b.Ports {
			seq := uint64(0)
			if md != nil {
				seq = md.Sequence.Stream
			}
			want[sampleKey{b.Node, p.Device, p.Port, p.TimeMs}] = seq
		}
	}
	if undecodable > 0 {
		t.Errorf("%d messages of the counters stream do not decode", undecodable)
	}
	// The streams must hold every message the phase B collector was told
	// was acknowledged (its own count of batches and inventories, from its
	// log), through the nats-server kill -9.
	if m := publishedRE.FindStringSubmatch(colB.log.String()); m != nil {
		acked, _ := strconv.Atoi(m[1])
		invB := inv.since(startB)
		if fromB+invB < acked {
			t.Errorf("NATS lost acknowledged messages: the streams hold %d batches and %d inventories of the phase B collector, which was acknowledged %d messages",
				fromB, invB, acked)
		}
		t.Logf("counters stream: %d batches (%d of phase B, plus %d inventories; its collector was acknowledged %d messages), %d distinct port samples",
			len(msgs), fromB, invB, acked, len(want))
	} else {
		t.Errorf("collector (phase B) logged no 'simulated collectors stopped ... published=N' line")
	}

	rows, err := conn.Query(ctx, "SELECT node, device, port, time_ms FROM port_samples FINAL")
	if err != nil {
		t.Errorf("port_samples: %v", err)
		return len(want)
	}
	defer rows.Close()
	got := map[sampleKey]bool{}
	var extra []string
	for rows.Next() {
		var k sampleKey
		var port uint16
		if err := rows.Scan(&k.node, &k.device, &port, &k.timeMs); err != nil {
			t.Errorf("port_samples: %v", err)
			return len(want)
		}
		k.port = int(port)
		got[k] = true
		if _, ok := want[k]; !ok {
			extra = append(extra, k.String())
		}
	}
	var missing []string
	for k, seq := range want {
		if !got[k] {
			missing = append(missing, fmt.Sprintf("%s (stream seq %d)", k, seq))
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("samples lost: %d of the %d port samples on the counters stream are not in port_samples FINAL; first: %s",
			len(missing), len(want), strings.Join(missing[:min(5, len(missing))], ", "))
	}
	if len(extra) > 0 {
		t.Errorf("%d rows of port_samples FINAL are in no batch of the counters stream; first: %s",
			len(extra), strings.Join(extra[:min(5, len(extra))], ", "))
	}
	return len(want)
}

// checkDuplicates: FINAL leaves one row per key.
func checkDuplicates(ctx context.Context, t *recorder, conn driver.Conn) {
	t.Helper()
	for _, c := range []struct{ table, key string }{
		{"port_samples", "node, device, port, time_ms"},
		{"events", "type, id, revision"},
	} {
		var final, distinct, raw uint64
		q := fmt.Sprintf("SELECT count(), uniqExact(%s) FROM %s FINAL", c.key, c.table)
		if err := conn.QueryRow(ctx, q).Scan(&final, &distinct); err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+c.table).Scan(&raw); err != nil {
			t.Errorf("%s: %v", c.table, err)
		}
		if final != distinct {
			t.Errorf("%s FINAL: %d rows for %d keys (%s): %d duplicates survive FINAL", c.table, final, distinct, c.key, final-distinct)
		}
		t.Logf("%s: %d rows FINAL, %d before FINAL (copies not merged yet: %d)", c.table, final, raw, raw-final)
	}
}

// checkRollups compares a rollup view with the same sums over port_samples
// FINAL, per port per bucket.
func checkRollups(ctx context.Context, t *recorder, conn driver.Conn, view, bucket, bucketExpr string) {
	t.Helper()
	cols := []struct{ view, raw string }{
		{"samples", "count()"},
		{"interval_ms", "sum(interval_ms)"},
		{"rcv_bytes", "sum(rcv_bytes)"},
		{"xmit_bytes", "sum(xmit_bytes)"},
		{"symbol_errors", "sum(symbol_error)"},
		{"link_downs", "sum(link_downed)"},
		{"tx_pause_us", "sum(tx_pause_duration_us)"},
		{"cnp_sent", "sum(np_cnp_sent)"},
		{"ecn_marked", "sum(np_ecn_marked_roce_packets)"},
	}
	var rawSel, viewSel []string
	for _, c := range cols {
		rawSel = append(rawSel, "toInt64("+c.raw+")")
		viewSel = append(viewSel, "toInt64("+c.view+")")
	}
	read := func(q string) (map[string][]int64, error) {
		rows, err := conn.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
		defer rows.Close()
		out := map[string][]int64{}
		for rows.Next() {
			var node, device string
			var port uint16
			var b time.Time
			vals := make([]int64, len(cols))
			dest := []any{&b, &node, &device, &port}
			for i := range vals {
				dest = append(dest, &vals[i])
			}
			if err := rows.Scan(dest...); err != nil {
				return nil, err
			}
			out[fmt.Sprintf("%s/%s/%d %s", node, device, port, b.UTC().Format(time.RFC3339))] = vals
		}
		return out, rows.Err()
	}
	raw, err := read(fmt.Sprintf("SELECT %s AS b, node, device, port, %s FROM port_samples FINAL WHERE first = 0 GROUP BY b, node, device, port",
		bucketExpr, strings.Join(rawSel, ", ")))
	if err != nil {
		t.Errorf("rollup check: %v", err)
		return
	}
	rolled, err := read(fmt.Sprintf("SELECT %s, node, device, port, %s FROM %s", bucket, strings.Join(viewSel, ", "), view))
	if err != nil {
		t.Errorf("rollup check: %v", err)
		return
	}
	var diffs []string
	total := make([]int64, len(cols))
	for k, want := range raw {
		got, ok := rolled[k]
		if !ok {
			diffs = append(diffs, k+": missing from "+view)
			continue
		}
		var d []string
		for i := range cols {
			if got[i] != want[i] {
				d = append(d, fmt.Sprintf("%s %d vs raw %d", cols[i].view, got[i], want[i]))
				total[i] += got[i] - want[i]
			}
		}
		if len(d) > 0 {
			diffs = append(diffs, k+": "+strings.Join(d, ", "))
		}
	}
	for k := range rolled {
		if _, ok := raw[k]; !ok {
			diffs = append(diffs, k+": in "+view+" but no raw rows")
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		var sum []string
		for i, c := range cols {
			if total[i] != 0 {
				sum = append(sum, fmt.Sprintf("%s %+d", c.view, total[i]))
			}
		}
		t.Errorf("%s differs from port_samples FINAL in %d of %d port-%ss (in all: %s); first: %s",
			view, len(diffs), len(raw), bucket, strings.Join(sum, ", "), strings.Join(diffs[:min(3, len(diffs))], "; "))
	} else {
		t.Logf("%s equals port_samples FINAL over %d port-%ss", view, len(raw), bucket)
	}
}

// checkRevisions: on the events stream, every Nats-Msg-Id once, equal to
// the event's own id#revision, every incident's revisions 0..n each once;
// the events table holds the same; and incident state changes decided
// while the processors were down are among them.
func checkRevisions(ctx context.Context, t *recorder, js jetstream.JetStream, conn driver.Conn, outageFrom, outageTo time.Time) {
	t.Helper()
	if d := outageTo.Sub(outageFrom); d <= oldResendWindow {
		t.Errorf("the processor outage covered %s of data time, not more than the old %s resend window: the test did not test it", d, oldResendWindow)
	}
	msgs, err := readStream(ctx, js, schemas.StreamEvents)
	if err != nil {
		t.Errorf("read the events stream: %v", err)
		return
	}
	ids := map[string]int{}
	revs := map[string]map[int]int{} // incident -> revision -> copies
	var states []string
	duringOutage := 0
	for _, m := range msgs {
		ev, err := schemas.DecodeEvent(m.Data())
		if err != nil {
			t.Errorf("undecodable event on the stream (%s): %v", m.Subject(), err)
			continue
		}
		id := m.Headers().Get(nats.MsgIdHdr)
		ids[id]++
		if id != ev.MsgID() {
			t.Errorf("event %s revision %d published with Nats-Msg-Id %q, want %q", ev.ID, ev.Revision, id, ev.MsgID())
		}
		if revs[ev.ID] == nil {
			revs[ev.ID] = map[int]int{}
		}
		revs[ev.ID][int(ev.Revision)]++
		dt := ev.DetectedAt.Time()
		if !dt.Before(outageFrom) && !dt.After(outageTo) {
			duringOutage++
			states = append(states, fmt.Sprintf("%s#%d %s", ev.ID, ev.Revision, ev.State))
		}
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("Nats-Msg-Id %q is %d times on the events stream", id, n)
		}
	}
	var incidents []string
	for id := range revs {
		incidents = append(incidents, id)
	}
	sort.Strings(incidents)
	for _, id := range incidents {
		r := revs[id]
		maxRev := -1
		for rev := range r {
			maxRev = max(maxRev, rev)
		}
		var missing, dup []string
		for rev := 0; rev <= maxRev; rev++ {
			switch r[rev] {
			case 0:
				missing = append(missing, strconv.Itoa(rev))
			case 1:
			default:
				dup = append(dup, fmt.Sprintf("%d (x%d)", rev, r[rev]))
			}
		}
		if len(missing) > 0 || len(dup) > 0 {
			t.Errorf("incident %s: revisions 0..%d on the events stream: missing [%s], more than once [%s]",
				id, maxRev, strings.Join(missing, " "), strings.Join(dup, " "))
		}
	}
	t.Logf("events stream: %d events of %d incidents; %d decided during the processor outage: %s",
		len(msgs), len(incidents), duringOutage, strings.Join(states, ", "))
	if len(incidents) == 0 {
		t.Errorf("no incident at all on the events stream: the injected faults %v raised nothing", simFaults)
	}
	if duringOutage == 0 {
		t.Errorf("no incident state change with a detection time inside the processor outage (%s to %s) is on the events stream: "+
			"either the faults raised nothing then, or the restarted processors did not publish what they decided about the outage",
			outageFrom.Format(time.RFC3339), outageTo.Format(time.RFC3339))
	}
	// Every injected fault raised its incident, and those that ended long
	// before the data did are resolved: revisions 0..n exactly once cannot
	// see an incident whose later revisions are all missing.
	last := map[string]string{} // incident -> state of its highest revision
	for _, m := range msgs {
		if ev, err := schemas.DecodeEvent(m.Data()); err == nil {
			if rev := maxKey(revs[ev.ID]); int(ev.Revision) == rev {
				last[ev.ID] = ev.State
			}
		}
	}
	for _, f := range injectedIncidents {
		var found []string
		for id, state := range last {
			if strings.HasPrefix(id, f.typ+"/"+f.port+"/") {
				found = append(found, id+" "+state)
				if f.mustResolve && state != schemas.StateResolved {
					t.Errorf("incident %s of the fault %s (over %s before the data ends) is left %q on the events stream: its later revisions are missing",
						id, f.spec, f.quietFor, state)
				}
			}
		}
		if len(found) == 0 {
			t.Errorf("the fault %s raised no %s incident on %s on the events stream", f.spec, f.typ, f.port)
		}
	}

	// The events table: the same (id, revision) set under FINAL.
	rows, err := conn.Query(ctx, "SELECT id, revision FROM events FINAL")
	if err != nil {
		t.Errorf("events: %v", err)
		return
	}
	defer rows.Close()
	inTable := map[string]bool{}
	for rows.Next() {
		var id string
		var rev uint32
		if err := rows.Scan(&id, &rev); err != nil {
			t.Errorf("events: %v", err)
			return
		}
		inTable[fmt.Sprintf("%s#%d", id, rev)] = true
	}
	var notStored []string
	for id := range ids {
		if !inTable[id] {
			notStored = append(notStored, id)
		}
	}
	sort.Strings(notStored)
	if len(notStored) > 0 {
		t.Errorf("%d events of the stream are not in the events table; first: %s", len(notStored), strings.Join(notStored[:min(5, len(notStored))], ", "))
	}
	if len(inTable) != len(ids) {
		t.Errorf("events table holds %d (id, revision), the stream %d", len(inTable), len(ids))
	}
}

// checkNoDeadLetters: a run without poison refuses nothing; outages must
// never turn good messages into dead letters.
func checkNoDeadLetters(ctx context.Context, t *recorder, js jetstream.JetStream) {
	t.Helper()
	s, err := js.Stream(ctx, schemas.StreamDeadLetter)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return
	}
	if err != nil {
		t.Errorf("dead-letter stream: %v", err)
		return
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Errorf("dead-letter stream: %v", err)
		return
	}
	if n := info.State.Msgs; n > 0 {
		m, _ := s.GetMsg(ctx, info.State.FirstSeq)
		first := ""
		if m != nil {
			first = fmt.Sprintf(" (first: %s from %s: %s)", m.Header.Get(schemas.HeaderDeadSubject),
				m.Header.Get(schemas.HeaderDeadRole), m.Header.Get(schemas.HeaderDeadReason))
		}
		t.Errorf("%d dead letters in a run without poison%s", n, first)
	}
}

// inventoryLog records every inventory message seen on the stream, by its
// Nats-Msg-Id, with its data time.
type inventoryLog struct {
	mu    sync.Mutex
	times map[string]int64
}

func (l *inventoryLog) add(m jetstream.Msg) {
	t := int64(-1)
	if inv, err := schemas.DecodeInventory(m.Data()); err == nil {
		t = inv.TimeMs
	}
	l.mu.Lock()
	l.times[m.Headers().Get(nats.MsgIdHdr)] = t
	l.mu.Unlock()
}

// since counts the inventories of data time from on.
func (l *inventoryLog) since(from int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, t := range l.times {
		if t >= from {
			n++
		}
	}
	return n
}
