package collector

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsembed"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// outageBroker is an embedded JetStream server on a fixed port and store
// directory, so it can be stopped and started again as the same broker.
type outageBroker struct {
	t     *testing.T
	port  int
	store string
	srv   *natsembed.Server
}

func newOutageBroker(t *testing.T, port int) *outageBroker {
	b := &outageBroker{t: t, port: port, store: t.TempDir()}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *outageBroker) start() {
	b.t.Helper()
	srv, err := natsembed.Start(b.store, b.port)
	if err != nil {
		b.t.Fatal(err)
	}
	b.srv = srv
}

func (b *outageBroker) stop() {
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv = nil
	}
}

func (b *outageBroker) connect(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsutil.Connect(natsutil.ConnectOptions{URL: "nats://127.0.0.1:" + itoa(b.port), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := natsutil.EnsureStreams(ctx, js, schemas.StreamOptions{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func itoa(n int) string { return strconv.Itoa(n) }

func outageBatch(seq uint64) *schemas.CounterBatch {
	ms := int64(seq) * 10_000
	return &schemas.CounterBatch{Version: schemas.Version, Node: "gpu-001", BootID: "boot-a", Seq: seq, TimeMs: ms, Ports: []schemas.PortSample{
		{Device: "mlx5_0", Port: 1, TimeMs: ms},
		{Device: "mlx5_0", Port: 2, TimeMs: ms},
	}}
}

// outageWarned waits until the publisher has logged that NATS does not
// acknowledge its publishes.
func outageWarned(logs *syncBuffer) error {
	return testwait.Poll(10*time.Second, "the outage WARN", func() error {
		if !strings.Contains(logs.String(), "NATS does not acknowledge publishes") {
			return errors.New("not logged")
		}
		return nil
	})
}

// streamIDs returns the Nats-Msg-Id of every message on the counters stream.
func streamIDs(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, schemas.StreamCounters)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
	}
	return ids
}

func spoolFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.msg"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPublisherSpoolsThroughAnOutage is issue 8.7: batches published while
// the broker is down, by a collector that then stops, are spooled; the next
// run sends them first, and every sample lands on the stream exactly once.
func TestPublisherSpoolsThroughAnOutage(t *testing.T) {
	broker := newOutageBroker(t, 14201)
	spoolDir := filepath.Join(t.TempDir(), "spool")
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx := context.Background()

	nc, js := broker.connect(t)
	pub, err := NewPublisherConfig(js, PublisherConfig{MaxInFlight: 8, Log: log, AckWarnAfter: 300 * time.Millisecond, SpoolDir: spoolDir})
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 5; seq++ {
		if err := pub.PublishBatch(ctx, outageBatch(seq)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	broker.stop()
	for seq := uint64(6); seq <= 11; seq++ {
		if err := pub.PublishBatch(ctx, outageBatch(seq)); err != nil {
			t.Fatal(err)
		}
	}
	// The collector stops during the outage: its flush gives up after a
	// while, and what is unacknowledged must go to the spool.
	stopCtx, cancel := context.WithTimeout(ctx, time.Second)
	err = pub.Flush(stopCtx)
	cancel()
	if err != nil {
		t.Fatalf("Flush with a spool: %v, want nil (nothing lost)", err)
	}
	nc.Close()
	if got := len(spoolFiles(t, spoolDir)); got != 6 {
		t.Fatalf("%d spooled messages, want 6:\n%s", got, logs.String())
	}
	for _, want := range []string{
		"NATS does not acknowledge publishes",
		"waiting_batches=6 waiting_samples=12",
		"unacknowledged messages spooled",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if d := pub.Dropped(); d.Messages != 0 {
		t.Errorf("dropped %+v, want nothing", d)
	}

	// The next run, against the same broker back on the same port and
	// store: the spool first, then new batches.
	broker.start()
	_, js2 := broker.connect(t)
	pub2, err := NewPublisherConfig(js2, PublisherConfig{MaxInFlight: 8, Log: log, SpoolDir: spoolDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub2.ResendSpool(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pub2.PublishBatch(ctx, outageBatch(12)); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := pub2.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	ids := streamIDs(t, js2)
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
	}
	for seq := uint64(1); seq <= 12; seq++ {
		if id := outageBatch(seq).MsgID(); seen[id] != 1 {
			t.Errorf("batch %s on the stream %d times, want once (stream: %v)", id, seen[id], ids)
		}
	}
	if len(ids) != 12 {
		t.Errorf("%d messages on the stream, want 12: %v", len(ids), ids)
	}
	if left := spoolFiles(t, spoolDir); len(left) != 0 {
		t.Errorf("spool not emptied after the acks: %v", left)
	}
}

// TestPublisherLogsOutageAndRecovery: a broker that goes away and comes back
// while the collector runs gives one WARN naming what waits and one INFO
// with the outage's length; nothing is lost or doubled.
func TestPublisherLogsOutageAndRecovery(t *testing.T) {
	broker := newOutageBroker(t, 14202)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx := context.Background()
	_, js := broker.connect(t)
	pub, err := NewPublisherConfig(js, PublisherConfig{MaxInFlight: 4, Log: log, AckWarnAfter: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishBatch(ctx, outageBatch(1)); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	broker.stop()
	for seq := uint64(2); seq <= 4; seq++ {
		if err := pub.PublishBatch(ctx, outageBatch(seq)); err != nil {
			t.Fatal(err)
		}
	}
	// The outage lasts until the publisher has warned of it, which Flush
	// does while it waits: hence a goroutine.
	warned := make(chan error, 1)
	go func() {
		err := outageWarned(&logs)
		broker.start()
		warned <- err
	}()
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = pub.Flush(fctx)
	if werr := <-warned; werr != nil {
		t.Fatalf("%v:\n%s", werr, logs.String())
	}
	if err != nil {
		t.Fatalf("Flush across the outage: %v\n%s", err, logs.String())
	}
	out := logs.String()
	if n := strings.Count(out, "NATS does not acknowledge publishes"); n != 1 {
		t.Errorf("outage WARN logged %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "waiting_batches=3 waiting_samples=6") {
		t.Errorf("outage WARN does not name 3 batches, 6 samples:\n%s", out)
	}
	if !strings.Contains(out, "NATS acknowledges publishes again") || !strings.Contains(out, "outage=") {
		t.Errorf("no recovery INFO with the outage length:\n%s", out)
	}
	if ids := streamIDs(t, js); len(ids) != 4 {
		t.Errorf("%d batches on the stream, want 4: %v", len(ids), ids)
	}
}

// TestSpoolBoundDropsOldestAndCounts: past SpoolMaxBytes the oldest spooled
// messages go first, and every one dropped is counted with its samples.
func TestSpoolBoundDropsOldestAndCounts(t *testing.T) {
	dir := t.TempDir()
	msg := func(id string) *nats.Msg {
		m := &nats.Msg{Subject: "rdmawatch.counters.n", Data: make([]byte, 1000), Header: nats.Header{}}
		m.Header.Set(jetstream.MsgIDHeader, id)
		return m
	}
	sp, err := openSpool(dir, 3500) // room for three ~1.05 KB messages
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		if err := sp.write(msg(id), i+1); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := sp.list()
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, e := range entries {
		m, _, err := sp.read(e.name)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, m.Header.Get(jetstream.MsgIDHeader))
	}
	if strings.Join(kept, ",") != "c,d,e" {
		t.Errorf("kept %v, want the newest c,d,e", kept)
	}
	if d := sp.takeDropped(); d.Messages != 2 || d.Samples != 1+2 {
		t.Errorf("dropped %+v, want 2 messages with 3 samples", d)
	}
	// A file that is not a spool record is refused, not sent.
	if err := os.WriteFile(filepath.Join(dir, "00-x.msg"), []byte("junk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sp.read("00-x.msg"); err == nil {
		t.Error("a junk spool file was accepted")
	}
}

// FuzzSpoolRead: a spool file is read back at start, possibly torn by a
// crash or not ours at all. Reading must never panic or allocate past the
// bound, and what write stores reads back as it was.
func FuzzSpoolRead(f *testing.F) {
	f.Add([]byte("RDMAWATCH-SPOOL 1\nrdmawatch.counters.n\nn/b/1\n2\n3\nabc"), "rdmawatch.counters.n", "n/b/1", []byte("payload"), 2)
	f.Add([]byte("RDMAWATCH-SPOOL 1\ns\nid\n1\n99999999999\n"), "s", "id", []byte{}, 0)
	f.Add([]byte("junk"), "a.b", "x/y/9", []byte{0xdc, 0, 1}, 7)
	f.Fuzz(func(t *testing.T, file []byte, subject, id string, data []byte, samples int) {
		dir := t.TempDir()
		sp, err := openSpool(dir, 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "0-fuzz.msg"), file, 0o600); err != nil {
			t.Fatal(err)
		}
		if m, n, err := sp.read("0-fuzz.msg"); err == nil {
			if n < 0 || len(m.Data) > 1<<16 || m.Subject == "" {
				t.Fatalf("read %q: subject %q, %d samples, %d bytes", file, m.Subject, n, len(m.Data))
			}
		}
		os.Remove(filepath.Join(dir, "0-fuzz.msg"))
		// Round trip, for the values write accepts (single-line names).
		if subject == "" || id == "" || strings.ContainsAny(subject+id, "\n\r") || strings.TrimSpace(id) != id || samples < 0 || len(data) > 1<<15 {
			return
		}
		msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, id)
		if err := sp.write(msg, samples); err != nil {
			t.Fatal(err)
		}
		entries, err := sp.list()
		if err != nil || len(entries) != 1 {
			t.Fatalf("list after write: %v, %v", entries, err)
		}
		m, n, err := sp.read(entries[0].name)
		if err != nil {
			t.Fatalf("read back: %v", err)
		}
		if m.Subject != subject || m.Header.Get(jetstream.MsgIDHeader) != id || n != samples || !bytes.Equal(m.Data, data) {
			t.Fatalf("round trip: %q %q %d %q, want %q %q %d %q", m.Subject, m.Header.Get(jetstream.MsgIDHeader), n, m.Data, subject, id, samples, data)
		}
	})
}

// endless is a host of two ports whose counters grow by one per reading.
type endless struct{ n int }

func (s *endless) Next(ctx context.Context) (*Reading, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.n++
	at := t0.Add(time.Duration(s.n) * 10 * time.Second)
	r := &Reading{Node: "gpu-002", Time: at}
	for port := 1; port <= 2; port++ {
		r.Ports = append(r.Ports, PortReading{Device: "mlx5_0", Port: port, Time: at, Counters: map[string]uint64{"symbol_error": uint64(s.n)}})
	}
	return r, nil
}

// TestCollectorStoppedDuringOutageSpools is the issue 8.7 run end to end: a
// collector scraping while the broker is down is stopped; the next run
// sends the spool first, and every batch the engine made is on the stream
// exactly once.
func TestCollectorStoppedDuringOutageSpools(t *testing.T) {
	broker := newOutageBroker(t, 14203)
	spoolDir := filepath.Join(t.TempDir(), "spool")
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	nc, js := broker.connect(t)
	pub, err := NewPublisherConfig(js, PublisherConfig{MaxInFlight: 4, Log: log, AckWarnAfter: 200 * time.Millisecond, SpoolDir: spoolDir})
	if err != nil {
		t.Fatal(err)
	}
	eng := NewEngine(func(string, int) string { return "boot-x" })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- New(&endless{}, eng, pub, Config{Interval: 20 * time.Millisecond, Log: log, FlushTimeout: 500 * time.Millisecond}).Run(ctx)
	}()
	// Some batches stored before the outage; batches waiting for their
	// acks, the outage warned of, when the collector stops.
	testwait.Until(t, 10*time.Second, "batches on the stream before the outage", func() bool { return len(streamIDs(t, js)) > 0 })
	broker.stop()
	if err := outageWarned(&logs); err != nil {
		t.Fatalf("%v:\n%s", err, logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("collector stopped with %v\n%s", err, logs.String())
	}
	nc.Close()
	made := eng.Stats().Samples
	spooled := len(spoolFiles(t, spoolDir))
	if spooled == 0 {
		t.Fatalf("nothing spooled:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "NATS does not acknowledge publishes") {
		t.Errorf("the outage was not logged:\n%s", logs.String())
	}

	broker.start()
	_, js2 := broker.connect(t)
	pub2, err := NewPublisherConfig(js2, PublisherConfig{Log: log, SpoolDir: spoolDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub2.ResendSpool(context.Background()); err != nil {
		t.Fatal(err)
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer fcancel()
	if err := pub2.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	// Every sample once: count port samples over distinct ids, and no id twice.
	s, err := js2.Stream(context.Background(), schemas.StreamCounters)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info(context.Background())
	seen := map[string]bool{}
	var samples uint64
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		if seen[id] {
			t.Errorf("%s on the stream twice", id)
		}
		seen[id] = true
		b, err := schemas.DecodeBatch(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		samples += uint64(len(b.Ports))
	}
	if samples != made {
		t.Errorf("%d samples on the stream, the engine made %d (%d spooled batches)", samples, made, spooled)
	}
	if left := spoolFiles(t, spoolDir); len(left) != 0 {
		t.Errorf("spool not emptied: %d files", len(left))
	}
	t.Logf("%d samples made, %d batches spooled during the outage, all on the stream once", made, spooled)
}
