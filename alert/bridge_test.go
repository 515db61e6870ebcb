package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestParseTarget(t *testing.T) {
	const slackTok = "AbCdEf0123456789GhIjKlMn"
	for _, tc := range []struct {
		spec      string
		name, url string
		named     bool
		err       string
	}{
		{spec: "oncall=https://hooks.example/services/T0/B0/" + slackTok, name: "oncall", url: "https://hooks.example/services/T0/B0/" + slackTok, named: true},
		{spec: " am-1 = http://am:9093 ", name: "am-1", url: "http://am:9093", named: true},
		{spec: "http://am:9093", name: "http://am:9093", url: "http://am:9093"},
		{spec: "https://h/x?token=abc&b=1", name: "https://h/x", url: "https://h/x?token=abc&b=1"},
		{spec: "https://hooks.slack.com/services/T0123ABCD/B0456EFGH/" + slackTok, name: "https://hooks.slack.com/services/T0123ABCD/B0456EFGH/xxxxx", url: "https://hooks.slack.com/services/T0123ABCD/B0456EFGH/" + slackTok},
		{spec: "http://amuser:AmP4ss@AM.example:9093", name: "http://am.example:9093", url: "http://amuser:AmP4ss@AM.example:9093"},
		{spec: "=http://am:9093", err: `name ""`},
		{spec: "on call=http://am:9093", err: `name "on call"`},
		{spec: strings.Repeat("n", 65) + "=http://am:9093", err: "want 1-64"},
		{spec: "oncall=ftp://h/x", err: "want http(s)"},
		{spec: "oncall", err: "want http(s)"},
		{spec: "http://amuser:AmP4ss@[::1", err: "does not parse"},
	} {
		got, err := ParseTarget(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseTarget(%q) = %+v, %v; want error %q", tc.spec, got, err, tc.err)
			}
			if err != nil && (strings.Contains(err.Error(), "AmP4ss") || strings.Contains(err.Error(), slackTok)) {
				t.Errorf("ParseTarget(%q): error shows a secret: %v", tc.spec, err)
			}
			continue
		}
		if err != nil || got.Name != tc.name || got.URL != tc.url || got.Named != tc.named {
			t.Errorf("ParseTarget(%q) = %+v, %v; want name %q url %q named %v", tc.spec, got, err, tc.name, tc.url, tc.named)
		}
	}
}

// TestConsumerNameSurvivesRotation: a consumer is named after its target's
// name, so changing only a token or a password (or, for a named target, the
// whole URL) keeps the consumer and the events it has not delivered yet.
func TestConsumerNameSurvivesRotation(t *testing.T) {
	name := func(spec string) string {
		t.Helper()
		tg, err := ParseTarget(spec)
		if err != nil {
			t.Fatal(err)
		}
		return consumerName("rdmawatch-alert", "wh", tg)
	}
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"oncall=https://h/s/T0/B0/AbCdEf0123456789GhIjKlMn", "oncall=https://other.example/new", true},
		{"https://h/s/T0/B0/AbCdEf0123456789GhIjKlMn", "https://h/s/T0/B0/ZyXwVu9876543210TsRqPoNm", true},
		{"http://amuser:AmP4ss@am:9093", "http://amuser:N3wPass@am:9093", true},
		{"https://h/x?token=abc", "https://h/x?token=def", true},
		{"https://h/a", "https://h/b", false},
		{"oncall=https://h/a", "paging=https://h/a", false},
	} {
		if got := name(tc.a) == name(tc.b); got != tc.same {
			t.Errorf("%q -> %s, %q -> %s: same %v, want %v", tc.a, name(tc.a), tc.b, name(tc.b), got, tc.same)
		}
	}
	if got := name("oncall=https://h/x"); got != "rdmawatch-alert-wh-oncall" {
		t.Errorf("named consumer %q", got)
	}
	// A URL without credentials keeps the consumer earlier versions named
	// after the URL's hash.
	h := fnv.New64a()
	h.Write([]byte("http://am:9093"))
	if got, want := name("http://am:9093"), fmt.Sprintf("rdmawatch-alert-wh-%016x", h.Sum64()); got != want {
		t.Errorf("bare URL consumer %q, want the earlier name %q", got, want)
	}
}

