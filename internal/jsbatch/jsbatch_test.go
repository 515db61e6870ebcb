package jsbatch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/rdmawatch/rdmawatch/internal/jsbatch"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// The consumer starts a fetcher and a heartbeat per Run, and the tests
// embedded NATS servers and clients: all must be gone when the tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// decode makes one row per comma-separated word; "poison" does not decode
// and "panic" panics, as a hostile message can make a codec do.
func decode(_ string, data []byte) ([]string, error) {
	switch s := string(data); s {
	case "poison":
		return nil, errors.New("not a message")
	case "panic":
		var dict []int
		_ = dict[len(data)] // index out of range
	case "":
		return nil, nil
	default:
		return strings.Split(s, ","), nil
	}
	return nil, nil
}

// writer is a store that fails on demand: fail, when set, is asked before
// every write (call counts from 1) and its error fails the whole write;
// reject names the rows it can never store. It records what it stored.
type writer struct {
	fail   func(call int, batch []*jsbatch.Item[string]) error
	reject string

	mu      sync.Mutex
	calls   int
	batches [][]string // the rows of each successful write, in order
	seqs    map[uint64]int
	suspect []string // rows of the items written that were suspect
}

func (w *writer) Write(_ context.Context, batch []*jsbatch.Item[string]) error {
	w.mu.Lock()
	w.calls++
	call := w.calls
	w.mu.Unlock()
	if w.fail != nil {
		if err := w.fail(call, batch); err != nil {
			return err
		}
	}
	var rows []string
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, it := range batch {
		if it.Settled() {
			continue
		}
		if w.reject != "" && slices.Contains(it.Rows, w.reject) {
			it.Reject("the store refuses " + w.reject)
			continue
		}
		rows = append(rows, it.Rows...)
		if it.Suspect {
			w.suspect = append(w.suspect, it.Rows...)
		}
		if w.seqs == nil {
			w.seqs = map[uint64]int{}
		}
		w.seqs[it.StreamSeq()]++
		it.Written()
	}
	w.batches = append(w.batches, rows)
	return nil
}

func (w *writer) snapshot() (batches [][]string, calls int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.batches), w.calls
}

// sizes is the number of rows of each batch.
func sizes(batches [][]string) []int {
	var n []int
	for _, b := range batches {
		n = append(n, len(b))
	}
	return n
}

type harness struct {
	t  *testing.T
	js jetstream.JetStream
	n  int // messages published
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{t: t, js: natstest.Start(t, &schemas.StreamOptions{Memory: true, Partitions: 1}).JS}
}

// config is a consumer of the inventory stream (any stream does) into w.
func (h *harness) config(w jsbatch.Writer[string]) jsbatch.Config[string] {
	return jsbatch.Config[string]{
		Role: "test", Name: "the store",
		Stream: schemas.StreamInventory, Durable: "test", Description: "jsbatch test",
		Decode: decode, Writer: w,
		RetryMin: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond,
		Log: slog.New(slog.DiscardHandler),
	}
}

func (h *harness) publish(data ...string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, d := range data {
		// A node each: the inventory stream keeps a few messages per
		// subject.
		h.n++
		if _, err := h.js.Publish(ctx, schemas.InventorySubject(fmt.Sprintf("gpu-%d", h.n)), []byte(d)); err != nil {
			h.t.Fatal(err)
		}
	}
}

