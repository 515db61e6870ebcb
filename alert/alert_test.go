package alert

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func event(state string, rev int) *schemas.Event {
	ev := &schemas.Event{
		ID: "pfc_storm/gpu-002/mlx5_0/1/1773446580", Type: schemas.TypePFCStorm, State: state, Revision: rev,
		Severity: schemas.SeverityCritical, Scope: schemas.ScopePort, Layer: schemas.LayerLinkNetwork,
		Subject: schemas.Subject{Node: "gpu-002", Device: "mlx5_0", Port: 1},
		Start:   schemas.Millis(1773446580000), DetectedAt: schemas.Millis(1773446585000),
		Summary:    "gpu-002 mlx5_0/1 pauses its peer 93% of the time",
		Evidence:   map[string]any{"tx_pause_fraction": 0.93, "affected_ports": 3},
		NextChecks: []string{"ethtool -S eth2 | grep pause", "mlnx_qos -i eth2"},
	}
	if state == schemas.StateResolved {
		end := schemas.Millis(1773446880000)
		ev.End = &end
	}
	return ev
}

func TestAlertmanagerAlert(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	am := &Alertmanager{labels: map[string]string{"fabric": "pod-a", "type": "must-not-override"}, runbook: "https://rb/{type}"}
	fabric := event(schemas.StateOpen, 0)
	fabric.Scope, fabric.Subject = schemas.ScopeFabric, schemas.Subject{}
	node := event(schemas.StateUpdate, 2)
	node.Scope, node.Subject = schemas.ScopeNode, schemas.Subject{Node: "gpu-009"}
	for _, tc := range []struct {
		name       string
		ev         *schemas.Event
		wantLabels map[string]string
		absent     []string
		wantEnds   time.Time
	}{
		{"open port", event(schemas.StateOpen, 0),
			map[string]string{"alertname": "rdmawatch_pfc_storm", "type": "pfc_storm", "severity": "critical", "layer": "link_network", "scope": "port", "node": "gpu-002", "device": "mlx5_0", "port": "1", "fabric": "pod-a"},
			nil, now.Add(4 * time.Minute)},
		{"resolved ends at data-time end", event(schemas.StateResolved, 3), map[string]string{"incident": "pfc_storm/gpu-002/mlx5_0/1/1773446580"}, nil, time.UnixMilli(1773446880000).UTC()},
		{"node scope has no device or port", node, map[string]string{"node": "gpu-009", "scope": "node"}, []string{"device", "port"}, now.Add(4 * time.Minute)},
		{"fabric scope has no node", fabric, map[string]string{"scope": "fabric"}, []string{"node", "device", "port"}, now.Add(4 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := am.alert(tc.ev, now, 4*time.Minute)
			for k, v := range tc.wantLabels {
				if a.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, a.Labels[k], v)
				}
			}
			for _, k := range tc.absent {
				if _, ok := a.Labels[k]; ok {
					t.Errorf("label %s present: %v", k, a.Labels)
				}
			}
			if !a.EndsAt.Equal(tc.wantEnds) {
				t.Errorf("endsAt %s, want %s", a.EndsAt, tc.wantEnds)
			}
			if !a.StartsAt.Equal(tc.ev.Start.Time()) {
				t.Errorf("startsAt %s, want the incident start %s", a.StartsAt, tc.ev.Start.Time())
			}
			if a.Annotations["runbook_url"] != "https://rb/pfc_storm" || a.Annotations["summary"] != tc.ev.Summary ||
				a.Annotations["next_checks"] != "ethtool -S eth2 | grep pause\nmlnx_qos -i eth2" ||
				a.Annotations["evidence"] != `affected_ports=3 tx_pause_fraction=0.93` {
				t.Errorf("annotations %q", a.Annotations)
			}
		})
	}
}

func TestPostJSONClassifiesAnswers(t *testing.T) {
	for _, tc := range []struct {
		status    int
		ok, perm  bool
		retryable bool
	}{
		{http.StatusOK, true, false, false},
		{http.StatusNoContent, true, false, false},
		{http.StatusBadRequest, false, true, false},
		{http.StatusNotFound, false, true, false},
		{http.StatusTooManyRequests, false, false, true},
		{http.StatusRequestTimeout, false, false, true},
		{http.StatusInternalServerError, false, false, true},
		{http.StatusServiceUnavailable, false, false, true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tc.status) }))
		err := postJSON(context.Background(), srv.Client(), srv.URL, []byte(`{}`), nil)
		srv.Close()
		if (err == nil) != tc.ok || retry.IsPermanent(err) != tc.perm || (err != nil && !retry.IsPermanent(err)) != tc.retryable {
			t.Errorf("status %d: err %v (permanent %v)", tc.status, err, retry.IsPermanent(err))
		}
	}
	// A refused connection is worth retrying.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	if err := postJSON(context.Background(), http.DefaultClient, url, []byte(`{}`), nil); err == nil || retry.IsPermanent(err) {
		t.Errorf("closed server: %v, want a retryable error", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "no target"},
		{Config{Webhooks: []string{"ftp://x"}}, "want http(s)"},
		{Config{Webhooks: []string{"http://user:secret@[::1"}}, "does not parse"},
		{Config{Alertmanagers: []string{"http://am:9093"}, RetryMin: time.Minute, RetryMax: time.Second}, "retry min"},
		{Config{Alertmanagers: []string{"http://am:9093"}}, ""},
		{Config{Webhooks: []string{"oncall=ftp://x"}}, "want http(s)"},
		{Config{Webhooks: []string{"on call=https://h/x"}}, `name "on call"`},
		{Config{Webhooks: []string{"a.b=https://h/x"}}, `name "a.b"`},
		{Config{Webhooks: []string{"https://h/x?token=secret-1", "https://h/x?token=secret-2"}}, "two targets named"},
		{Config{Webhooks: []string{"hook=https://h/x?token=secret-1", "hook=https://h/y"}}, "two targets named"},
		{Config{Webhooks: []string{"hook=https://h/x"}, Alertmanagers: []string{"hook=http://am:9093"}}, ""},
		{Config{Alertmanagers: []string{"http://am:9093"}, Labels: map[string]string{"bad-name": "x"}}, "label name"},
		{Config{Alertmanagers: []string{"http://am:9093"}, Labels: map[string]string{"__name": "x"}}, "label name"},
		{Config{Alertmanagers: []string{"http://am:9093"}, HTTPTimeout: 20 * time.Second}, "ack wait"},
		{Config{Alertmanagers: []string{"http://am:9093"}, HTTPTimeout: 20 * time.Second, AckWait: time.Minute}, ""},
		{Config{Alertmanagers: []string{"http://am:9093"}, MaxOpen: -1}, "max open"},
	} {
		err := tc.cfg.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidConfig)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("error shows a password: %v", err)
		}
	}
}