// TestAlertmanagerTimes: against a fixed clock, an alert never starts after
// now (data time ahead of the clock: a simulator at --speed 10, a fast host
// clock) and never ends before it starts, which Alertmanager refuses with
// 400; a resolved incident never ends in the future, which would keep it
// firing.
func TestAlertmanagerTimes(t *testing.T) {
	now := time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)
	const hold = 4 * time.Minute
	at := func(d time.Duration) schemas.Millis { return schemas.Millis(now.Add(d).UnixMilli()) }
	ev := func(state string, start time.Duration, end *time.Duration) *schemas.Event {
		e := event(state, 0)
		e.Start = at(start)
		if end != nil {
			m := at(*end)
			e.End = &m
		}
		return e
	}
	d := func(v time.Duration) *time.Duration { return &v }
	for _, tc := range []struct {
		name         string
		ev           *schemas.Event
		starts, ends time.Time
	}{
		{"open in the past", ev(schemas.StateOpen, -time.Hour, nil), now.Add(-time.Hour), now.Add(hold)},
		{"open ahead of the clock", ev(schemas.StateOpen, 10*time.Minute, nil), now, now.Add(hold)},
		{"open far ahead", ev(schemas.StateUpdate, 48*time.Hour, nil), now, now.Add(hold)},
		{"resolved in the past", ev(schemas.StateResolved, -time.Hour, d(-30*time.Minute)), now.Add(-time.Hour), now.Add(-30 * time.Minute)},
		{"resolved, end ahead", ev(schemas.StateResolved, -time.Hour, d(time.Hour)), now.Add(-time.Hour), now},
		{"resolved, both ahead", ev(schemas.StateResolved, time.Hour, d(2*time.Hour)), now, now},
		{"resolved, end before start", ev(schemas.StateResolved, -time.Hour, d(-2*time.Hour)), now.Add(-time.Hour), now.Add(-time.Hour)},
	} {
		a := (&Alertmanager{}).alert(tc.ev, now, hold)
		if !a.StartsAt.Equal(tc.starts) || !a.EndsAt.Equal(tc.ends) || a.EndsAt.Before(a.StartsAt) {
			t.Errorf("%s: startsAt %s endsAt %s, want %s %s", tc.name, a.StartsAt, a.EndsAt, tc.starts, tc.ends)
		}
	}
}

// TestAlertmanagerPostBatches: many alerts go in POSTs of at most maxBatch
// alerts and maxBatchBytes, each a valid array, none lost.
func TestAlertmanagerPostBatches(t *testing.T) {
	for _, tc := range []struct {
		name            string
		n, batch, bytes int
		want            []int
	}{
		{"one", 1, 2, 1 << 20, []int{1}},
		{"by count", 5, 2, 1 << 20, []int{2, 2, 1}},
		{"by bytes", 3, 100, 10, []int{1, 1, 1}},
		{"none", 0, 2, 1 << 20, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			u, _ := url.Parse(srv.URL)
			am := &Alertmanager{base: u, client: srv.Client(), maxBatch: tc.batch, maxBatchBytes: tc.bytes}
			alerts := make([]postableAlert, tc.n)
			now := time.Now()
			for i := range alerts {
				e := event(schemas.StateOpen, 0)
				e.ID = fmt.Sprintf("%s-%d", e.ID, i)
				alerts[i] = am.alert(e, now, time.Minute)
			}
			if err := am.post(context.Background(), alerts); err != nil {
				t.Fatal(err)
			}
			var sizes []int
			seen := map[string]bool{}
			for _, a := range rec.alerts {
				sizes = append(sizes, len(a))
				for _, al := range a {
					seen[al.Labels["incident"]] = true
				}
			}
			if fmt.Sprint(sizes) != fmt.Sprint(tc.want) || len(seen) != tc.n {
				t.Errorf("POST sizes %v (%d incidents), want %v (%d)", sizes, len(seen), tc.want, tc.n)
			}
		})
	}
}

