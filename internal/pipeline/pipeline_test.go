package pipeline

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/schemas/trace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quiet keeps the parts' logs out of the test output.
var quiet = slog.New(slog.DiscardHandler)

// scenario is a small recorded scenario of test/scenarios: two incidents
// (a link flap and a saturated counter) in 720 lines.
const scenario = "../../test/scenarios/flap-and-saturation/"

func traceSource(t *testing.T, path string) collector.Source {
	t.Helper()
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return collector.NewTraceSource(tr)
}

func topology(t *testing.T) *schemas.Topology {
	t.Helper()
	topo, err := schemas.LoadTopology(scenario + "topology.json")
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// eventLines checks that out holds one JSON event per line, no blank ones,
// and returns them.
func eventLines(t *testing.T, out []byte) []schemas.Event {
	t.Helper()
	var evs []schemas.Event
	sc := bufio.NewScanner(bytes.NewReader(out))
	for n := 1; sc.Scan(); n++ {
		var ev schemas.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("events out line %d %q: %v", n, sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestRunReplaysATraceTheSameWayTwice(t *testing.T) {
	var outs [2]bytes.Buffer
	for i := range outs {
		var seen atomic.Int64
		res, err := Run(t.Context(), Config{
			Log:       quiet,
			Source:    traceSource(t, scenario+"trace.jsonl"),
			Topology:  topology(t),
			EventsOut: &outs[i],
			OnEvent:   func(*schemas.Event) { seen.Add(1) },
		})
		if err != nil {
			t.Fatal(err)
		}
		evs := eventLines(t, outs[i].Bytes())
		if res.Events == 0 || uint64(len(evs)) != res.Events || seen.Load() != int64(res.Events) {
			t.Fatalf("run %d: result says %d events, %d lines written, OnEvent saw %d", i, res.Events, len(evs), seen.Load())
		}
		if res.Engine.Samples != 720 || res.Batches == 0 {
			t.Errorf("run %d: %d port samples in %d batches, want 720 samples", i, res.Engine.Samples, res.Batches)
		}
		for _, typ := range []string{schemas.TypeLinkFlap, schemas.TypeCounterSaturated} {
			if res.ByType[typ][schemas.StateOpen] == 0 {
				t.Errorf("run %d: no %s opened; by type: %v", i, typ, res.ByType)
			}
		}
	}
	if !bytes.Equal(outs[0].Bytes(), outs[1].Bytes()) {
		t.Errorf("two runs over the same trace wrote different events:\n%s\n---\n%s", outs[0].Bytes(), outs[1].Bytes())
	}
}

// truncatedTrace is the first n lines of the scenario's trace followed by
// a malformed line.
func truncatedTrace(t *testing.T, n int) string {
	t.Helper()
	data, err := os.ReadFile(scenario + "trace.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")[:n]
	path := t.TempDir() + "/trace.jsonl"
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")+"{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunMalformedLineStopsReadingAndKeepsWhatCameBefore(t *testing.T) {
	var out bytes.Buffer
	res, err := Run(t.Context(), Config{Log: quiet, Source: traceSource(t, truncatedTrace(t, 400)), EventsOut: &out})
	if !errors.Is(err, trace.ErrMalformed) || !strings.Contains(err.Error(), "line 401") {
		t.Fatalf("err = %v, want a malformed trace error naming line 401", err)
	}
	if res == nil || res.Engine.Samples != 400 {
		t.Fatalf("result %+v: want the 400 samples before the bad line processed", res)
	}
	if evs := eventLines(t, out.Bytes()); uint64(len(evs)) != res.Events {
		t.Errorf("%d events written, result says %d", len(evs), res.Events)
	}
}

// stallingSource gives the readings of its source, then blocks until ctx
// ends, as a live source between two readings.
type stallingSource struct {
	collector.Source
	stalled chan struct{}
}

func (s *stallingSource) Next(ctx context.Context) (*collector.Reading, error) {
	r, err := s.Source.Next(ctx)
	if !errors.Is(err, io.EOF) {
		return r, err
	}
	close(s.stalled)
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestRunCancelledDrainsWhatWasRead(t *testing.T) {
	src := &stallingSource{Source: traceSource(t, scenario+"trace.jsonl"), stalled: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-src.stalled
		cancel()
	}()
	var out bytes.Buffer
	start := time.Now()
	res, err := Run(ctx, Config{Log: quiet, Source: src, Topology: topology(t), EventsOut: &out, DrainGrace: 10 * time.Second})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s: the drain waited past its grace", took)
	}
	if res.Engine.Samples != 720 || res.ByType[schemas.TypeLinkFlap][schemas.StateOpen] == 0 {
		t.Errorf("result %+v: want all 720 samples processed and the link flap found before the run stopped", res)
	}
}

// TestPartFailuresStopTheRun starts more failing parts than the old
// supervisor's error channel held (16): the run must end with their error,
// stop the source, and not hang.
func TestPartFailuresStopTheRun(t *testing.T) {
	src := &stallingSource{Source: traceSource(t, scenario+"trace.jsonl"), stalled: make(chan struct{})}
	p, err := Start(t.Context(), Config{Log: quiet, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	for i := range 40 {
		p.goPart(fmt.Sprintf("failing part %d", i), func(context.Context) error {
			<-src.stalled
			return boom
		})
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Run(t.Context())
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrPartFailed) || !errors.Is(err, boom) || !strings.Contains(err.Error(), "failing part") {
			t.Fatalf("err = %v, want ErrPartFailed naming the failing part", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30 s after its parts failed")
	}
}

type emptySource struct{}

func (emptySource) Next(context.Context) (*collector.Reading, error) { return nil, io.EOF }

// TestEventThatCannotBeWrittenFailsTheRun: JSON has no NaN. Such an event
// used to be written as a blank line that readers skip.
func TestEventThatCannotBeWrittenFailsTheRun(t *testing.T) {
	var out bytes.Buffer
	p, err := Start(t.Context(), Config{Log: quiet, Source: emptySource{}, EventsOut: &out})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []*schemas.Event{
		{ID: "bad", Evidence: map[string]any{"current_ber": math.NaN()}},
		{ID: "good", Evidence: map[string]any{"current_ber": 1e-9}},
	} {
		ev.Type, ev.State, ev.Layer, ev.Scope, ev.Severity, ev.Summary = schemas.TypeBERDrift, schemas.StateOpen, schemas.LayerPhysical, schemas.ScopeFabric, schemas.SeverityWarning, "test"
		data, err := schemas.EncodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.JetStream().Publish(t.Context(), schemas.EventSubject(ev), data); err != nil {
			t.Fatal(err)
		}
	}
	res, err := p.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "event bad") || !strings.Contains(err.Error(), "1 event(s) not written") {
		t.Fatalf("err = %v, want one event named bad not written", err)
	}
	evs := eventLines(t, out.Bytes())
	if len(evs) != 1 || evs[0].ID != "good" || res.Events != 2 {
		t.Errorf("written %+v, result counted %d: want only the good event written, both counted", evs, res.Events)
	}
}

func TestShutdownWithoutRun(t *testing.T) {
	p, err := Start(t.Context(), Config{Log: quiet, Source: emptySource{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if !p.Conn().IsClosed() {
		t.Error("the connection to the embedded server is still open after Shutdown")
	}
}

func TestStartWithoutSource(t *testing.T) {
	if _, err := Start(t.Context(), Config{}); err == nil {
		t.Fatal("Start without a source: no error")
	}
}

func TestRunStoresInClickHouse(t *testing.T) {
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	gz := gzipFile(t, scenario+"trace.jsonl")
	res, err := Run(t.Context(), Config{Log: quiet, Source: traceSource(t, gz), Topology: topology(t), ClickHouse: dsn})
	if err != nil {
		t.Fatal(err)
	}
	conn := chtest.Open(t, dsn)
	// Run returns once the sink acknowledged everything: no polling.
	samples, err := chtest.Count(t.Context(), conn, "port_samples", "")
	if err != nil {
		t.Fatal(err)
	}
	events, err := chtest.Count(t.Context(), conn, "events", "")
	if err != nil {
		t.Fatal(err)
	}
	if samples != res.Engine.Samples || events != res.Events {
		t.Errorf("stored %d port samples and %d events, the run made %d and %d", samples, events, res.Engine.Samples, res.Events)
	}
}

// gzipFile writes a gzipped copy of path: the reader takes either.
func gzipFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir() + "/trace.jsonl.gz"
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(zw.Close(), f.Close()); err != nil {
		t.Fatal(err)
	}
	return out
}
