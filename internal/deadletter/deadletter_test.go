package deadletter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/rdmawatch/rdmawatch/internal/deadletter"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// publish stores data on subject and returns its stream sequence.
func publish(t *testing.T, js jetstream.JetStream, subject string, data []byte, msgID string) *jetstream.PubAck {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = data
	if msgID != "" {
		m.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	ack, err := js.PublishMsg(ctxT(t), m)
	if err != nil {
		t.Fatalf("publish %s: %v", subject, err)
	}
	return ack
}

// refuse has role refuse the message at ack (fetched through an explicit-ack
// consumer, as the sink and the alert bridge get theirs) and dead-letter it
// with natsutil.DeadLetter, as every role does. It returns the dead
// letter's sequence.
func refuse(t *testing.T, js jetstream.JetStream, ack *jetstream.PubAck, role, reason string) uint64 {
	t.Helper()
	ctx := ctxT(t)
	cons, err := js.CreateConsumer(ctx, ack.Stream, jetstream.ConsumerConfig{
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: ack.Sequence,
	})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := natsutil.DeadLetter(ctx, js, role, msg, reason); err != nil {
		t.Fatal(err)
	}
	str, err := js.Stream(ctx, schemas.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	return str.CachedInfo().State.LastSeq
}

func batch(node string, seq uint64) []byte {
	now := time.Now().UnixMilli()
	b := &schemas.CounterBatch{Node: node, BootID: "boot-1", Seq: seq, TimeMs: now, Ports: []schemas.PortSample{{
		Device: "mlx5_0", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)", TimeMs: now, IntervalMs: 10_000,
		Counters: []schemas.CounterDelta{
			{Name: "port_rcv_data", Source: schemas.SourceCounters, Delta: 1000, Value: 5000, Flags: schemas.FlagReset},
			{Name: "out_of_buffer", Source: schemas.SourceHWCounters, Delta: 3},
		},
	}}}
	data, err := schemas.EncodeBatch(b)
	if err != nil {
		panic(err)
	}
	return data
}

func event(node string) *schemas.Event {
	start := schemas.MillisOf(time.Now())
	return &schemas.Event{ID: schemas.EventID("pfc_storm", schemas.Subject{Node: node}, start), Type: "pfc_storm", State: schemas.StateOpen,
		Severity: "critical", Scope: schemas.ScopeNode, Subject: schemas.Subject{Node: node}, Start: start, DetectedAt: start,
		Layer: "link_network", Summary: "PFC storm on " + node}
}

func inventory(node string) []byte {
	data, err := schemas.EncodeInventory(&schemas.Inventory{Node: node, BootID: "boot-1", TimeMs: time.Now().UnixMilli(),
		Ports: []schemas.PortInventory{{Device: "mlx5_0", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)"}}})
	if err != nil {
		panic(err)
	}
	return data
}

// letters is a dead-letter stream as the roles leave it: one letter of
// each kind, a few milliseconds apart so that times select them.
type letters struct {
	srv    *natstest.Server
	r      *deadletter.Reader
	seq    map[string]uint64            // by name
	acks   map[string]*jetstream.PubAck // the originals
	data   map[string][]byte
	before map[string]time.Time // a time just before the letter was stored
}

func setup(t *testing.T) *letters {
	t.Helper()
	srv := natstest.Start(t, &schemas.StreamOptions{Memory: true})
	js := srv.JS
	ev, err := schemas.EncodeEvent(event("gpu-003"))
	if err != nil {
		t.Fatal(err)
	}
	l := &letters{srv: srv, seq: map[string]uint64{}, acks: map[string]*jetstream.PubAck{}, data: map[string][]byte{}, before: map[string]time.Time{}}
	for _, x := range []struct {
		name, subject, role, reason string
		data                        []byte
	}{
		{"poison", schemas.CountersSubject("gpu-001"), "sink", "decode error: decode counter batch: msgpack: invalid code", []byte("not msgpack at all")},
		{"batch", schemas.CountersSubject("gpu-002"), "processor", "implausible time: 2 h ahead", batch("gpu-002", 7)},
		{"event", schemas.EventSubject(event("gpu-003")), "alert", "webhook answered 400: bad request", ev},
		{"inventory", schemas.InventorySubject("gpu-004"), "sink", "ClickHouse refused the row: bad rate", inventory("gpu-004")},
		{"garbled event", schemas.EventSubject(event("gpu-005")), "sink", "decode error:\nline two", []byte{0xc1, 0x00, 0xff}},
	} {
		time.Sleep(5 * time.Millisecond)
		l.before[x.name] = time.Now()
		time.Sleep(5 * time.Millisecond)
		l.acks[x.name] = publish(t, js, x.subject, x.data, "")
		l.data[x.name] = x.data
		l.seq[x.name] = refuse(t, js, l.acks[x.name], x.role, x.reason)
	}
	r, err := deadletter.Open(ctxT(t), js)
	if err != nil {
		t.Fatal(err)
	}
	l.r = r
	return l
}

func list(t *testing.T, r *deadletter.Reader, f deadletter.Filter) []deadletter.Letter {
	t.Helper()
	var out []deadletter.Letter
	if err := r.List(ctxT(t), f, func(l deadletter.Letter) error {
		out = append(out, l)
		return nil
	}); err != nil {
		t.Fatalf("List(%+v): %v", f, err)
	}
	return out
}

func TestList(t *testing.T) {
	l := setup(t)
	all := []string{"poison", "batch", "event", "inventory", "garbled event"}
	for _, tc := range []struct {
		name string
		f    deadletter.Filter
		want []string
	}{
		{"everything, oldest first", deadletter.Filter{}, all},
		{"one role", deadletter.Filter{Roles: []string{"sink"}}, []string{"poison", "inventory", "garbled event"}},
		{"two roles", deadletter.Filter{Roles: []string{"alert", "processor"}}, []string{"batch", "event"}},
		{"a stream, full name", deadletter.Filter{Streams: []string{schemas.StreamCounters}}, []string{"poison", "batch"}},
		{"a stream, short name", deadletter.Filter{Streams: []string{"events"}}, []string{"event", "garbled event"}},
		{"role and stream", deadletter.Filter{Roles: []string{"sink", "sink"}, Streams: []string{"EVENTS"}}, []string{"garbled event"}},
		{"roles times streams", deadletter.Filter{Roles: []string{"sink", "alert"}, Streams: []string{"events", "inventory"}}, []string{"event", "inventory", "garbled event"}},
		{"reason, any case", deadletter.Filter{Reason: "DECODE ERROR"}, []string{"poison", "garbled event"}},
		{"since", deadletter.Filter{Since: l.before["event"]}, []string{"event", "inventory", "garbled event"}},
		{"until", deadletter.Filter{Until: l.before["event"]}, []string{"poison", "batch"}},
		{"since and until", deadletter.Filter{Since: l.before["batch"], Until: l.before["inventory"]}, []string{"batch", "event"}},
		{"limit", deadletter.Filter{Limit: 2}, []string{"poison", "batch"}},
		{"limit after a filter", deadletter.Filter{Roles: []string{"sink"}, Limit: 2}, []string{"poison", "inventory"}},
		{"nothing matches", deadletter.Filter{Roles: []string{"collector"}}, nil},
		{"since after the last", deadletter.Filter{Since: time.Now().Add(time.Hour)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, x := range list(t, l.r, tc.f) {
				for name, seq := range l.seq {
					if seq == x.Seq {
						got = append(got, name)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("listed %q, want %q", got, tc.want)
			}
		})
	}

	// What one line says: the headers and the payload's size.
	got := list(t, l.r, deadletter.Filter{Roles: []string{"processor"}})
	if len(got) != 1 {
		t.Fatalf("processor letters: %+v", got)
	}
	x, ack := got[0], l.acks["batch"]
	if x.Role != "processor" || x.Stream != schemas.StreamCounters || x.StreamSeq != ack.Sequence || x.Delivered != 1 ||
		x.Reason != "implausible time: 2 h ahead" || x.Size != len(l.data["batch"]) ||
		!strings.HasPrefix(x.Subject, "rdmawatch.counters.") || !strings.HasSuffix(x.Subject, ".gpu-002") ||
		x.DeadSubject != schemas.DeadLetterSubject("processor", schemas.StreamCounters) || x.Time.Before(l.before["batch"]) || x.Data != nil {
		t.Errorf("letter %+v", x)
	}
	// A reason's line break became a space (natsutil.DeadLetter).
	if g := list(t, l.r, deadletter.Filter{Reason: "line two"}); len(g) != 1 || g[0].Reason != "decode error: line two" {
		t.Errorf("reason with a line break: %+v", g)
	}
}

func TestListRefusesBadFilters(t *testing.T) {
	l := setup(t)
	for _, tc := range []struct {
		f    deadletter.Filter
		want string
	}{
		{deadletter.Filter{Roles: []string{"sinks"}}, `role "sinks": want one of collector, processor, sink, alert`},
		{deadletter.Filter{Streams: []string{"RDMAWATCH_DEADLETTER"}}, `stream "RDMAWATCH_DEADLETTER": want one of`},
		{deadletter.Filter{Streams: []string{"counters.>"}}, `stream "counters.>"`},
		{deadletter.Filter{Limit: -1}, "limit -1"},
		{deadletter.Filter{Since: time.Now(), Until: time.Now().Add(-time.Hour)}, "is after until"},
	} {
		err := l.r.List(ctxT(t), tc.f, func(deadletter.Letter) error { return nil })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("List(%+v): %v, want an error with %q", tc.f, err, tc.want)
		}
	}
}

func TestGetAndDecode(t *testing.T) {
	l := setup(t)
	for _, tc := range []struct {
		name, kind, wantErr string
		check               func(t *testing.T, v any)
	}{
		{name: "batch", kind: "counters batch", check: func(t *testing.T, v any) {
			if s := jsonOf(t, v); !strings.Contains(s, `"node":"gpu-002"`) || !strings.Contains(s, `"counter":"counters/port_rcv_data"`) ||
				!strings.Contains(s, `"flags":["reset"]`) || !strings.Contains(s, `"counter":"hw_counters/out_of_buffer","delta":3}`) {
				t.Errorf("batch as JSON: %s", s)
			}
		}},
		{name: "event", kind: "event", check: func(t *testing.T, v any) {
			if ev, ok := v.(*schemas.Event); !ok || ev.Subject.Node != "gpu-003" || ev.Type != "pfc_storm" {
				t.Errorf("event: %#v", v)
			}
		}},
		{name: "inventory", kind: "inventory", check: func(t *testing.T, v any) {
			if inv, ok := v.(*schemas.Inventory); !ok || inv.Node != "gpu-004" || len(inv.Ports) != 1 {
				t.Errorf("inventory: %#v", v)
			}
		}},
		{name: "poison", kind: "counters batch", wantErr: "decode counter batch"},
		{name: "garbled event", kind: "event", wantErr: "decode event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := l.r.Get(ctxT(t), l.seq[tc.name])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(x.Data, l.data[tc.name]) || x.Size != len(l.data[tc.name]) || x.Header.Get(schemas.HeaderDeadReason) != x.Reason {
				t.Errorf("letter %+v: payload or headers differ from the original", x)
			}
			p := deadletter.Decode(x)
			if p.Kind != tc.kind {
				t.Errorf("kind %q, want %q", p.Kind, tc.kind)
			}
			if tc.wantErr != "" {
				if p.Err == nil || !strings.Contains(p.Err.Error(), tc.wantErr) || p.Value != nil {
					t.Errorf("decode: %v, %v; want an error with %q", p.Value, p.Err, tc.wantErr)
				}
				return
			}
			if p.Err != nil {
				t.Fatal(p.Err)
			}
			tc.check(t, p.Value)
		})
	}
	if _, err := l.r.Get(ctxT(t), 999); !errors.Is(err, deadletter.ErrNotFound) || !strings.Contains(err.Error(), "dead letter 999") {
		t.Errorf("Get(999): %v, want ErrNotFound naming 999", err)
	}
}

// stored reads message seq of stream.
func stored(t *testing.T, js jetstream.JetStream, stream string, seq uint64) *jetstream.RawStreamMsg {
	t.Helper()
	str, err := js.Stream(ctxT(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := str.GetMsg(ctxT(t), seq)
	if err != nil {
		t.Fatalf("%s seq %d: %v", stream, seq, err)
	}
	return m
}

func msgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	str, err := js.Stream(ctxT(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := str.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestRedrive(t *testing.T) {
	l := setup(t)
	js := l.srv.JS
	ctx := ctxT(t)

	// A dry run checks and changes nothing.
	countersBefore := msgs(t, js, schemas.StreamCounters)
	o, err := l.r.Redrive(ctx, l.seq["batch"], true)
	if err != nil || o.Target != schemas.CountersSubject("gpu-002") || o.Deleted || o.Stored != 0 {
		t.Fatalf("dry run: %+v, %v", o, err)
	}
	if _, err := l.r.Get(ctx, l.seq["batch"]); err != nil || msgs(t, js, schemas.StreamCounters) != countersBefore {
		t.Fatalf("a dry run changed something: %v", err)
	}

	// Each kind goes back to its subject as published, untouched, with
	// the redrive's Nats-Msg-Id, and its letter is deleted.
	for _, tc := range []struct{ name, stream, subject string }{
		{"batch", schemas.StreamCounters, schemas.CountersSubject("gpu-002")},
		{"event", schemas.StreamEvents, schemas.EventSubject(event("gpu-003"))},
		{"inventory", schemas.StreamInventory, schemas.InventorySubject("gpu-004")},
		{"poison", schemas.StreamCounters, schemas.CountersSubject("gpu-001")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := l.r.Redrive(ctx, l.seq[tc.name], false)
			if err != nil {
				t.Fatal(err)
			}
			if o.Target != tc.subject || o.Duplicate || !o.Deleted || o.Stored == 0 {
				t.Errorf("outcome %+v, want %s stored and the letter deleted", o, tc.subject)
			}
			m := stored(t, js, tc.stream, o.Stored)
			if !bytes.Equal(m.Data, l.data[tc.name]) || m.Header.Get(jetstream.MsgIDHeader) != "redrive/"+tc.stream+"/"+itoa(l.acks[tc.name].Sequence) {
				t.Errorf("stored %q with id %q", m.Data, m.Header.Get(jetstream.MsgIDHeader))
			}
			// The counters stream's transform partitioned it again.
			if tc.stream == schemas.StreamCounters && schemas.CheckBatchSubject(m.Subject, &schemas.CounterBatch{Node: strings.TrimPrefix(tc.subject, "rdmawatch.counters.")}) != nil ||
				tc.stream == schemas.StreamCounters && strings.Count(m.Subject, ".") != 3 {
				t.Errorf("stored under %q", m.Subject)
			}
			if _, err := l.r.Get(ctx, l.seq[tc.name]); !errors.Is(err, deadletter.ErrNotFound) {
				t.Errorf("letter still there after the redrive: %v", err)
			}
		})
	}

	// The same original refused by a second role: its redrive within the
	// duplicate window stores nothing new and still clears the letter.
	again := refuse(t, js, l.acks["batch"], "sink", "rows refused")
	before := msgs(t, js, schemas.StreamCounters)
	o, err = l.r.Redrive(ctx, again, false)
	if err != nil || !o.Duplicate || !o.Deleted {
		t.Errorf("second letter of the same message: %+v, %v; want a duplicate, deleted", o, err)
	}
	if after := msgs(t, js, schemas.StreamCounters); after != before {
		t.Errorf("counters stream %d -> %d messages: the repeat stored a copy", before, after)
	}

	// A letter already redriven is not there to redrive.
	if _, err := l.r.Redrive(ctx, l.seq["batch"], false); !errors.Is(err, deadletter.ErrNotFound) {
		t.Errorf("redrive of a deleted letter: %v", err)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestRedriveKeepsWhatIsNotAcknowledged: a letter whose copy no stream
// acknowledged stays, and a letter whose headers point outside rdmawatch's
// streams is refused, nothing published.
func TestRedriveKeepsWhatIsNotAcknowledged(t *testing.T) {
	l := setup(t)
	js := l.srv.JS
	ctx := ctxT(t)

	forge := func(stream, subject string) uint64 {
		m := nats.NewMsg(schemas.DeadLetterSubject("sink", schemas.StreamCounters))
		m.Data = batch("gpu-009", 1)
		m.Header.Set(schemas.HeaderDeadRole, "sink")
		m.Header.Set(schemas.HeaderDeadStream, stream)
		m.Header.Set(schemas.HeaderDeadSubject, subject)
		m.Header.Set(schemas.HeaderDeadReason, "forged")
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	for _, tc := range []struct {
		name, stream, subject, want string
	}{
		{"another stream", "KV_rdmawatch_processors", "$KV.rdmawatch_processors.x", `stream "KV_rdmawatch_processors" is not one of rdmawatch's streams`},
		{"the dead-letter stream", schemas.StreamDeadLetter, schemas.DeadLetterSubject("sink", "X"), "is not one of rdmawatch's streams"},
		{"a subject of another stream", schemas.StreamCounters, schemas.InventorySubject("gpu-009"), "is not one of stream RDMAWATCH_COUNTERS's subjects"},
		{"a wildcard", schemas.StreamEvents, "rdmawatch.events.>", "not one literal subject"},
		{"no subject", schemas.StreamCounters, "", "no original subject"},
		{"an API subject", schemas.StreamCounters, "$JS.API.STREAM.DELETE.RDMAWATCH_COUNTERS", "is not one of stream RDMAWATCH_COUNTERS's subjects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq := forge(tc.stream, tc.subject)
			before := msgs(t, js, schemas.StreamCounters)
			_, err := l.r.Redrive(ctx, seq, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "dead letter "+itoa(seq)) {
				t.Fatalf("redrive: %v, want an error naming the letter with %q", err, tc.want)
			}
			if _, err := l.r.Get(ctx, seq); err != nil {
				t.Errorf("refused letter gone: %v", err)
			}
			if after := msgs(t, js, schemas.StreamCounters); after != before {
				t.Errorf("something was published: %d -> %d", before, after)
			}
		})
	}

	// No stream takes the copy (the inventory stream is gone): the letter stays.
	if err := js.DeleteStream(ctx, schemas.StreamInventory); err != nil {
		t.Fatal(err)
	}
	_, err := l.r.Redrive(ctx, l.seq["inventory"], false)
	if err == nil || !strings.Contains(err.Error(), "the dead letter is kept") {
		t.Fatalf("redrive to a missing stream: %v", err)
	}
	if _, err := l.r.Get(ctx, l.seq["inventory"]); err != nil {
		t.Errorf("letter deleted though its copy was not stored: %v", err)
	}
}

func TestDepth(t *testing.T) {
	l := setup(t)
	d, err := l.r.Depth(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[deadletter.Origin]uint64{
		{Role: "sink", Stream: schemas.StreamCounters}: 1, {Role: "processor", Stream: schemas.StreamCounters}: 1,
		{Role: "alert", Stream: schemas.StreamEvents}: 1, {Role: "sink", Stream: schemas.StreamInventory}: 1,
		{Role: "sink", Stream: schemas.StreamEvents}: 1,
	}
	if d.Messages != 5 || d.Bytes == 0 || len(d.ByOrigin) != len(want) {
		t.Fatalf("depth %+v", d)
	}
	for o, n := range want {
		if d.ByOrigin[o] != n {
			t.Errorf("%v: %d, want %d", o, d.ByOrigin[o], n)
		}
	}
	expected := `# HELP rdmawatch_deadletter_messages Messages in the dead-letter stream RDMAWATCH_DEADLETTER, by the role that refused them and the stream they came from.
# TYPE rdmawatch_deadletter_messages gauge
rdmawatch_deadletter_messages{role="alert",stream="RDMAWATCH_EVENTS"} 1
rdmawatch_deadletter_messages{role="processor",stream="RDMAWATCH_COUNTERS"} 1
rdmawatch_deadletter_messages{role="sink",stream="RDMAWATCH_COUNTERS"} 1
rdmawatch_deadletter_messages{role="sink",stream="RDMAWATCH_EVENTS"} 1
rdmawatch_deadletter_messages{role="sink",stream="RDMAWATCH_INVENTORY"} 1
`
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(deadletter.DepthCollector(l.r))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&text, mf); err != nil {
			t.Fatal(err)
		}
	}
	if got := text.String(); !strings.Contains(got, expected) || !strings.Contains(got, "\n"+deadletter.MetricBytes+" ") {
		t.Errorf("exported:\n%s\nwant:\n%s%s N", got, expected, deadletter.MetricBytes)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