// bridgeRun starts b on its own context and stops it when the test ends.
func bridgeRun(t *testing.T, b *Bridge) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	testwait.Until(t, 20*time.Second, "the bridge's consumers, before the test publishes", func() bool {
		st, err := b.js.Stream(context.Background(), schemas.StreamEvents)
		if err != nil {
			return false
		}
		info, err := st.Info(context.Background())
		return err == nil && info.State.Consumers >= len(b.targets)
	})
}

// publish puts data on the subject of a valid event: a forged event's
// fields need not make a valid subject.
func publish(t *testing.T, js jetstream.JetStream, data []byte, id string) {
	t.Helper()
	msg := nats.NewMsg(schemas.EventSubject(event(schemas.StateOpen, 0)))
	msg.Data = data
	msg.Header.Set(nats.MsgIdHdr, id)
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

func encode(t *testing.T, ev *schemas.Event) []byte {
	t.Helper()
	data, err := schemas.EncodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// deadLetters returns the dead letters' reason headers.
func deadLetters(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, schemas.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Header.Get(schemas.HeaderDeadReason))
	}
	return out
}

// TestBridgeUndeliverableEvents: an event that can never be sent (a CR/LF in
// its type, which would go into a header) goes to the dead letters at once,
// from each target once, with no attempt and no retry wait; the event after
// it is delivered right away.
func TestBridgeUndeliverableEvents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forge  func(*schemas.Event)
		reason string
	}{
		{"CR/LF in the type", func(e *schemas.Event) { e.Type = "pfc_storm\r\nX-Injected: 1" }, "control character"},
		{"LF in the id", func(e *schemas.Event) { e.ID += "\n" }, "control character"},
		{"NUL in the node", func(e *schemas.Event) { e.Subject.Node = "gpu\x00" }, "control character"},
		{"invalid UTF-8 in the state", func(e *schemas.Event) { e.Severity = "crit\xff" }, "not UTF-8"},
		{"a type too long", func(e *schemas.Event) { e.Type = strings.Repeat("t", 600) }, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t, &schemas.StreamOptions{Memory: true})
			am, hook := &recorder{}, &recorder{}
			amSrv, hookSrv := httptest.NewServer(am), httptest.NewServer(hook)
			defer amSrv.Close()
			defer hookSrv.Close()
			// A retry would wait 5 s: the test fails if one happens.
			b, err := New(srv.JS, Config{Alertmanagers: []string{"am=" + amSrv.URL}, Webhooks: []string{"hook=" + hookSrv.URL},
				ResendInterval: time.Hour, RetryMin: 5 * time.Second, RetryMax: 5 * time.Second}, nil)
			if err != nil {
				t.Fatal(err)
			}
			bridgeRun(t, b)
			bad := event(schemas.StateOpen, 0)
			tc.forge(bad)
			good := event(schemas.StateOpen, 0)
			start := time.Now()
			publish(t, srv.JS, encode(t, bad), "bad")
			publish(t, srv.JS, encode(t, good), "good")
			testwait.Until(t, 20*time.Second, "the good event delivered", func() bool {
				s := b.Stats()
				return s.Delivered["webhook hook"] == 1 && s.Delivered["alertmanager am"] == 1
			})
			if took := time.Since(start); took > 4*time.Second {
				t.Errorf("the undeliverable event held its targets %s", took)
			}
			s := b.Stats()
			for _, name := range []string{"webhook hook", "alertmanager am"} {
				if s.DeadLetters[name] != 1 || s.Failures[name] != 0 {
					t.Errorf("%s: %d dead letters, %d failed attempts; want 1 and 0", name, s.DeadLetters[name], s.Failures[name])
				}
			}
			hook.mu.Lock()
			if fmt.Sprint(hook.hooks) != fmt.Sprint([]string{good.MsgID()}) {
				t.Errorf("webhook got %q, want only the good event", hook.hooks)
			}
			hook.mu.Unlock()
			if s.Open != 1 {
				t.Errorf("%d incidents held, want the good one", s.Open)
			}
			// Both targets dead-letter it; the stream keeps it once.
			if r := deadLetters(t, srv.JS); len(r) != 1 || !strings.Contains(r[0], tc.reason) || strings.ContainsAny(r[0], "\r\n") {
				t.Errorf("dead letters %q, want one saying %q", r, tc.reason)
			}
		})
	}
}