// start runs a consumer of cfg; stop ends it and returns Run's error.
func (h *harness) start(cfg jsbatch.Config[string]) (c *jsbatch.Consumer[string], stop func() error) {
	h.t.Helper()
	c, err := jsbatch.New(h.js, cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Init(ctx); err != nil {
		cancel()
		h.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	h.t.Cleanup(func() { _ = stop() })
	return c, stop
}

// info is the durable's state on the server.
func (h *harness) info(durable string) *jetstream.ConsumerInfo {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := h.js.Consumer(ctx, schemas.StreamInventory, durable)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return info
}

// A batch goes when it holds BatchRows rows, BatchBytes bytes or half of
// MaxAckPending messages, and otherwise after FlushInterval; a backlog's
// last rows go at once, and shutdown writes what is held.
func TestBatching(t *testing.T) {
	t.Parallel()
	word := func(n int) []string { return slices.Repeat([]string{"aaaaaaaa"}, n) }
	for _, tc := range []struct {
		name     string
		set      func(*jsbatch.Config[string])
		messages []string
		want     []int         // rows per batch
		atLeast  time.Duration // the first batch goes no sooner after Run
		stop     bool          // stop Run once the messages are held
	}{
		{"by rows", func(c *jsbatch.Config[string]) { c.BatchRows, c.FlushInterval = 10, time.Hour },
			word(25), []int{10, 10, 5}, 0, false},
		{"rows of many-row messages", func(c *jsbatch.Config[string]) { c.BatchRows, c.FlushInterval = 4, time.Hour },
			[]string{"a,b,c", "d,e,f", "g,h,i", "j"}, []int{6, 4}, 0, false},
		{"by bytes", func(c *jsbatch.Config[string]) { c.BatchBytes, c.FlushInterval = 20, time.Hour },
			word(6), []int{3, 3}, 0, false},
		{"by messages: half of max ack pending", func(c *jsbatch.Config[string]) { c.MaxAckPending, c.FlushInterval = 4, time.Hour },
			word(6), []int{2, 2, 2}, 0, false},
		{"by time", func(c *jsbatch.Config[string]) { c.FlushInterval = 300 * time.Millisecond },
			word(3), []int{3}, 300 * time.Millisecond, false},
		{"at shutdown", func(c *jsbatch.Config[string]) { c.FlushInterval = time.Hour },
			word(3), []int{3}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.publish(tc.messages...)
			w := &writer{}
			cfg := h.config(w)
			tc.set(&cfg)
			began := time.Now()
			c, stop := h.start(cfg)
			if tc.stop {
				testwait.For(t, 10*time.Second, "every message held before the stop", func() error {
					if st := c.Stats(); st.Pending != len(tc.messages) {
						return fmt.Errorf("%d messages held, want %d", st.Pending, len(tc.messages))
					}
					return nil
				})
				if err := stop(); err != nil {
					t.Fatalf("Run: %v", err)
				}
			}
			var first time.Time
			testwait.For(t, 10*time.Second, "the batches", func() error {
				batches, _ := w.snapshot()
				if len(batches) > 0 && first.IsZero() {
					first = time.Now()
				}
				if got := sizes(batches); !slices.Equal(got, tc.want) {
					return fmt.Errorf("batches of %v rows, want %v", got, tc.want)
				}
				return nil
			})
			if took := first.Sub(began); took < tc.atLeast {
				t.Errorf("first batch after %v, want at least %v", took, tc.atLeast)
			}
			testwait.For(t, 10*time.Second, "every message acked", func() error {
				if st := c.Stats(); st.Acked != uint64(len(tc.messages)) || st.Pending != 0 {
					return fmt.Errorf("stats %+v, want %d acked and none pending", st, len(tc.messages))
				}
				return nil
			})
			if info := h.info("test"); info.NumAckPending != 0 || info.NumPending != 0 {
				t.Errorf("durable: %d unacked, %d undelivered; want none", info.NumAckPending, info.NumPending)
			}
		})
	}
}

// A message is acked only after the writer stored it: while writes fail,
// the durable holds every message unacked; then each is acked once.
func TestAckOnlyAfterWrite(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.publish("a", "b", "c")
	var during []string
	w := &writer{}
	w.fail = func(call int, batch []*jsbatch.Item[string]) error {
		if call > 2 {
			return nil
		}
		info := h.info("test")
		during = append(during, fmt.Sprintf("write %d of %d messages: %d unacked on the server", call, len(batch), info.NumAckPending))
		return errors.New("the store is away")
	}
	cfg := h.config(w)
	cfg.FlushInterval = 200 * time.Millisecond // one batch of all three
	c, stop := h.start(cfg)
	testwait.For(t, 10*time.Second, "the messages acked once the store is back", func() error {
		if st := c.Stats(); st.Acked != 3 {
			return fmt.Errorf("stats %+v, want 3 acked", st)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"write 1 of 3 messages: 3 unacked on the server", "write 2 of 3 messages: 3 unacked on the server"}
	if !slices.Equal(during, want) {
		t.Errorf("while the writes failed: %q, want %q", during, want)
	}
	batches, calls := w.snapshot()
	if calls != 3 || len(batches) != 1 || strings.Join(batches[0], ",") != "a,b,c" {
		t.Errorf("%d writes storing %v, want the third to store a,b,c", calls, batches)
	}
	if st := c.Stats(); st.Retries != 2 {
		t.Errorf("retries %d, want 2", st.Retries)
	}
	if info := h.info("test"); info.NumAckPending != 0 || info.NumRedelivered != 0 {
		t.Errorf("durable: %d unacked, %d redelivered; want none", info.NumAckPending, info.NumRedelivered)
	}
}

// What a consumer could not write when it stops is Nak'ed: the next
// consumer of the durable gets it at once (not after AckWait), marked
// suspect, since the failed write may have stored part of it.
func TestNakAfterFailedWrite(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.publish("a", "b")
	failing := &writer{fail: func(int, []*jsbatch.Item[string]) error { return errors.New("the store is away") }}
	cfg := h.config(failing)
	cfg.FlushInterval, cfg.AckWait, cfg.ShutdownTimeout = 20*time.Millisecond, time.Minute, 200*time.Millisecond
	_, stop := h.start(cfg)
	testwait.For(t, 10*time.Second, "two failed writes", func() error {
		if _, calls := failing.snapshot(); calls < 2 {
			return fmt.Errorf("%d writes, want 2 or more", calls)
		}
		return nil
	})
	err := stop()
	if err == nil || !strings.Contains(err.Error(), "2 messages for the store not written") || !strings.Contains(err.Error(), "the store is away") {
		t.Fatalf("Run = %v, want the messages not written and why", err)
	}

	w := &writer{}
	cfg.Writer = w
	began := time.Now()
	c, stop := h.start(cfg)
	testwait.For(t, 10*time.Second, "the redelivered messages acked", func() error {
		if st := c.Stats(); st.Acked != 2 {
			return fmt.Errorf("stats %+v, want 2 acked", st)
		}
		return nil
	})
	if took := time.Since(began); took > cfg.AckWait/2 {
		t.Errorf("redelivered after %v: not Nak'ed (AckWait %v)", took, cfg.AckWait)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := strings.Join(w.suspect, ","); got != "a,b" {
		t.Errorf("suspect rows %q, want a,b (delivered before)", got)
	}
}

// A message that does not decode, panics while decoding, fails Check or
// that the writer rejects goes to the dead-letter stream with its reason;
// the others are written.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.publish("ok1", "poison", "panic", "late", "refused", "", "ok2")
	w := &writer{reject: "refused"}
	type rejection struct {
		reason  string
		checked bool
		rows    int
	}
	var mu sync.Mutex
	var rejected []rejection
	cfg := h.config(w)
	cfg.FlushInterval = 50 * time.Millisecond
	cfg.Check = func(meta *jetstream.MsgMetadata, rows []string) error {
		if meta == nil || meta.Timestamp.IsZero() {
			return errors.New("no metadata")
		}
		if len(rows) > 0 && rows[0] == "late" {
			return errors.New("too late")
		}
		return nil
	}
	cfg.Rejected = func(err error, checked bool, rows int) {
		mu.Lock()
		defer mu.Unlock()
		rejected = append(rejected, rejection{err.Error(), checked, rows})
	}
	c, stop := h.start(cfg)
	testwait.For(t, 10*time.Second, "the refusals dead-lettered", func() error {
		if st := c.Stats(); st.DeadLettered != 4 || st.Acked != 2 || st.Rejected != 3 {
			return fmt.Errorf("stats %+v, want 4 dead-lettered, 2 acked, 3 rejected", st)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	want := []rejection{{"not a message", false, 0}, {"panic while decoding: runtime error: index out of range [5] with length 0", false, 0}, {"too late", true, 1}}
	if !slices.Equal(rejected, want) {
		t.Errorf("Rejected told %+v, want %+v", rejected, want)
	}
	mu.Unlock()
	batches, _ := w.snapshot()
	var stored []string
	for _, b := range batches {
		stored = append(stored, b...)
	}
	if got := strings.Join(stored, ","); got != "ok1,ok2" {
		t.Errorf("stored %q, want ok1,ok2", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := h.js.OrderedConsumer(ctx, schemas.StreamDeadLetter, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	letters := map[string]string{}
	for range 4 {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("dead letters %v: %v", letters, err)
		}
		if s := m.Subject(); s != schemas.DeadLetterSubject("test", schemas.StreamInventory) {
			t.Errorf("dead letter on %s", s)
		}
		letters[string(m.Data())] = m.Headers().Get(schemas.HeaderDeadReason)
	}
	for data, reason := range map[string]string{"poison": "not a message", "panic": "panic while decoding", "late": "too late", "refused": "the store refuses refused"} {
		if !strings.Contains(letters[data], reason) {
			t.Errorf("dead letter %q: reason %q, want %q", data, letters[data], reason)
		}
	}
	if info := h.info("test"); info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("durable: %d unacked, %d undelivered; want none (dead letters are terminated)", info.NumAckPending, info.NumPending)
	}
}

// While a write takes several AckWaits, the heartbeat keeps every held
// message in progress: another consumer of the durable gets none of them,
// and each is written once.
func TestHeartbeatKeepsMessagesInProgress(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.publish("a", "b", "c", "d")
	const ackWait = 600 * time.Millisecond
	held, release := make(chan int, 1), make(chan struct{})
	w := &writer{fail: func(call int, batch []*jsbatch.Item[string]) error {
		if call == 1 {
			held <- len(batch)
			<-release
		}
		return nil
	}}
	cfg := h.config(w)
	cfg.FlushInterval, cfg.AckWait = 200*time.Millisecond, ackWait
	c, stop := h.start(cfg)
	if n := <-held; n != 4 {
		close(release)
		t.Fatalf("first write of %d messages, want all 4", n)
	}
	// Another consumer of the durable pulls for four AckWaits.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	thief, err := h.js.Consumer(ctx, schemas.StreamInventory, "test")
	if err != nil {
		t.Fatal(err)
	}
	var stolen []string
	for end := time.Now().Add(4 * ackWait); time.Now().Before(end); {
		batch, err := thief.Fetch(4, jetstream.FetchMaxWait(ackWait/2))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			stolen = append(stolen, string(m.Data()))
		}
	}
	close(release)
	if len(stolen) > 0 {
		t.Errorf("another consumer got %q while the write ran", stolen)
	}
	testwait.For(t, 10*time.Second, "the held write's messages acked", func() error {
		if st := c.Stats(); st.Acked != 4 {
			return fmt.Errorf("stats %+v, want 4 acked", st)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for seq, n := range w.seqs {
		if n != 1 {
			t.Errorf("stream seq %d written %d times", seq, n)
		}
	}
	if len(w.suspect) > 0 {
		t.Errorf("suspect rows %q: delivered twice", w.suspect)
	}
}

// The heartbeat reads the durable's backlog: what it has not delivered
// while the consumer holds all MaxAckPending lets it.
func TestConsumerPending(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.publish("a", "b", "c", "d", "e", "f", "g", "h")
	release := make(chan struct{})
	w := &writer{fail: func(int, []*jsbatch.Item[string]) error {
		<-release
		return nil
	}}
	cfg := h.config(w)
	cfg.FlushInterval, cfg.AckWait, cfg.MaxAckPending = 20*time.Millisecond, 600*time.Millisecond, 2
	c, stop := h.start(cfg)
	testwait.For(t, 10*time.Second, "six messages pending on the durable", func() error {
		if st := c.Stats(); st.ConsumerPending != 6 {
			return fmt.Errorf("stats %+v, want 6 pending on the durable", st)
		}
		return nil
	})
	close(release)
	testwait.For(t, 10*time.Second, "every message acked", func() error {
		if st := c.Stats(); st.Acked != 8 || st.ConsumerPending != 0 {
			return fmt.Errorf("stats %+v, want 8 acked and none pending on the durable", st)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// Suspect marks a message delivered for the first time too, while the
// window after a start is open.
func TestWindow(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    time.Duration
		open bool
		want bool
	}{
		{"closed before Open", time.Hour, false, false},
		{"open", time.Hour, true, true},
		{"none", -time.Second, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := jsbatch.NewWindow(nil, tc.d)
			if tc.open {
				w.Open()
			}
			if got := w.Active(); got != tc.want {
				t.Errorf("Active() = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("marks items", func(t *testing.T) {
		h := newHarness(t)
		h.publish("a")
		win := jsbatch.NewWindow(nil, time.Hour)
		win.Open()
		w := &writer{}
		cfg := h.config(w)
		cfg.FlushInterval, cfg.Suspect = 20*time.Millisecond, win.Active
		c, stop := h.start(cfg)
		testwait.For(t, 10*time.Second, "the message acked", func() error {
			if st := c.Stats(); st.Acked != 1 {
				return fmt.Errorf("stats %+v, want 1 acked", st)
			}
			return nil
		})
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(w.suspect, ","); got != "a" {
			t.Errorf("suspect rows %q, want a", got)
		}
	})
}

// New refuses a config it cannot run, naming what and the consumer.
func TestNewRefuses(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name string
		set  func(*jsbatch.Config[string])
		want string
	}{
		{"no writer", func(c *jsbatch.Config[string]) { c.Writer = nil }, "Decode and Writer are required"},
		{"no durable", func(c *jsbatch.Config[string]) { c.Durable = "" }, "durable name are required"},
		{"short ack wait", func(c *jsbatch.Config[string]) { c.AckWait = 100 * time.Millisecond }, "ack wait 100ms < 300ms"},
		{"negative rows", func(c *jsbatch.Config[string]) { c.BatchRows = -1 }, "batch rows -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := h.config(&writer{})
			tc.set(&cfg)
			_, err := jsbatch.New(h.js, cfg)
			if !errors.Is(err, jsbatch.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want %q", err, tc.want)
			}
		})
	}
}
