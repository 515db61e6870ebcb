package engine

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// level is a port detector whose incident holds while link_downed's delta
// is above 0, with an update on every holding sample: an incident with as
// many revisions as the test wants.
type level struct{ tr *processor.Tracker }

func newLevel() *level {
	return &level{tr: processor.NewTracker("level", processor.Policy{})}
}

func (d *level) Name() string { return "level" }
func (d *level) OnSample(_ context.Context, _ *processor.PortState, s *processor.Sample, em processor.Emitter) {
	subject := schemas.Subject{Node: s.ID.Node, Device: s.ID.Device, Port: s.ID.Port}
	if s.Counters[0].Delta == 0 {
		d.tr.Clear(s.Time, subject, "the level is 0", nil, em)
		return
	}
	d.tr.Hold(s.Time, processor.Finding{
		Subject: subject, Onset: s.Time, Severity: schemas.SeverityWarning, Layer: "physical",
		Summary: subject.String() + ": level " + fmt.Sprint(s.Counters[0].Delta), Progress: true,
	}, em)
}

// levelBatch is host-a's batch i with port 1 at level v.
func levelBatch(i int, v uint64) *schemas.CounterBatch {
	b := batch("host-a", i, 0)
	b.Ports[0].Counters[0].Value, b.Ports[0].Counters[0].Delta = v, v
	return b
}