// recorder is a real HTTP endpoint that keeps what it was sent.
type recorder struct {
	mu     sync.Mutex
	status int
	alerts [][]postableAlert
	hooks  []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.HasSuffix(req.URL.Path, "/api/v2/alerts") {
		var a []postableAlert
		_ = json.NewDecoder(req.Body).Decode(&a)
		r.alerts = append(r.alerts, a)
		// Alertmanager's own check (model.Alert.Validate).
		for _, al := range a {
			if al.EndsAt.Before(al.StartsAt) {
				http.Error(w, "start time must be before end time", http.StatusBadRequest)
				return
			}
		}
	} else {
		r.hooks = append(r.hooks, req.Header.Get(HeaderIdempotencyKey))
	}
	if r.status != 0 {
		w.WriteHeader(r.status)
	}
}

// TestBridgeDeadLettersAndLearnsOpenIncidents: a poison event and an event a
// webhook refuses (4xx) go to the dead-letter stream with their reasons and
// the bridge goes on; a bridge started after an incident opened learns it
// from the stream and sends it to Alertmanager on its first resend.
func TestBridgeDeadLettersAndLearnsOpenIncidents(t *testing.T) {
	srv := natstest.Start(t, &schemas.StreamOptions{Memory: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	put := func(data []byte, id string) {
		t.Helper()
		msg := nats.NewMsg(schemas.EventSubject(event(schemas.StateOpen, 0)))
		msg.Data = data
		msg.Header.Set(nats.MsgIdHdr, id)
		if _, err := srv.JS.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	open, err := schemas.EncodeEvent(event(schemas.StateOpen, 0))
	if err != nil {
		t.Fatal(err)
	}
	put(open, "open") // before the bridge: only the history knows it

	am := &recorder{}
	amSrv := httptest.NewServer(am)
	defer amSrv.Close()
	hook := &recorder{status: http.StatusUnprocessableEntity}
	hookSrv := httptest.NewServer(hook)
	defer hookSrv.Close()

	b, err := New(srv.JS, Config{Alertmanagers: []string{amSrv.URL}, Webhooks: []string{hookSrv.URL}, ResendInterval: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	testwait.Until(t, 20*time.Second, "the learned open incident sent to alertmanager", func() bool {
		am.mu.Lock()
		defer am.mu.Unlock()
		return len(am.alerts) > 0
	})
	am.mu.Lock()
	if got := am.alerts[0]; len(got) != 1 || got[0].Labels["incident"] != event(schemas.StateOpen, 0).ID {
		t.Errorf("first alertmanager post %+v, want the open incident", got)
	}
	am.mu.Unlock()

	testwait.Until(t, 20*time.Second, "the bridge's consumers, before anything is published", func() bool {
		st, err := srv.JS.Stream(ctx, schemas.StreamEvents)
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		return err == nil && info.State.Consumers >= 2
	})
	put([]byte("not msgpack"), "poison")
	update, _ := schemas.EncodeEvent(event(schemas.StateUpdate, 1))
	put(update, "update")

	testwait.Until(t, 20*time.Second, "dead letters and deliveries", func() bool {
		s := b.Stats()
		return s.DeadLetters["webhook "+hookSrv.URL] == 2 && s.Delivered["alertmanager "+amSrv.URL] == 1 && s.DeadLetters["alertmanager "+amSrv.URL] == 1
	})
	dl, err := srv.JS.Stream(ctx, schemas.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	// The poison is refused by both targets but kept once: its dead letter's
	// Nats-Msg-Id is the role's, stream's and sequence's.
	if info, err := dl.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Fatalf("dead letters: %v %+v, want the poison and the refused update", err, info)
	}
	for seq := uint64(1); seq <= 2; seq++ {
		m, err := dl.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("dead letter %d: %v", seq, err)
		}
		if m.Subject != schemas.DeadLetterSubject(Role, schemas.StreamEvents) {
			t.Errorf("dead letter on %s", m.Subject)
		}
		reasons = append(reasons, m.Header.Get(schemas.HeaderDeadReason))
	}
	all := strings.Join(reasons, "\n")
	if !strings.Contains(all, "decode event") || !strings.Contains(all, "422") {
		t.Errorf("dead-letter reasons do not say why:\n%s", all)
	}
}
