package engine

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/detect/linkflap"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// shortDuplicates shrinks the duplicate window of the events and
// dead-letter streams, so a test can outlive it in a second instead of ten
// minutes: the clock of the test is short, the rule is the same.
func shortDuplicates(t *testing.T, js jetstream.JetStream, window time.Duration) {
	t.Helper()
	ctx := context.Background()
	for _, name := range []string{schemas.StreamEvents, schemas.StreamDeadLetter} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		cfg.Duplicates = window
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatalf("stream %s: duplicates %v: %v", name, window, err)
		}
	}
}

// deadLetters reads the processor's dead letters: reason by stream seq.
func deadLetters(t *testing.T, js jetstream.JetStream) (byReason map[string]int, all []*nats.Header) {
	t.Helper()
	n := streamMsgs(t, js, schemas.StreamDeadLetter)
	byReason = map[string]int{}
	if n == 0 {
		return byReason, nil
	}
	c, err := js.OrderedConsumer(context.Background(), schemas.StreamDeadLetter, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(int(n), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		h := m.Headers()
		if m.Subject() != schemas.DeadLetterSubject("processor", schemas.StreamCounters) {
			t.Errorf("dead letter on %s", m.Subject())
		}
		reason := h.Get(schemas.HeaderDeadReason)
		kind, _, _ := strings.Cut(reason, ":")
		byReason[kind]++
		all = append(all, &h)
	}
	return byReason, all
}

// outOfRangeBitmap is the 8.1 poison: a counter bitmap with a bit past the
// end of the counter dictionary. It panicked the decoder; a fixed decoder
// returns an error. Either way the processor must dead-letter it. The
// bitmap is made one byte longer than the dictionary, with its first bit
// set, so the bit is past the dictionary whatever its size.
func outOfRangeBitmap(t *testing.T) []byte {
	t.Helper()
	b := batch("host-a", 5, 0)
	b.Ports = b.Ports[:1]
	last := schemas.CounterID(schemas.CounterIDs - 1)
	b.Ports[0].Counters = []schemas.CounterDelta{{Name: last.Name(), Source: last.Source(), Value: 1, Delta: 1}}
	data, err := schemas.EncodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	// The packed counters: bin8 header, uvarint bitmap length, bitmap.
	nb := (schemas.CounterIDs + 7) / 8
	bitmap := append(make([]byte, nb-1), 1<<((schemas.CounterIDs-1)%8))
	i := bytes.Index(data, append([]byte{byte(nb)}, bitmap...))
	if i < 2 || data[i-2] != 0xc4 || nb >= 0x7f {
		t.Fatalf("no %d-byte counter bitmap after a bin8 header in %x: the codec changed, update this test", nb, data)
	}
	out := append([]byte(nil), data[:i-1]...)
	out = append(out, data[i-1]+1, byte(nb+1))
	out = append(out, bitmap...)
	out = append(out, 0x01) // bit nb*8: past the dictionary
	return append(out, data[i+1+nb:]...)
}

func publishRaw(t *testing.T, js jetstream.JetStream, subject string, data []byte) {
	t.Helper()
	if _, err := js.Publish(context.Background(), subject, data); err != nil {
		t.Fatal(err)
	}
}

func encode(t *testing.T, b *schemas.CounterBatch) []byte {
	t.Helper()
	data, err := schemas.EncodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestPoisonIsDeadLettered feeds the poison corpus of issue 8 between good
// batches: each poison message lands in the dead-letter stream with its
// reason, the processor goes on and decides the flap of the good ones, and
// a restart that re-reads everything after the dead letters' duplicate
// window adds no second dead letter.
func TestPoisonIsDeadLettered(t *testing.T) {
	js, _ := startJS(t)
	shortDuplicates(t, js, 500*time.Millisecond)
	node := "host-a"
	publish(t, js, batch(node, 0, 0), "")
	publish(t, js, batch(node, 1, 0), "")

	publishRaw(t, js, schemas.CountersSubject(node), []byte("garbage"))
	publishRaw(t, js, schemas.CountersSubject(node), outOfRangeBitmap(t))
	wrongVersion := encode(t, batch(node, 9, 0))
	if wrongVersion[0] != 0x96 || wrongVersion[1] != byte(schemas.Version) {
		t.Fatalf("batch encoding starts %x: the codec changed, update this test", wrongVersion[:2])
	}
	wrongVersion[1] = 99 // a positive fixint: version 99
	publishRaw(t, js, schemas.CountersSubject(node), wrongVersion)
	// A collector of host-b writing for host-a.
	publishRaw(t, js, schemas.CountersSubject("host-b"), encode(t, batch(node, 8, 0)))
	future := batch(node, 7, 0)
	for i := range future.Ports {
		future.Ports[i].TimeMs = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMilli()
	}
	publishRaw(t, js, schemas.CountersSubject(node), encode(t, future))
	negative := batch(node, 6, 0)
	negative.TimeMs = -5000
	for i := range negative.Ports {
		negative.Ports[i].TimeMs = -5000
	}
	publishRaw(t, js, schemas.CountersSubject(node), encode(t, negative))

	publish(t, js, batch(node, 2, 2), "") // the flap
	publish(t, js, batch(node, 3, 2), "")
	total := streamMsgs(t, js, schemas.StreamCounters)

	from := time.Now().Add(-time.Hour)
	r := start(t, js, Config{StartTime: from})
	r.waitProcessed(t, total)
	st := r.procs[0].Stats()
	if st.DeadLetters != 6 || st.DecodeErrors+st.Panics != 3 || st.SpoofedNode != 1 || st.ImplausibleSamples != 2 || st.Samples != 8 {
		t.Errorf("stats %+v", st)
	}
	if st.Events != 1 {
		t.Errorf("%d events, want the flap's open", st.Events)
	}
	byReason, all := deadLetters(t, js)
	want := map[string]int{ReasonSpoofedNode: 1, ReasonImplausibleTime: 2}
	for k, n := range want {
		if byReason[k] != n {
			t.Errorf("dead letters by reason %v, want %d %q", byReason, n, k)
		}
	}
	if byReason[ReasonDecode]+byReason[ReasonPanic] != 3 {
		t.Errorf("dead letters by reason %v, want 3 decode errors or panics", byReason)
	}
	for _, h := range all {
		if h.Get(schemas.HeaderDeadStreamSeq) == "" || h.Get(nats.MsgIdHdr) == "" {
			t.Errorf("dead letter headers %v", *h)
		}
	}
	r.stop()

	// Past the dead letters' duplicate window, a restart re-reads the same
	// poison: it must know it dead-lettered it already. A sleep: only wall
	// time ends the window, and JetStream shows nothing to wait on for it.
	time.Sleep(700 * time.Millisecond)
	again := start(t, js, Config{StartTime: from})
	again.waitProcessed(t, total)
	if st := again.procs[0].Stats(); st.DeadLetters != 0 || st.DeadLettersKnown != 6 {
		t.Errorf("restart stats %+v", st)
	}
	if n := streamMsgs(t, js, schemas.StreamDeadLetter); n != 6 {
		t.Errorf("%d dead letters after the restart, want 6", n)
	}
}

// panicky panics on one node's samples.
type panicky struct{}

func (panicky) Name() string { return "panicky" }
func (panicky) OnSample(_ context.Context, _ *processor.PortState, s *processor.Sample, _ processor.Emitter) {
	if s.ID.Node == "host-bad" {
		panic("detector bug")
	}
}

func TestPanicInApplyEndsOnlyThatMessage(t *testing.T) {
	js, _ := startJS(t)
	publish(t, js, batch("host-bad", 0, 0), "")
	for i := 0; i < 4; i++ {
		publish(t, js, batch("host-a", i, 2), "")
	}
	total := streamMsgs(t, js, schemas.StreamCounters)
	r := start(t, js, Config{Start: StartAll, Detectors: []processor.Detector{panicky{}, linkflap.New()}})
	r.waitProcessed(t, total)
	st := r.procs[0].Stats()
	if st.Panics != 1 || st.DeadLetters != 1 || st.Events != 1 {
		t.Errorf("stats %+v", st)
	}
	if byReason, _ := deadLetters(t, js); byReason[ReasonPanic] != 1 {
		t.Errorf("dead letters %v", byReason)
	}
}

func TestPartitionOf(t *testing.T) {
	for subject, want := range map[string]int{
		"rdmawatch.counters.3.gpu-001": 3,
		"rdmawatch.counters.15.x":      15,
		"rdmawatch.counters.gpu-001":   -1,
		"rdmawatch.counters.-1.x":      -1,
		"rdmawatch.events.a.b":         -1,
		"rdmawatch.counters.x.y":       -1,
	} {
		if got := partitionOf(subject); got != want {
			t.Errorf("partitionOf(%q) = %d, want %d", subject, got, want)
		}
	}
}

// TestFarFutureKeepsWatermark runs the processing path without a stream: a
// far-future sample and a negative one are refused and move nothing.
func TestFarFutureKeepsWatermark(t *testing.T) {
	p, err := New(noJetStream{}, Config{Start: StartAll, DetectorNames: []string{"link_flap"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stored := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli() // replay: stored long after the data
	for i := 0; i < 4; i++ {
		if why := p.process(ctx, batch("host-a", i, 0), stored, -1); why != "" {
			t.Fatalf("batch %d refused: %s", i, why)
		}
	}
	wm, maxTime := p.fabric.wm, p.maxTime
	cases := map[string]int64{
		"9999-12-31":     time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMilli(),
		"year 292278994": 1<<63 - 1,
		"negative":       -1,
		"just ahead":     stored + 11*time.Minute.Milliseconds(),
	}
	for name, ts := range cases {
		b := batch("host-b", 1, 0)
		for i := range b.Ports {
			b.Ports[i].TimeMs = ts
		}
		why := p.process(ctx, b, stored, -1)
		if !strings.HasPrefix(why, ReasonImplausibleTime+": 2 of 2 samples") {
			t.Errorf("%s: reason %q", name, why)
		}
		if p.fabric.wm != wm || p.maxTime != maxTime {
			t.Errorf("%s moved the watermark %v -> %v", name, wm, p.fabric.wm)
		}
		if _, tracked := p.fabric.ports[schemas.PortID{Node: "host-b", Device: "mlx5_0", Port: 1}]; tracked {
			t.Errorf("%s: the refused port is tracked", name)
		}
	}
	if st := p.Stats(); st.ImplausibleSamples != 8 {
		t.Errorf("stats %+v", st)
	}
	// Within MaxAhead of the data clock is plausible, even far past the
	// store time (a simulated fleet played faster than real time).
	b := batch("host-a", 4, 0)
	for i := range b.Ports {
		b.Ports[i].TimeMs = int64(maxTime) + 5*time.Minute.Milliseconds()
	}
	if why := p.process(ctx, b, 1, -1); why != "" {
		t.Errorf("sample 5 min ahead of the data clock refused: %s", why)
	}
	// The first sample is judged by the store time alone.
	q, _ := New(noJetStream{}, Config{Start: StartAll, DetectorNames: []string{"link_flap"}}, nil)
	if why := q.process(ctx, batch("host-a", 0, 0), int64(t0)-time.Hour.Milliseconds(), -1); why == "" {
		t.Error("a first sample an hour ahead of its store time was accepted")
	}
	// A fleet-wide gap longer than MaxAhead: the store time admits the
	// data after it.
	b = batch("host-a", 5, 0)
	gap := int64(maxTime) + 3*time.Hour.Milliseconds()
	for i := range b.Ports {
		b.Ports[i].TimeMs = gap
	}
	if why := p.process(ctx, b, gap+1000, -1); why != "" {
		t.Errorf("data after a 3 h gap refused: %s", why)
	}
}

// replayEvents runs a processor over batches on a fresh server and returns
// its events as "id state revision".
func replayEvents(t *testing.T, batches []*schemas.CounterBatch) []string {
	t.Helper()
	js, _ := startJS(t)
	for _, b := range batches {
		publishRaw(t, js, schemas.CountersSubject(b.Node), encode(t, b))
	}
	total := streamMsgs(t, js, schemas.StreamCounters)
	r := start(t, js, Config{Start: StartAll, DetectorNames: []string{"link_flap"}})
	r.waitProcessed(t, total)
	r.stop()
	var out []string
	for _, ev := range readEvents(t, js) {
		out = append(out, fmt.Sprintf("%s %s %d", ev.ID, ev.State, ev.Revision))
	}
	return out
}

// TestReplayWithFarFutureLine: one 9999-12-31 line in a replay changes no
// event (it used to resolve every open incident as silent).
func TestReplayWithFarFutureLine(t *testing.T) {
	var clean []*schemas.CounterBatch
	for i := 0; i < 8; i++ {
		clean = append(clean, batch("host-a", i, 2), batch("host-b", i, 0))
	}
	poisoned := append([]*schemas.CounterBatch(nil), clean[:8]...)
	bad := batch("host-c", 0, 0)
	for i := range bad.Ports {
		bad.Ports[i].TimeMs = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMilli()
	}
	poisoned = append(poisoned, bad)
	poisoned = append(poisoned, clean[8:]...)

	want := replayEvents(t, clean)
	got := replayEvents(t, poisoned)
	if len(want) == 0 {
		t.Fatal("the clean replay decided nothing: the test proves nothing")
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("with a 9999-12-31 line:\n%v\nwithout:\n%v", got, want)
	}
}