// putEvent stores ev on the events stream as a processor publishes it (its
// subject and Nats-Msg-Id): what a previous run left there.
func putEvent(t *testing.T, js jetstream.JetStream, ev *schemas.Event) {
	t.Helper()
	data, err := schemas.EncodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(schemas.EventSubject(ev))
	msg.Data = data
	msg.Header.Set(nats.MsgIdHdr, ev.MsgID())
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

// eventMsgIDs counts the events stream's messages by Nats-Msg-Id.
func eventMsgIDs(t *testing.T, js jetstream.JetStream) map[string]int {
	t.Helper()
	n := streamMsgs(t, js, schemas.StreamEvents)
	out := map[string]int{}
	if n == 0 {
		return out
	}
	c, err := js.OrderedConsumer(context.Background(), schemas.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(int(n), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		out[m.Headers().Get(nats.MsgIdHdr)]++
	}
	return out
}

// TestOutageLongerThanDuplicateWindow: a processor stopped for longer than
// the events stream's duplicate window (shortened to 500 ms here; 10 min in
// production, where the old 9-minute resend window lost the events of any
// longer outage) and restarted publishes every revision it missed, once,
// and none it had published.
func TestOutageLongerThanDuplicateWindow(t *testing.T) {
	js, _ := startJS(t)
	shortDuplicates(t, js, 500*time.Millisecond)
	levels := []uint64{0, 0, 1, 1, 1, 1, 1, 1, 0, 0}
	for i := 0; i < 4; i++ {
		publish(t, js, levelBatch(i, levels[i]), "")
	}
	from := time.Now().Add(-time.Hour) // the warm-up covers the whole test
	cfg := func() Config {
		return Config{StartTime: from, Detectors: []processor.Detector{newLevel()}}
	}
	first := start(t, js, cfg())
	first.waitProcessed(t, 4)
	first.stop()
	if st := first.procs[0].Stats(); st.Events != 2 {
		t.Fatalf("first run: %+v, want the open and one update", st)
	}

	// The outage: the incident goes on and resolves while nobody reads.
	for i := 4; i < len(levels); i++ {
		publish(t, js, levelBatch(i, levels[i]), "")
	}
	// Past the 500 ms duplicate window. A sleep: only wall time ends the
	// window, and JetStream shows nothing to wait on for it.
	time.Sleep(700 * time.Millisecond)

	id := schemas.EventID("level", schemas.Subject{Node: "host-a", Device: "mlx5_0", Port: 1}, schemas.Millis(t0+2*5000+1))
	check := func() {
		t.Helper()
		got := eventMsgIDs(t, js)
		for rev := 0; rev <= 6; rev++ {
			if n := got[fmt.Sprintf("%s#%d", id, rev)]; n != 1 {
				t.Errorf("revision %d on the events stream %d times", rev, n)
			}
		}
		if len(got) != 7 {
			t.Errorf("events stream: %v, want revisions 0..6 of %s", got, id)
		}
	}
	second := start(t, js, cfg())
	second.waitProcessed(t, uint64(len(levels)))
	check()
	if st := second.procs[0].Stats(); st.KnownEvents != 2 || st.Events != 5 || st.DuplicateEvents != 0 ||
		st.Incidents["level"][schemas.StateResolved] != 1 || st.OpenIncidents["level"] != 0 {
		t.Errorf("restart stats %+v", st)
	}
	second.stop()

	// Once more, nothing new: nothing is published. Past the duplicate
	// window again (a sleep, as above), so that a revision published again
	// would be stored again and show.
	time.Sleep(700 * time.Millisecond)
	third := start(t, js, cfg())
	third.waitProcessed(t, uint64(len(levels)))
	check()
	if st := third.procs[0].Stats(); st.KnownEvents != 7 || st.Events != 0 {
		t.Errorf("second restart stats %+v", st)
	}
}

func TestStatsPerPartition(t *testing.T) {
	js, _ := startJS(t)
	for i := 0; i < 3; i++ {
		publish(t, js, batch("host-a", i, 0), "")
	}
	r := start(t, js, Config{Start: StartAll, OwnedPartitions: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}})
	r.waitProcessed(t, 3)
	st := r.procs[0].Stats()
	if st.PartitionsOwned != 16 || len(st.Partitions) != 16 {
		t.Fatalf("stats %+v", st)
	}
	var withData int
	for _, ps := range st.Partitions {
		if ps.Samples == 0 {
			continue
		}
		withData++
		if ps.Samples != 6 || ps.DataTime != schemas.Millis(t0+2*5000+2) || ps.Lag <= 0 || ps.WatermarkLag <= 0 {
			t.Errorf("partition %+v (watermark %v)", ps, st.Watermark)
		}
	}
	if withData != 1 || st.Watermark == 0 {
		t.Errorf("%d partitions with data, watermark %v", withData, st.Watermark)
	}
}

// TestRestartContinuesOlderIncident: an incident that opened before the
// warm-up's start is found again with a later onset; the restarted
// processor continues it (same id, next revisions, its resolved) instead of
// opening a second incident and leaving the first open for ever.
func TestRestartContinuesOlderIncident(t *testing.T) {
	js, _ := startJS(t)
	levels := []uint64{0, 0, 1, 1, 1, 1, 1, 1, 0, 0}
	for i := 0; i < 4; i++ {
		publish(t, js, levelBatch(i, levels[i]), "")
	}
	// The warm-up's start falls between the stored times of batches 3 and
	// 4. Sleeps: wall time itself must pass on both sides of it.
	time.Sleep(20 * time.Millisecond)
	warmUpFrom := time.Now()
	time.Sleep(20 * time.Millisecond)
	for i := 4; i < 6; i++ {
		publish(t, js, levelBatch(i, levels[i]), "")
	}
	first := start(t, js, Config{StartTime: warmUpFrom.Add(-time.Hour), Detectors: []processor.Detector{newLevel()}})
	first.waitProcessed(t, 6)
	first.stop()
	for i := 6; i < len(levels); i++ {
		publish(t, js, levelBatch(i, levels[i]), "")
	}
	// The restart's warm-up starts at batch 4: it never sees the onset.
	second := start(t, js, Config{StartTime: warmUpFrom, Detectors: []processor.Detector{newLevel()}})
	second.waitProcessed(t, uint64(len(levels)-4))
	second.stop()

	id := schemas.EventID("level", schemas.Subject{Node: "host-a", Device: "mlx5_0", Port: 1}, schemas.Millis(t0+2*5000+1))
	got := eventMsgIDs(t, js)
	for rev := 0; rev <= 8; rev++ {
		if n := got[fmt.Sprintf("%s#%d", id, rev)]; n != 1 {
			t.Errorf("revision %d on the events stream %d times", rev, n)
		}
	}
	if len(got) != 9 {
		t.Errorf("events stream %v, want revisions 0..8 of %s only", got, id)
	}
	evs := readEvents(t, js)
	if last := evs[len(evs)-1]; last.ID != id || last.State != schemas.StateResolved {
		t.Errorf("last event %+v, want %s resolved", last, id)
	}
}

// TestRestartResolvesIncidentNotFoundAgain: an incident a previous run left
// open on a port this processor reads, which the warm-up does not decide
// again (the counters no longer show it), is resolved with its next
// revision; one on a port another instance reads is left to that instance.
func TestRestartResolvesIncidentNotFoundAgain(t *testing.T) {
	js, _ := startJS(t)
	from := time.Now().Add(-time.Hour)
	putOpen := func(node string) string {
		t.Helper()
		subject := schemas.Subject{Node: node, Device: "mlx5_0", Port: 1}
		ev := &schemas.Event{
			ID: schemas.EventID("level", subject, schemas.Millis(t0)), Type: "level", State: schemas.StateUpdate, Revision: 2,
			Severity: schemas.SeverityWarning, Scope: schemas.ScopePort, Subject: subject, Layer: "physical",
			Start: schemas.Millis(t0), DetectedAt: schemas.Millis(t0 + 5000), Summary: node + ": level 1",
		}
		putEvent(t, js, ev)
		return ev.ID
	}
	mine, theirs := putOpen("host-a"), putOpen("host-z")
	for i := 0; i < 4; i++ {
		publish(t, js, levelBatch(i, 0), "")
	}
	r := start(t, js, Config{StartTime: from, Detectors: []processor.Detector{newLevel()}})
	r.waitProcessed(t, 4)
	testwait.For(t, 10*time.Second, "the resolved revision 3", func() error {
		if got := eventMsgIDs(t, js); got[mine+"#3"] != 1 {
			return fmt.Errorf("events stream %v: no resolved revision 3 of %s", got, mine)
		}
		return nil
	})
	r.stop()
	var resolved *schemas.Event
	for _, ev := range readEvents(t, js) {
		switch {
		case ev.ID == mine && ev.Revision == 3:
			resolved = ev
		case ev.ID == theirs && ev.Revision > 2:
			t.Errorf("the other instance's incident got %+v", ev)
		}
	}
	if resolved == nil || resolved.State != schemas.StateResolved || resolved.End == nil || resolved.Validate() != nil {
		t.Errorf("resolved event %+v", resolved)
	}
}

// TestRestartRevisionsFollowTheStream: a warm-up need not decide an
// incident with the revisions the previous run published (an update was
// material then because of what that run knew at the time, e.g. a cause
// linked from an inventory a warm-up knows from its start). The stream
// must still end with revisions 0..n once each and the incident's true
// last state: a resolution decided at a revision the stream already holds
// goes out after the stream's last revision, and nothing goes out after a
// resolution the stream holds.
func TestRestartRevisionsFollowTheStream(t *testing.T) {
	subject := schemas.Subject{Node: "host-a", Device: "mlx5_0", Port: 1}
	id := schemas.EventID("level", subject, schemas.Millis(t0+2*5000+1))
	// The counters: open at batch 2, one update, resolved at batch 4 or
	// later: this run decides revisions 0 (open), 1 (update), 2 (resolved).
	levels := []uint64{0, 0, 1, 1, 0, 0, 0, 0}
	for _, tc := range []struct {
		name string
		// onStream is what the previous run published, by revision.
		onStream []string
		// want is the stream's states by revision after the restart.
		want []string
	}{
		{"previous run published more updates",
			[]string{schemas.StateOpen, schemas.StateUpdate, schemas.StateUpdate, schemas.StateUpdate},
			[]string{schemas.StateOpen, schemas.StateUpdate, schemas.StateUpdate, schemas.StateUpdate, schemas.StateResolved}},
		{"previous run published as many",
			[]string{schemas.StateOpen, schemas.StateUpdate, schemas.StateUpdate},
			[]string{schemas.StateOpen, schemas.StateUpdate, schemas.StateUpdate, schemas.StateResolved}},
		{"previous run published fewer",
			[]string{schemas.StateOpen},
			[]string{schemas.StateOpen, schemas.StateUpdate, schemas.StateResolved}},
		{"previous run resolved it sooner",
			[]string{schemas.StateOpen, schemas.StateResolved},
			[]string{schemas.StateOpen, schemas.StateResolved}},
		{"previous run resolved it at the same revision",
			[]string{schemas.StateOpen, schemas.StateUpdate, schemas.StateResolved},
			[]string{schemas.StateOpen, schemas.StateUpdate, schemas.StateResolved}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, _ := startJS(t)
			for rev, state := range tc.onStream {
				start, detected := schemas.Millis(t0+2*5000+1), schemas.Millis(t0+int64(2+rev)*5000+1)
				ev := &schemas.Event{
					ID: id, Type: "level", State: state, Revision: rev,
					Severity: schemas.SeverityWarning, Scope: schemas.ScopePort, Subject: subject, Layer: "physical",
					Start: start, DetectedAt: detected, Summary: "host-a: level 1 (previous run)",
				}
				if state == schemas.StateResolved {
					ev.End = &detected
				}
				putEvent(t, js, ev)
			}
			for i, v := range levels {
				publish(t, js, levelBatch(i, v), "")
			}
			r := start(t, js, Config{StartTime: time.Now().Add(-time.Hour), Detectors: []processor.Detector{newLevel()}})
			r.waitProcessed(t, uint64(len(levels)))
			r.stop()
			if st := r.procs[0].Stats(); st.Incidents["level"][schemas.StateResolved] != 1 {
				t.Fatalf("the run did not decide the resolution: %+v", st)
			}
			var got []string
			for _, ev := range readEvents(t, js) {
				if ev.ID != id || ev.Revision != len(got) {
					t.Fatalf("events stream: %s revision %d after %d revisions of %s", ev.ID, ev.Revision, len(got), id)
				}
				if err := ev.Validate(); err != nil {
					t.Errorf("revision %d: %v", ev.Revision, err)
				}
				got = append(got, ev.State)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("events stream states by revision %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRestartFabricIncidentNotFoundAgain: a fabric-scope incident left open
// by the previous run and not decided again is resolved by a processor
// that reads every partition (the only kind that runs the fabric-wide
// checks, FabricView.Complete). Once the partitions are split among
// processors nobody evaluates it any more: the reader of partition 0 ends
// it and says why, the others leave it alone.
func TestRestartFabricIncidentNotFoundAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		// reads: every partition, or host-a's and maybe partition 0.
		every, zero bool
		// resolvedBy is the resolution's evidence, "" when none is wanted.
		resolvedBy string
	}{
		{"every partition", true, false, "restart"},
		{"partition 0, not every one", false, true, "unevaluated"},
		{"neither", false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, _ := startJS(t)
			ev := &schemas.Event{
				ID: schemas.EventID("level", schemas.Subject{}, schemas.Millis(t0)), Type: "level", State: schemas.StateOpen,
				Severity: schemas.SeverityWarning, Scope: schemas.ScopeFabric, Layer: "link_network",
				Start: schemas.Millis(t0), DetectedAt: schemas.Millis(t0 + 5000), Summary: "the fabric's level is 1",
			}
			putEvent(t, js, ev)
			for i := 0; i < 4; i++ {
				publish(t, js, levelBatch(i, 0), "")
			}
			cfg := Config{StartTime: time.Now().Add(-time.Hour), Detectors: []processor.Detector{newLevel()}}
			if !tc.every {
				// host-a's partition, so the processor has counters to
				// catch up with.
				part := countersPartition(t, js, 1)
				if part == 0 {
					t.Fatal("host-a hashes to partition 0: the cases need another node")
				}
				cfg.OwnedPartitions = []int{part}
				if tc.zero {
					cfg.OwnedPartitions = append(cfg.OwnedPartitions, 0)
				}
			}
			r := start(t, js, cfg)
			// The processor publishes its resolutions when it has caught
			// up, before it counts the message that caught it up.
			r.waitProcessed(t, 4)
			r.stop()
			var got []*schemas.Event
			for _, e := range readEvents(t, js) {
				if e.ID == ev.ID && e.Revision > 0 {
					got = append(got, e)
				}
			}
			switch {
			case tc.resolvedBy == "" && len(got) > 0:
				t.Errorf("a processor reading neither every partition nor partition 0 resolved the fabric incident: %+v", got[0])
			case tc.resolvedBy == "":
			case len(got) != 1 || got[0].State != schemas.StateResolved || got[0].Scope != schemas.ScopeFabric || got[0].Validate() != nil:
				t.Errorf("fabric incident's revisions after the restart: %+v", got)
			case got[0].Evidence["resolved_by"] != tc.resolvedBy:
				t.Errorf("resolved by %v (%s), want %s", got[0].Evidence["resolved_by"], got[0].Summary, tc.resolvedBy)
			}
		})
	}
}

// countersPartition is the partition of the counters stream's message seq
// (its stored subject is rdmawatch.counters.<partition>.<node>).
func countersPartition(t *testing.T, js jetstream.JetStream, seq uint64) int {
	t.Helper()
	st, err := js.Stream(context.Background(), schemas.StreamCounters)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMsg(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	var p int
	if _, err := fmt.Sscanf(strings.TrimPrefix(m.Subject, "rdmawatch.counters."), "%d.", &p); err != nil {
		t.Fatalf("subject %q: %v", m.Subject, err)
	}
	return p
}

// TestPublishAfterAnotherProcessor: two processors decide one incident at
// once (a partition handed over, a rolling restart) and the events stream
// keeps whichever revision came first under its Nats-Msg-Id. A resolution
// taken for a duplicate of an update goes out as the next free revision;
// nothing is published after a resolution the other one stored.
func TestPublishAfterAnotherProcessor(t *testing.T) {
	subject := schemas.Subject{Node: "host-a", Device: "mlx5_0", Port: 1}
	id := schemas.EventID("level", subject, schemas.Millis(t0))
	event := func(rev int, state string) *schemas.Event {
		detected := schemas.Millis(t0 + int64(rev)*5000)
		ev := &schemas.Event{
			ID: id, Type: "level", State: state, Revision: rev, Severity: schemas.SeverityWarning,
			Scope: schemas.ScopePort, Subject: subject, Layer: "physical", Start: schemas.Millis(t0), DetectedAt: detected,
			Summary: "level " + state,
		}
		if state == schemas.StateResolved {
			ev.End = &detected
		}
		return ev
	}
	const open, update, resolved = schemas.StateOpen, schemas.StateUpdate, schemas.StateResolved
	for _, tc := range []struct {
		name string
		// other is what the other processor stored, by revision; ours what
		// this one decides (revisions 0..), published in order.
		other, ours []string
		// want is the stream's states by revision afterwards.
		want []string
	}{
		{"nothing stored", nil, []string{open, resolved}, []string{open, resolved}},
		{"our resolution on their update", []string{open, update}, []string{open, resolved}, []string{open, update, resolved}},
		{"our resolution on two of their updates", []string{open, update, update}, []string{open, resolved}, []string{open, update, update, resolved}},
		{"both resolved at one revision", []string{open, resolved}, []string{open, resolved}, []string{open, resolved}},
		{"our update on their resolution, then ours", []string{open, resolved}, []string{open, update, resolved}, []string{open, resolved}},
		{"our update on theirs", []string{open, update}, []string{open, update, update, resolved}, []string{open, update, update, resolved}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, _ := startJS(t)
			p, err := New(js, Config{Detectors: []processor.Detector{newLevel()}}, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
			if err != nil {
				t.Fatal(err)
			}
			// This processor read the events history before the other
			// one published.
			if p.published, _, err = loadPublished(context.Background(), js, time.Time{}); err != nil {
				t.Fatal(err)
			}
			for rev, state := range tc.other {
				putEvent(t, js, event(rev, state))
			}
			for rev, state := range tc.ours {
				if err := p.publish(context.Background(), event(rev, state)); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, ev := range readEvents(t, js) {
				if ev.Revision != len(got) {
					t.Fatalf("revision %d after %d: %v", ev.Revision, len(got), got)
				}
				got = append(got, ev.State)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("events stream %v, want %v", got, tc.want)
			}
		})
	}
}
