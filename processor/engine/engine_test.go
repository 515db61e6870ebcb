package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/processor"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/all" // every detector registers itself
	"github.com/rdmawatch/rdmawatch/processor/detect/countersaturated"
	"github.com/rdmawatch/rdmawatch/processor/detect/linkflap"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startJS starts an embedded JetStream with memory streams.
func startJS(t *testing.T) (jetstream.JetStream, *nats.Conn) {
	t.Helper()
	srv := natstest.Start(t, &schemas.StreamOptions{Memory: true})
	return srv.JS, srv.Conn
}

var t0 = time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC).UnixMilli()

// batch builds node's batch number i (5 s apart) with two ports; ports of a
// flapping node see link_downed rise at batch flapAt.
func batch(node string, i int, flapAt int) *schemas.CounterBatch {
	b := &schemas.CounterBatch{Node: node, BootID: "boot", Seq: uint64(i), TimeMs: t0 + int64(i)*5000}
	for port := 1; port <= 2; port++ {
		var downs, delta uint64
		var flags schemas.Flag
		switch {
		case i == 0:
			flags = schemas.FlagFirst
		case flapAt > 0 && i >= flapAt:
			downs = 1
			if i == flapAt && port == 1 {
				delta = 1
			}
		}
		if port != 1 {
			downs, delta = 0, 0
		}
		interval := int64(5000)
		if i == 0 {
			interval = 0
		}
		b.Ports = append(b.Ports, schemas.PortSample{
			Device: "mlx5_0", Port: port, LinkLayer: "Ethernet", State: "ACTIVE",
			TimeMs: b.TimeMs + int64(port), IntervalMs: interval,
			Counters: []schemas.CounterDelta{{Name: "link_downed", Source: schemas.SourceCounters, Value: downs, Delta: delta, Flags: flags}},
		})
	}
	return b
}

func publish(t *testing.T, js jetstream.JetStream, b *schemas.CounterBatch, msgID string) {
	t.Helper()
	data, err := schemas.EncodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if msgID == "" {
		msgID = b.MsgID()
	}
	if _, err := js.Publish(context.Background(), schemas.CountersSubject(b.Node), data, jetstream.WithMsgID(msgID)); err != nil {
		t.Fatal(err)
	}
}

// recorder is a port detector that notes which processor saw which sample.
type recorder struct {
	instance int
	mu       *sync.Mutex
	seen     map[schemas.PortID]map[int]int // port -> instance -> samples
}

