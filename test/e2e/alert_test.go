package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/alert"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// startAlertmanager runs a real Alertmanager (Debian's prometheus-alertmanager)
// on a free loopback port with a throwaway config and storage, stopped by PID
// when the test ends. Without the binary the test skips, or fails when
// RDMAWATCH_REQUIRE_ALERTMANAGER=1 (make test installs it).
func startAlertmanager(t *testing.T) string { return runAlertmanager(t, "", "") }

// startAlertmanagerBasicAuth runs Alertmanager wanting HTTP basic auth of
// user with the password whose bcrypt hash is hash (its --web.config.file),
// and returns its host:port; the test's own requests use password.
func startAlertmanagerBasicAuth(t *testing.T, user, hash, password string) string {
	t.Helper()
	base := runAlertmanager(t, fmt.Sprintf("basic_auth_users:\n  %s: %q\n", user, hash), user+":"+password+"@")
	return strings.TrimPrefix(base, "http://")
}

// runAlertmanager starts Alertmanager with webConfig (empty: none) and
// returns http://host:port; creds ("user:password@") are for its readiness
// check.
func runAlertmanager(t *testing.T, webConfig, creds string) string {
	t.Helper()
	var path string
	for _, name := range []string{"prometheus-alertmanager", "alertmanager"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		msg := "no alertmanager binary: apt-get install prometheus-alertmanager (deploy/tools.sh does)"
		if os.Getenv("RDMAWATCH_REQUIRE_ALERTMANAGER") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte("route:\n  receiver: none\n  group_wait: 1s\nreceivers:\n- name: none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"--config.file=" + cfg, "--storage.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--cluster.listen-address="}
	if webConfig != "" {
		web := filepath.Join(dir, "web.yml")
		if err := os.WriteFile(web, []byte(webConfig), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--web.config.file="+web)
	}
	cmd := exec.Command(path, args...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("alertmanager log:\n%s", logs.String())
		}
	})
	testwait.Until(t, 30*time.Second, "alertmanager ready", func() bool {
		resp, err := http.Get("http://" + creds + addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return "http://" + addr
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type amAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
}

func activeAlerts(t *testing.T, base string) map[string]amAlert {
	t.Helper()
	resp, err := http.Get(base + "/api/v2/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var alerts []amAlert
	if err := json.NewDecoder(resp.Body).Decode(&alerts); err != nil {
		t.Fatal(err)
	}
	out := map[string]amAlert{}
	for _, a := range alerts {
		out[a.Labels["incident"]] = a
	}
	return out
}

// flakyWebhook fails the first failures attempts of every event revision
// with 503, then accepts; it counts what it accepted per Idempotency-Key.
type flakyWebhook struct {
	failures int
	mu       sync.Mutex
	attempts map[string]int
	accepted map[string]int
	bodies   map[string]schemas.Event
}

func (f *flakyWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(alert.HeaderIdempotencyKey)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts[key]++
	if f.attempts[key] <= f.failures {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	var ev schemas.Event
	if err := json.NewDecoder(r.Body).Decode(&ev); err != nil || ev.MsgID() != key {
		http.Error(w, fmt.Sprintf("body %v does not match key %q", err, key), http.StatusBadRequest)
		return
	}
	f.accepted[key]++
	f.bodies[key] = ev
	w.WriteHeader(http.StatusNoContent)
}

func (f *flakyWebhook) snapshot() (map[string]int, map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, b := map[string]int{}, map[string]int{}
	for k, v := range f.attempts {
		a[k] = v
	}
	for k, v := range f.accepted {
		b[k] = v
	}
	return a, b
}

func publishEvents(t *testing.T, js jetstream.JetStream, evs []schemas.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range evs {
		ev := evs[i]
		data, err := schemas.EncodeEvent(&ev)
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(schemas.EventSubject(&ev))
		msg.Data = data
		msg.Header.Set(nats.MsgIdHdr, ev.MsgID())
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAlertBridgeAlertmanagerAndWebhook replays a PFC storm scenario and
// delivers its incidents through `rdmawatch alert` to a real Alertmanager and
// to a webhook that fails the first two attempts of every event: each
// incident fires in Alertmanager with the documented labels and is gone once
// resolved; the webhook accepts every revision exactly once. Then `events
// tail --json --type pfc_storm` prints exactly the storm's revisions.
func TestAlertBridgeAlertmanagerAndWebhook(t *testing.T) {
	evs, _ := replay(t, "pfc-storm")
	var firing, resolved []schemas.Event
	for _, ev := range evs {
		if ev.State == schemas.StateResolved {
			resolved = append(resolved, ev)
		} else {
			firing = append(firing, ev)
		}
	}
	if len(firing) == 0 || len(resolved) == 0 {
		t.Fatalf("scenario gives %d firing and %d resolved events; the test needs both", len(firing), len(resolved))
	}

	am := startAlertmanager(t)
	hook := &flakyWebhook{failures: 2, attempts: map[string]int{}, accepted: map[string]int{}, bodies: map[string]schemas.Event{}}
	wh := httptest.NewServer(hook)
	t.Cleanup(wh.Close)

	srv := natstest.Start(t, &schemas.StreamOptions{})
	js := srv.JS
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	bridge := exec.Command(bin, "alert", "--nats", srv.URL, "--alertmanager", am, "--webhook", wh.URL+"/hook",
		"--label", "fabric=pod-a", "--runbook-url", "https://runbooks.example/{type}",
		"--resend-interval", "30s", "--retry-min", "20ms", "--retry-max", "200ms")
	var bridgeLog bytes.Buffer
	bridge.Stdout, bridge.Stderr = &bridgeLog, &bridgeLog
	if err := bridge.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- bridge.Wait() }()
	t.Cleanup(func() {
		_ = bridge.Process.Kill()
		if t.Failed() {
			t.Logf("alert bridge log:\n%s", bridgeLog.String())
		}
	})
	testwait.Until(t, 30*time.Second, "the bridge's two consumers", func() bool {
		st, err := js.Stream(ctx, schemas.StreamEvents)
		if err != nil {
			return false
		}
		n := 0
		for name := range st.ConsumerNames(ctx).Name() {
			if strings.HasPrefix(name, "rdmawatch-alert-") {
				n++
			}
		}
		return n == 2
	})

	publishEvents(t, js, firing)
	want := map[string]schemas.Event{}
	for _, ev := range firing {
		want[ev.ID] = ev
	}
	testwait.Until(t, 60*time.Second, "every incident firing in alertmanager", func() bool {
		got := activeAlerts(t, am)
		for id := range want {
			if got[id].Status.State != "active" {
				return false
			}
		}
		return true
	})
	got := activeAlerts(t, am)
	for id, ev := range want {
		a := got[id]
		wantLabels := map[string]string{
			"alertname": alert.AlertName(ev.Type), "incident": id, "type": ev.Type, "severity": ev.Severity,
			"layer": ev.Layer, "scope": ev.Scope, "node": ev.Subject.Node, "fabric": "pod-a",
		}
		if ev.Scope == schemas.ScopePort {
			wantLabels["device"] = ev.Subject.Device
			wantLabels["port"] = strconv.Itoa(ev.Subject.Port)
		}
		for k, v := range wantLabels {
			if a.Labels[k] != v {
				t.Errorf("incident %s: label %s = %q, want %q (labels %v)", id, k, a.Labels[k], v, a.Labels)
			}
		}
		for _, k := range []string{"summary", "evidence", "next_checks", "runbook_url"} {
			if a.Annotations[k] == "" {
				t.Errorf("incident %s: annotation %s empty (annotations %v)", id, k, a.Annotations)
			}
		}
		if a.Annotations["runbook_url"] != "https://runbooks.example/"+ev.Type {
			t.Errorf("incident %s: runbook_url %q", id, a.Annotations["runbook_url"])
		}
	}

	publishEvents(t, js, resolved)
	// Well inside the 2-minute hold of the last send: only the resolved
	// event itself can end the alerts this early.
	testwait.Until(t, 20*time.Second, "resolved incidents gone from alertmanager's active alerts", func() bool {
		got := activeAlerts(t, am)
		for _, ev := range resolved {
			if _, ok := got[ev.ID]; ok {
				return false
			}
		}
		return true
	})

	testwait.Until(t, 60*time.Second, "the webhook to accept every revision", func() bool {
		_, accepted := hook.snapshot()
		return len(accepted) == len(evs)
	})
	attempts, accepted := hook.snapshot()
	for _, ev := range evs {
		if accepted[ev.MsgID()] != 1 || attempts[ev.MsgID()] != hook.failures+1 {
			t.Errorf("webhook: %s accepted %d times after %d attempts, want once after %d", ev.MsgID(), accepted[ev.MsgID()], attempts[ev.MsgID()], hook.failures+1)
		}
	}

	if err := bridge.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("bridge exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("bridge did not exit 20 s after SIGTERM")
	}

	// events tail prints exactly the storm's revisions, as --events-out JSON.
	tail := exec.Command(bin, "events", "tail", "--nats", srv.URL, "--json", "--type", schemas.TypePFCStorm, "--since", "all", "--follow=false")
	var stderr bytes.Buffer
	tail.Stderr = &stderr
	out, err := tail.Output()
	if err != nil {
		t.Fatalf("events tail: %v\n%s", err, stderr.String())
	}
	var wantStorm []string
	for _, ev := range append(append([]schemas.Event{}, firing...), resolved...) {
		if ev.Type == schemas.TypePFCStorm {
			wantStorm = append(wantStorm, ev.MsgID())
		}
	}
	var gotStorm []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev schemas.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("events tail line %q: %v", sc.Text(), err)
		}
		gotStorm = append(gotStorm, ev.MsgID())
	}
	if len(wantStorm) == 0 || fmt.Sprint(gotStorm) != fmt.Sprint(wantStorm) {
		t.Errorf("events tail --type pfc_storm printed %v, want %v", gotStorm, wantStorm)
	}
}
