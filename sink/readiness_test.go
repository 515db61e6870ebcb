package sink_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/telemetry"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// telemetryOf serves the sink's readiness the way `rdmawatch sink` does,
// and the two series of its Stats these tests read, under the names the
// command exports them by (cmd/rdmawatch/metrics_sink.go, whose tests
// check the whole set).
func telemetryOf(s *sink.Sink) http.Handler {
	tel := telemetry.New("sink", "test", nil)
	errs := telemetry.Desc("sink_insert_errors_total", "INSERT attempts that failed.", "table")
	tel.Registry().MustRegister(telemetry.Snapshot([]*prometheus.Desc{errs, telemetry.DeadLetters}, func(ch chan<- prometheus.Metric) {
		st := s.Stats()["port_samples"]
		ch <- prometheus.MustNewConstMetric(errs, prometheus.CounterValue, float64(st.InsertErrors), "port_samples")
		ch <- prometheus.MustNewConstMetric(telemetry.DeadLetters, prometheus.CounterValue, float64(st.DeadLettered), "sink", schemas.StreamCounters)
	}))
	tel.AddCheck("clickhouse", func(context.Context) error { return s.Ready() })
	return tel.Handler()
}

func get(h http.Handler, path string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// metric reads one sample of /metrics, e.g.
// rdmawatch_sink_insert_errors_total{table="port_samples"}.
func metric(t *testing.T, h http.Handler, series string) float64 {
	t.Helper()
	_, body := get(h, "/metrics")
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// readyz waits until /readyz answers code with a body that has want.
func readyz(t *testing.T, h http.Handler, code int, want string) {
	t.Helper()
	testwait.For(t, 30*time.Second, fmt.Sprintf("/readyz %d with %q", code, want), func() error {
		got, body := get(h, "/readyz")
		if got != code || !strings.Contains(body, want) {
			return fmt.Errorf("/readyz %d %q, want %d with %q", got, strings.TrimSpace(body), code, want)
		}
		return nil
	})
}

// partitions is the set of port_samples' active partitions.
func partitions(t *testing.T, conn driver.Conn) []string {
	t.Helper()
	return chtest.Strings(t, conn, `SELECT DISTINCT partition FROM system.parts
		WHERE database = currentDatabase() AND table = 'port_samples' AND active ORDER BY partition`)
}

// /readyz is 503 while ClickHouse is away and names it, 200 again once an
// insert succeeds; every failed call of the write path counts in
// insert_errors_total, the check for rows already there too (the first call
// of a flush in the window after a start, and the only one while
// ClickHouse is away).
func TestSinkReadyzThroughAnOutage(t *testing.T) {
	t.Parallel()
	srv := chtest.StartPrivate(t)
	conn, dsn := migrated(t, srv.DSN)
	js := startNATS(t)
	cfg := fastConfig(dsn)
	cfg.InsertTimeout = time.Second
	cfg.RetryMax = 300 * time.Millisecond
	cfg.ProbeEvery = 200 * time.Millisecond
	cfg.MaxBehind = schemas.DefaultMaxBehind
	cfg.SuspectWindow = 10 * time.Minute // every message is checked first, as after a start
	s, _ := runSink(t, js, conn, cfg)
	h := telemetryOf(s)

	now := time.Now().UnixMilli()
	publishBatch(t, js, batchAt("gpu-001", 1, 2, now))
	waitCount(t, conn, "port_samples", "", 2)
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
	readyz(t, h, http.StatusOK, "ready")
	const errs = `rdmawatch_sink_insert_errors_total{table="port_samples"}`
	if n := metric(t, h, errs); n != 0 {
		t.Fatalf("%s %v before the outage, want 0", errs, n)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	// Idle, the probe finds the outage.
	readyz(t, h, http.StatusServiceUnavailable, "clickhouse: clickhouse does not answer")
	publishBatch(t, js, batchAt("gpu-001", 2, 2, now+10_000))
	testwait.For(t, 30*time.Second, "the failed calls counted", func() error {
		if n := metric(t, h, errs); n < 2 {
			return fmt.Errorf("%s %v during the outage, want the failed calls counted", errs, n)
		}
		return nil
	})
	readyz(t, h, http.StatusServiceUnavailable, "port_samples: the last write failed")
	if st := s.Stats()["port_samples"]; st.CheckErrors == 0 || st.CheckErrors > st.InsertErrors {
		t.Errorf("stats %+v: want the failed checks for rows already there counted, within InsertErrors", st)
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	waitCount(t, conn, "port_samples", "", 4)
	readyz(t, h, http.StatusOK, "ready")
}

// A user that may not write (readonly=1, as a profile of users.xml sets
// it) makes the sink not ready at once, before any INSERT failed, and the
// INSERT that fails says so too.
func TestSinkNotReadyWhileReadOnly(t *testing.T) {
	t.Parallel()
	_, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	ro := chtest.Open(t, dsn+"?readonly=1")
	cfg := fastConfig(dsn)
	cfg.ProbeEvery = 200 * time.Millisecond
	cfg.ShutdownTimeout = time.Second
	s, err := sink.New(js, ro, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	// What it could not write is left for redelivery, and Run says so.
	defer func() {
		cancel()
		if err := <-done; err == nil || !strings.Contains(err.Error(), "not written") {
			t.Errorf("Run = %v, want the messages it could not write named", err)
		}
	}()
	h := telemetryOf(s)
	readyz(t, h, http.StatusServiceUnavailable, "clickhouse user is read-only (readonly=1)")
	publishBatch(t, js, batchAt("gpu-001", 1, 2, time.Now().UnixMilli()))
	readyz(t, h, http.StatusServiceUnavailable, "port_samples: the last write failed")
	if st := s.Stats()["port_samples"]; st.InsertErrors == 0 || st.DeadLettered != 0 {
		t.Errorf("stats %+v: want insert errors and nothing dead-lettered (a read-only user is the server's state)", st)
	}
}

// One collector credential cannot flood ClickHouse with partitions: a
// batch whose samples are far from the time JetStream stored it is
// dead-lettered with the reason, never inserted, and adds no partition;
// the batches around it land.
func TestSinkDeadLettersImplausibleTimes(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	cfg := fastConfig(dsn)
	cfg.MaxBehind = schemas.DefaultMaxBehind
	cfg.SuspectWindow = -1 // no window after the start: judged at once (TestSinkDefersAheadAfterAStart)
	s, _ := runSink(t, js, conn, cfg)

	now := time.Now().UnixMilli()
	const day = int64(24 * time.Hour / time.Millisecond)
	good := batchAt("gpu-001", 1, 2, now)
	publishBatch(t, js, good)
	waitCount(t, conn, "port_samples", "", 2)

	// 1024 ports on distinct days before now, and a batch of days ahead:
	// 1024 partitions each, were they written.
	behind := batchAt("gpu-001", 2, schemas.MaxBatchPorts, now)
	ahead := batchAt("gpu-001", 3, schemas.MaxBatchPorts, now)
	for i := range behind.Ports {
		behind.Ports[i].TimeMs = now - int64(i)*day
		ahead.Ports[i].TimeMs = now + int64(i+1)*day
	}
	publishBatch(t, js, behind)
	publishBatch(t, js, ahead)
	publishBatch(t, js, batchAt("gpu-001", 4, 2, now+10_000))
	dl := deadLetters(t, js, 2)
	for _, d := range dl {
		if !strings.HasPrefix(d.reason, "implausible time: ") || !strings.HasPrefix(d.subject, "rdmawatch.deadletter.sink.") {
			t.Errorf("dead letter %s: reason %q, want an implausible time", d.subject, d.reason)
		}
	}
	waitCount(t, conn, "port_samples", "", 4)
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
	if n, err := chtest.Count(context.Background(), conn, "port_samples", fmt.Sprintf("time_ms < %d OR time_ms > %d", now-1000, now+20_000)); err != nil || n != 0 {
		t.Errorf("port_samples holds %d rows of the refused batches (%v)", n, err)
	}
	// The good batches' days only (two when the test runs across
	// midnight).
	after := partitions(t, conn)
	want := map[string]bool{}
	for _, ms := range []int64{now, now + 10_000} {
		want[time.UnixMilli(ms).UTC().Format("20060102")] = true
	}
	for _, p := range after {
		if !want[p] {
			t.Errorf("partition %s added by a refused batch (partitions %v, want only the days of %v)", p, after, want)
		}
	}
	st := s.Stats()["port_samples"]
	if st.Implausible != 2 || st.ImplausibleRows != 2*schemas.MaxBatchPorts || st.DeadLettered != 2 || st.Rows != 4 {
		t.Errorf("stats %+v: want 2 implausible messages dead-lettered and 4 rows", st)
	}
	h := telemetryOf(s)
	if n := metric(t, h, `rdmawatch_dead_letters_total{role="sink",stream="RDMAWATCH_COUNTERS"}`); n != 2 {
		t.Errorf("dead_letters_total %v, want 2", n)
	}
	// A refused message is the message's fault, not the server's.
	readyz(t, h, http.StatusOK, "ready")
}

// The time check follows a simulated fleet played ahead of the clock
// (collector --source sim --speed N): each reading a little after the
// last one, data time far past the store time, all stored; and a sink
// started again finds its data clock in port_samples, so the next reading
// is not refused for being ahead of its store time.
func TestSinkFollowsAFleetAheadOfTheClock(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	cfg := fastConfig(dsn)
	cfg.MaxBehind = schemas.DefaultMaxBehind
	_, stop := runSink(t, js, conn, cfg)

	// Readings 5 min of data time apart, two hours ahead by the end.
	t0 := time.Now().UnixMilli()
	const step = int64(5 * time.Minute / time.Millisecond)
	const n = 24
	for i := range n {
		publishBatch(t, js, batchAt("gpu-sim", uint64(i+1), 1, t0+int64(i)*step))
	}
	waitCount(t, conn, "port_samples", "", n)
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	s, _ := runSink(t, js, conn, cfg)
	publishBatch(t, js, batchAt("gpu-sim", n+1, 1, t0+n*step))
	waitCount(t, conn, "port_samples", "", n+1)
	if st := s.Stats()["port_samples"]; st.Implausible != 0 {
		t.Errorf("stats %+v: a reading of the fleet ahead was refused after the restart", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, schemas.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Errorf("dead letters %+v (%v), want none", info, err)
	}
}

// TestSinkDefersAheadAfterAStart: in the window after a start, a message
// only ahead of the data clock is given back to JetStream, not
// dead-lettered: a restarted sink reads newer messages at once while the
// older ones a killed sink held come back after AckWait (the chaos test's
// sink, killed at 30x, lost 768 samples so). Once an older message has
// moved the clock, the deferred one is stored.
func TestSinkDefersAheadAfterAStart(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	cfg := fastConfig(dsn)
	cfg.AckWait = time.Second
	cfg.SuspectWindow = time.Minute
	s, _ := runSink(t, js, conn, cfg)

	now := time.Now().UnixMilli()
	const minute = int64(time.Minute / time.Millisecond)
	publishBatch(t, js, batchAt("gpu-001", 1, 2, now+13*minute)) // ahead of everything read so far
	publishBatch(t, js, batchAt("gpu-001", 2, 2, now+5*minute))  // moves the clock
	waitCount(t, conn, "port_samples", "", 4)
	waitDrained(t, js, schemas.StreamCounters, "test-sink-counters")
	st := s.Stats()["port_samples"]
	if st.DeadLettered != 0 || st.Implausible != 0 || st.Rows != 4 {
		t.Errorf("stats %+v: want both batches stored, nothing dead-lettered", st)
	}
}