func (r *recorder) Name() string { return "recorder" }
func (r *recorder) OnSample(_ context.Context, port *processor.PortState, s *processor.Sample, _ processor.Emitter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[s.ID] == nil {
		r.seen[s.ID] = map[int]int{}
	}
	r.seen[s.ID][r.instance]++
}

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func readEvents(t *testing.T, js jetstream.JetStream) []*schemas.Event {
	t.Helper()
	ctx := context.Background()
	n := streamMsgs(t, js, schemas.StreamEvents)
	if n == 0 {
		return nil
	}
	c, err := js.OrderedConsumer(ctx, schemas.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(int(n), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var out []*schemas.Event
	for m := range msgs.Messages() {
		ev, err := schemas.DecodeEvent(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

type running struct {
	procs  []*Processor
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   []error
}

func start(t *testing.T, js jetstream.JetStream, cfgs ...Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, errs: make([]error, len(cfgs))}
	for i, cfg := range cfgs {
		p, err := New(js, cfg, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		r.procs = append(r.procs, p)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.errs[i] = p.Run(ctx)
		}()
	}
	t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	r.cancel()
	r.wg.Wait()
}

func (r *running) processed() uint64 {
	var n uint64
	for _, p := range r.procs {
		n += p.Processed()
	}
	return n
}

func (r *running) waitProcessed(t *testing.T, want uint64) {
	t.Helper()
	testwait.For(t, 20*time.Second, "every message processed", func() error {
		if got := r.processed(); got != want {
			return fmt.Errorf("processed %d of %d", got, want)
		}
		return nil
	})
}

func TestTwoInstancesSharePartitions(t *testing.T) {
	js, _ := startJS(t)
	const nodes, batches = 40, 6
	flapping := map[string]bool{}
	for n := 0; n < nodes; n++ {
		node := fmt.Sprintf("gpu-%03d.pod-a", n)
		flapAt := 0
		if n%10 == 3 {
			flapAt, flapping[node] = 2, true
		}
		for i := 0; i < batches; i++ {
			publish(t, js, batch(node, i, flapAt), "")
		}
	}
	total := streamMsgs(t, js, schemas.StreamCounters)
	if total != nodes*batches {
		t.Fatalf("stream holds %d", total)
	}

	var mu sync.Mutex
	seen := map[schemas.PortID]map[int]int{}
	var cfgs []Config
	for i := 0; i < 2; i++ {
		cfgs = append(cfgs, Config{
			Instance: i, Instances: 2, Start: StartAll,
			Detectors: []processor.Detector{&recorder{instance: i, mu: &mu, seen: seen}, linkflap.New(), countersaturated.New()},
		})
	}
	r := start(t, js, cfgs...)
	r.waitProcessed(t, total)

	mu.Lock()
	if len(seen) != nodes*2 {
		t.Errorf("%d ports seen, want %d", len(seen), nodes*2)
	}
	perInstance := map[int]int{}
	for id, by := range seen {
		if len(by) != 1 {
			t.Errorf("%v reached %d instances: %v", id, len(by), by)
		}
		for inst, n := range by {
			perInstance[inst]++
			if n != batches {
				t.Errorf("%v: instance %d saw %d samples, want %d", id, inst, n, batches)
			}
		}
	}
	mu.Unlock()
	if perInstance[0] == 0 || perInstance[1] == 0 {
		t.Errorf("one instance got everything: %v", perInstance)
	}

	testwait.For(t, 5*time.Second, "one open per flapping port", func() error {
		if n := streamMsgs(t, js, schemas.StreamEvents); n != uint64(len(flapping)) {
			return fmt.Errorf("%d events, want one open per flapping port (%d)", n, len(flapping))
		}
		return nil
	})
	for _, ev := range readEvents(t, js) {
		if ev.Type != schemas.TypeLinkFlap || ev.State != schemas.StateOpen || !flapping[ev.Subject.Node] || ev.Subject.Port != 1 {
			t.Errorf("unexpected event %+v", ev)
		}
	}
	r.stop()
	for _, err := range r.errs {
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	}

	// A second run over the same stream decides the same events with the
	// same ids and revisions: it finds them on the events stream and
	// publishes none.
	again := start(t, js, Config{Start: StartAll})
	again.waitProcessed(t, total)
	if n := streamMsgs(t, js, schemas.StreamEvents); n != uint64(len(flapping)) {
		t.Errorf("re-run added events: %d", n)
	}
	if st := again.procs[0].Stats(); st.KnownEvents != uint64(len(flapping)) || st.Events != 0 || st.DuplicateEvents != 0 {
		t.Errorf("re-run stats %+v", st)
	}
}

func TestDuplicatesGarbageAndResets(t *testing.T) {
	js, nc := startJS(t)
	node := "host-a"
	publish(t, js, batch(node, 0, 0), "")
	publish(t, js, batch(node, 1, 0), "")
	// Not msgpack: logged with its sequence and skipped.
	if err := nc.Publish(schemas.CountersSubject(node), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	publish(t, js, batch(node, 2, 2), "") // the flap
	// Redelivered under a new msg id (a collector retry after a restart):
	// JetStream keeps it, the runtime must drop it as stale.
	publish(t, js, batch(node, 2, 2), "again-2")
	publish(t, js, batch(node, 1, 0), "again-1") // out of order
	// A collector restart: baselines with a higher link_downed are no flap.
	restart := batch(node, 3, 0)
	for i := range restart.Ports {
		restart.Ports[i].Counters[0] = schemas.CounterDelta{Name: "link_downed", Source: schemas.SourceCounters, Value: 9, Flags: schemas.FlagFirst}
		restart.Ports[i].IntervalMs = 0
	}
	publish(t, js, restart, "")
	// A counter clear (reset) is no flap either.
	cleared := batch(node, 4, 0)
	cleared.Ports[0].Counters[0] = schemas.CounterDelta{Name: "link_downed", Source: schemas.SourceCounters, Value: 1, Delta: 1, Flags: schemas.FlagReset}
	publish(t, js, cleared, "")
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	total := streamMsgs(t, js, schemas.StreamCounters)
	if total != 8 {
		t.Fatalf("stream holds %d", total)
	}

	r := start(t, js, Config{Start: StartAll, Partitions: schemas.DefaultPartitions})
	r.waitProcessed(t, total)
	st := r.procs[0].Stats()
	if st.DecodeErrors != 1 || st.DeadLetters != 1 || st.StaleSamples != 4 || st.Samples != 10 {
		t.Errorf("stats %+v", st)
	}
	testwait.For(t, 5*time.Second, "the one open", func() error {
		if n := streamMsgs(t, js, schemas.StreamEvents); n != 1 {
			return fmt.Errorf("%d events, want the one open", n)
		}
		return nil
	})
	evs := readEvents(t, js)
	if evs[0].ID != schemas.EventID(schemas.TypeLinkFlap, schemas.Subject{Node: node, Device: "mlx5_0", Port: 1}, schemas.Millis(t0+5001)) {
		t.Errorf("event %+v", evs[0])
	}
}

func TestWarmUpStart(t *testing.T) {
	js, _ := startJS(t)
	for i := 0; i < 4; i++ {
		publish(t, js, batch("host-a", i, 2), "")
	}
	total := streamMsgs(t, js, schemas.StreamCounters)
	first := start(t, js, Config{StartTime: time.Now().Add(-time.Hour)})
	first.waitProcessed(t, total)
	first.stop()
	if st := first.procs[0].Stats(); st.Events != 1 {
		t.Fatalf("first run stats %+v", st)
	}
	// The restart decides the open again and finds it on the stream.
	r := start(t, js, Config{StartTime: time.Now().Add(-time.Hour)})
	r.waitProcessed(t, total)
	if st := r.procs[0].Stats(); st.KnownEvents != 1 || st.Events != 0 || st.DuplicateEvents != 0 {
		t.Errorf("stats %+v", st)
	}
	if n := streamMsgs(t, js, schemas.StreamEvents); n != 1 {
		t.Errorf("%d events after the warm-up, want 1", n)
	}
}

func TestConfig(t *testing.T) {
	newDets := func() ([]processor.Detector, error) { return []processor.Detector{newLevel()}, nil }
	cases := []struct {
		cfg  Config
		want []int
		ok   bool
	}{
		{Config{}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, true},
		{Config{Instance: 1, Instances: 4}, []int{1, 5, 9, 13}, true},
		{Config{OwnedPartitions: []int{3, 1, 3}}, []int{1, 3}, true},
		{Config{Instance: 2, Instances: 2}, nil, false},
		{Config{Partitions: 2, Instance: 2, Instances: 3}, nil, false},
		{Config{OwnedPartitions: []int{16}}, nil, false},
		{Config{AllowedLateness: -time.Second}, nil, false},
		{Config{NewDetectors: newDets}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, true},
		{Config{NewDetectors: newDets, DetectorNames: []string{schemas.TypeLinkFlap}}, nil, false},
		{Config{NewDetectors: newDets, Detectors: []processor.Detector{newLevel()}}, nil, false},
	}
	for i, c := range cases {
		err := c.cfg.Validate()
		if (err == nil) != c.ok {
			t.Errorf("case %d: err %v", i, err)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("case %d: %v does not wrap ErrInvalidConfig", i, err)
			}
			continue
		}
		got := c.cfg.withDefaults().owned()
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("case %d: owned %v, want %v", i, got, c.want)
		}
	}
}

func TestPartitionMismatch(t *testing.T) {
	js, _ := startJS(t)
	p, err := New(js, Config{Partitions: 8, Start: StartAll}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Run(ctx); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Run with the wrong partition count: %v", err)
	}
}

// testWriter sends the processors' logs to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(b))
	return len(b), nil
}