// TestBridgeMaxOpen: at most MaxOpen incidents are held; an event that would
// open one more is dead-lettered and counted, a resolve makes room, and the
// re-send of the held ones is split into POSTs of MaxBatch.
func TestBridgeMaxOpen(t *testing.T) {
	srv := natstest.Start(t, &schemas.StreamOptions{Memory: true})
	am := &recorder{}
	amSrv := httptest.NewServer(am)
	defer amSrv.Close()
	b, err := New(srv.JS, Config{Alertmanagers: []string{"am=" + amSrv.URL}, ResendInterval: time.Hour, MaxOpen: 3, MaxBatch: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bridgeRun(t, b)
	incident := func(i int, state string, rev int) *schemas.Event {
		e := event(state, rev)
		e.ID = fmt.Sprintf("%s-%d", e.ID, i)
		return e
	}
	for _, tc := range []struct {
		ev                       *schemas.Event
		open, refused, delivered int
	}{
		{incident(1, schemas.StateOpen, 0), 1, 0, 1},
		{incident(2, schemas.StateOpen, 0), 2, 0, 2},
		{incident(3, schemas.StateOpen, 0), 3, 0, 3},
		{incident(4, schemas.StateOpen, 0), 3, 1, 3},   // over the bound
		{incident(1, schemas.StateUpdate, 1), 3, 1, 4}, // held: updated
		{incident(5, schemas.StateUpdate, 1), 3, 2, 4}, // over the bound
		{incident(2, schemas.StateResolved, 1), 2, 2, 5},
		{incident(6, schemas.StateOpen, 0), 3, 2, 6}, // room again
	} {
		publish(t, srv.JS, encode(t, tc.ev), tc.ev.MsgID())
		testwait.Until(t, 20*time.Second, "event "+tc.ev.MsgID(), func() bool {
			s := b.Stats()
			return s.Delivered["alertmanager am"]+s.DeadLetters["alertmanager am"] == uint64(tc.delivered+tc.refused)
		})
		s := b.Stats()
		if s.Open != tc.open || s.Refused != uint64(tc.refused) || s.Delivered["alertmanager am"] != uint64(tc.delivered) || s.DeadLetters["alertmanager am"] != uint64(tc.refused) {
			t.Fatalf("after %s: open %d refused %d delivered %d dead %d; want %d %d %d %d", tc.ev.MsgID(),
				s.Open, s.Refused, s.Delivered["alertmanager am"], s.DeadLetters["alertmanager am"], tc.open, tc.refused, tc.delivered, tc.refused)
		}
	}
	for _, r := range deadLetters(t, srv.JS) {
		if !strings.Contains(r, "max open incidents") {
			t.Errorf("dead letter reason %q does not name the bound", r)
		}
	}
	am.mu.Lock()
	am.alerts = nil
	am.mu.Unlock()
	b.resend(context.Background())
	am.mu.Lock()
	defer am.mu.Unlock()
	var sizes []int
	for _, a := range am.alerts {
		sizes = append(sizes, len(a))
	}
	if fmt.Sprint(sizes) != "[2 1]" {
		t.Errorf("re-send POSTs of %v alerts, want [2 1]", sizes)
	}
}

// flaky answers 503 to the first failures requests, then 204, counting
// them.
type flaky struct {
	mu       sync.Mutex
	failures int
	requests int
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	if f.requests <= f.failures {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// TestBridgeRetryWaitKeepsAckWindow: a retry wait three times the consumer's
// ack wait does not let the server redeliver the event to another bridge on
// the same consumer (a second replica): it is delivered once, after exactly
// one retry, by the bridge that took it.
func TestBridgeRetryWaitKeepsAckWindow(t *testing.T) {
	srv := natstest.Start(t, &schemas.StreamOptions{Memory: true})
	hook := &flaky{failures: 1}
	hookSrv := httptest.NewServer(hook)
	defer hookSrv.Close()
	cfg := Config{Webhooks: []string{"hook=" + hookSrv.URL}, AckWait: 1500 * time.Millisecond,
		HTTPTimeout: 700 * time.Millisecond, RetryMin: 4500 * time.Millisecond, RetryMax: 4500 * time.Millisecond}
	var bridges []*Bridge
	for range 2 {
		b, err := New(srv.JS, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		bridgeRun(t, b)
		bridges = append(bridges, b)
	}
	delivered := func() (n uint64) {
		for _, b := range bridges {
			n += b.Stats().Delivered["webhook hook"]
		}
		return n
	}
	ev := event(schemas.StateOpen, 0)
	start := time.Now()
	publish(t, srv.JS, encode(t, ev), ev.MsgID())
	testwait.Until(t, 20*time.Second, "delivery after the retry", func() bool { return delivered() == 1 })
	// Past the retry of the bridge that took it and one more ack wait: a
	// redelivery and the retry both show by then. A sleep, not a wait: the
	// test proves that no second delivery comes in that time.
	time.Sleep(time.Until(start.Add(cfg.RetryMax + 2*cfg.AckWait)))
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if hook.requests != 2 || delivered() != 1 {
		t.Errorf("%d requests, %d deliveries; want 2 and 1 (the event was redelivered during the retry wait)", hook.requests, delivered())
	}
}

// TestBridgeShowsNoSecret: the webhook's token (path and query) and the
// Alertmanager's password appear in no output of the bridge, even when the
// receivers echo their request: not in the logs at debug level, the Stats
// (metric labels), the dead-letter reasons, nor the consumers' names and
// descriptions.
func TestBridgeShowsNoSecret(t *testing.T) {
	const (
		pathTok  = "AbCdEf0123456789GhIjKlMn"
		queryTok = "q-T0ken-4242"
		amPW     = "AmP4ss-w0rd"
	)
	srv := natstest.Start(t, &schemas.StreamOptions{Memory: true})
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pw, _ := r.BasicAuth()
		// A verbose receiver: the request path without its scheme, and
		// the credentials it refused.
		http.Error(w, fmt.Sprintf("no route for %s (user %s:%s)", r.URL.RequestURI(), user, pw), http.StatusNotFound)
	}))
	defer echo.Close()
	u, _ := url.Parse(echo.URL)
	hookURL := fmt.Sprintf("http://%s/services/T0/B0/%s?token=%s", u.Host, pathTok, queryTok)
	amURL := fmt.Sprintf("http://amuser:%s@%s", amPW, u.Host)
	var logs lockedBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := New(srv.JS, Config{Alertmanagers: []string{"am-1=" + amURL}, Webhooks: []string{hookURL}, ResendInterval: time.Hour}, log)
	if err != nil {
		t.Fatal(err)
	}
	bridgeRun(t, b)
	for i := 0; i < 2; i++ {
		ev := event(schemas.StateOpen, i)
		publish(t, srv.JS, encode(t, ev), ev.MsgID())
	}
	testwait.Until(t, 20*time.Second, "both refusals dead-lettered", func() bool {
		s := b.Stats()
		return s.DeadLetters["alertmanager am-1"] == 2 && s.DeadLetters["webhook http://"+u.Host+"/services/T0/B0/xxxxx"] == 2
	})

	var out bytes.Buffer
	out.WriteString(logs.String())
	st, _ := json.Marshal(b.Stats())
	out.Write(st)
	for _, r := range deadLetters(t, srv.JS) {
		out.WriteString(r + "\n")
	}
	stream, err := srv.JS.Stream(context.Background(), schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	cl := stream.ListConsumers(context.Background())
	for info := range cl.Info() {
		j, _ := json.Marshal(info)
		out.Write(j)
	}
	if err := cl.Err(); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{pathTok, queryTok, amPW} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("the bridge shows %q:\n%s", secret, out.String())
		}
	}
	for _, want := range []string{"alertmanager am-1", "rdmawatch alert bridge: webhook http://" + u.Host + "/services/T0/B0/xxxxx", "404",
		"no route for /services/T0/B0/xxxxx?token=xxxxx (user :)", "no route for /api/v2/alerts (user amuser:xxxxx)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the outputs: the test would miss what it looks for:\n%s", want, out.String())
		}
	}
}

// lockedBuffer is written by the bridge's goroutines while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
