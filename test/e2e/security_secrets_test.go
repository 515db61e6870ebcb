package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/alert"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestSecuritySecretsNeverPrinted runs every role and the admin, reader and
// in-process commands with passwords in their NATS URLs and ClickHouse DSNs
// (userinfo and ?password=), at debug level, including connects that fail
// (a wrong password, a server that is not there), and greps everything they
// wrote for the passwords.
func TestSecuritySecretsNeverPrinted(t *testing.T) {
	const natsPort, chTCP = 14530, 14582
	securedNATS(t, natsPort)
	chAdmin, chSink, chReader := securedClickHouse(t, chTCP, 14583)
	const wrongPW = "Wr0ngPassw0rd"
	secrets := []string{natsAdminPW, natsCollectorPW, natsProcessorPW, natsSinkPW, chAdminPW, chSinkPW, chReaderPW, wrongPW}
	var outputs []*role
	debug := []string{"RDMAWATCH_LOG_LEVEL=debug"}
	start := func(name string, env []string, args ...string) *role {
		r := startRole(t, name, append(debug, env...), args...)
		outputs = append(outputs, r)
		return r
	}
	once := func(wantOK bool, env []string, args ...string) {
		t.Helper()
		r := start(args[0], env, args...)
		if code := r.exitCode(2 * time.Minute); (code == 0) != wantOK {
			t.Fatalf("rdmawatch %s: exit %d, want success %v:\n%s", strings.Join(args, " "), code, wantOK, r.out.String())
		}
	}
	natsAs := func(user, pw string) string { return "RDMAWATCH_NATS=" + natsURLAs(natsPort, user, pw) }

	once(true, []string{natsAs("rdmawatch-admin", natsAdminPW)}, "streams", "apply")
	once(true, []string{natsAs("rdmawatch-admin", natsAdminPW)}, "streams", "check")
	once(true, []string{"RDMAWATCH_CLICKHOUSE=" + chAdmin}, "migrate")
	// The password as a DSN parameter, the form redaction used to miss.
	sinkParam := fmt.Sprintf("clickhouse://127.0.0.1:%d/rdmawatch?username=rdmawatch_sink&password=%s", chTCP, chSinkPW)
	roles := []*role{
		start("collector", []string{natsAs("rdmawatch-sim", natsCollectorPW)}, "collector", "--source", "sim", "--sim-nodes", "2", "--speed", "120"),
		start("processor", []string{natsAs("rdmawatch-processor", natsProcessorPW)}, "processor"),
		start("sink", []string{natsAs("rdmawatch-sink", natsSinkPW), "RDMAWATCH_CLICKHOUSE=" + sinkParam}, "sink"),
	}
	for _, r := range roles {
		r.waitLog(" started", 30*time.Second)
	}
	conn := chtest.Open(t, chAdmin)
	testwait.For(t, time.Minute, "rows in port_samples", func() error {
		if n, err := chtest.Count(ctxT(t, 10*time.Second), conn, "port_samples", ""); err != nil || n == 0 {
			return fmt.Errorf("port_samples: %d rows, %v", n, err)
		}
		return nil
	})
	once(true, []string{"RDMAWATCH_CLICKHOUSE=" + chReader}, "query", "events", "--from", "24h")
	for _, r := range roles {
		r.stop()
	}

	// Failing connects: refused credentials end the command with an error
	// that names the server; absent servers are waited for, logged, and a
	// SIGTERM ends the wait with exit 0.
	once(false, []string{natsAs("rdmawatch-sim", wrongPW)}, "collector", "--node", "gpu-001")
	once(false, []string{natsAs("rdmawatch-sink", natsSinkPW), "RDMAWATCH_CLICKHOUSE=" + strings.Replace(chSink, chSinkPW, wrongPW, 1)}, "sink")
	once(false, []string{"RDMAWATCH_CLICKHOUSE=" + strings.Replace(chReader, chReaderPW, wrongPW, 1)}, "query", "events")
	absentNATS := start("processor", []string{"RDMAWATCH_NATS=nats://rdmawatch-processor:" + natsProcessorPW + "@127.0.0.1:14539,nats://x:" + wrongPW + "@127.0.0.1:14538"}, "processor")
	absentCH := start("sink", []string{natsAs("rdmawatch-sink", natsSinkPW), "RDMAWATCH_CLICKHOUSE=clickhouse://rdmawatch_sink:" + chSinkPW + "@127.0.0.1:14599/rdmawatch"}, "sink")
	absentNATS.waitLog("nats not reachable yet", 30*time.Second)
	absentCH.waitLog("clickhouse not reachable yet", 60*time.Second)
	for _, r := range []*role{absentNATS, absentCH} {
		_ = r.cmd.Process.Signal(sigterm)
		if code := r.exitCode(30 * time.Second); code != 0 {
			t.Errorf("%s waiting for its service: exit %d after SIGTERM, want 0:\n%s", r.name, code, r.out.String())
		}
	}
	// The in-process job, which prints the DSN it stored into.
	once(true, []string{"RDMAWATCH_CLICKHOUSE=" + chAdmin}, "run", "--sim-scenario", "live-short", "--speed", "0", "--no-progress")

	for _, r := range outputs {
		out := r.out.String()
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s printed the secret %q:\n%s", r.name, s, out)
			}
		}
	}
	if t.Failed() {
		return
	}
	// The test can fail: the redacted forms are there, so the URLs were printed.
	var all strings.Builder
	for _, r := range outputs {
		all.WriteString(r.out.String())
	}
	for _, w := range []string{"rdmawatch-sim:xxxxx@", "password=xxxxx", "rdmawatch_admin:xxxxx@"} {
		if !strings.Contains(all.String(), w) {
			t.Errorf("no %q in any output: did the roles stop naming their servers?", w)
		}
	}
}

// Secrets of the alert role's targets: webhook tokens in the path (as
// Slack's and Discord's carry them) and the query, Alertmanager passwords
// (right and wrong) in the userinfo.
const (
	amUser      = "amuser"
	amPW        = "AmP4ss-Pl4nted"
	amPWHash    = "$2a$10$/pPwVEfeiSZkFQotNiI5NuCtPuB4QW.PNMI.S9HmRgCEzLIipCATq" // bcrypt of amPW
	amWrongPW   = "AmWr0ng-Pl4nted"
	hookPathTok = "SlAcKt0kEnPl4nted0123456"
	hookQueryTk = "QueryT0kenPl4nted"
	hookPathTk2 = "R0tAtEdT0kEnPl4nted98765"
	deadHookTok = "DiScOrDt0kEn-Pl4nted_0123456789abcdefABCDEF"
)

// alertEvent is a port incident of its own node, starting at start.
func alertEvent(node int, state string, start time.Time) schemas.Event {
	ev := schemas.Event{Type: schemas.TypePFCStorm, State: state, Severity: schemas.SeverityCritical,
		Scope: schemas.ScopePort, Layer: schemas.LayerLinkNetwork,
		Subject: schemas.Subject{Node: fmt.Sprintf("gpu-%03d", node), Device: "mlx5_0", Port: 1},
		Start:   schemas.Millis(start.UnixMilli()), DetectedAt: schemas.Millis(start.UnixMilli()),
		Summary: "planted incident", NextChecks: []string{"ethtool -S eth2"},
	}
	ev.ID = schemas.EventID(ev.Type, ev.Subject, ev.Start)
	if state == schemas.StateResolved {
		end := schemas.Millis(start.Add(time.Minute).UnixMilli())
		ev.End, ev.Revision = &end, 1
	}
	return ev
}

// TestSecurityAlertSecretsNeverPrinted runs the alert role, at debug level
// and with its shipped NATS user, against a real Alertmanager with basic auth
// (one target with the right password, one with a wrong one), a webhook whose
// URL holds tokens and that answers a refusal quoting its request path, and a
// webhook that is not there; it publishes incidents whose data time runs
// ahead of the clock and one whose type holds CR/LF. Then it greps every
// output channel of the role for the tokens and passwords: its logs, the
// /metrics it serves, the dead letters' headers, the consumers' config and
// description as JetStream keeps them, `config print alert` and `alert
// --help`. A rotated token keeps the consumer: an event published while the
// bridge was down is delivered after its restart with the new token.
func TestSecurityAlertSecretsNeverPrinted(t *testing.T) {
	const natsPort = 14548
	securedNATS(t, natsPort)
	admin := []string{natsAs(natsPort, "rdmawatch-admin", natsAdminPW)}
	mustRun(t, admin, "streams", "apply")
	js := adminJS(t, natsURLAs(natsPort, "rdmawatch-admin", natsAdminPW))
	am := startAlertmanagerBasicAuth(t, amUser, amPWHash, amPW)

	// The webhook refuses resolved events (422), quoting the path and
	// query it was called with, as a verbose receiver does.
	var mu sync.Mutex
	accepted := map[string]bool{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(alert.HeaderEventState) == schemas.StateResolved {
			http.Error(w, "no route for "+r.URL.RequestURI(), http.StatusUnprocessableEntity)
			return
		}
		mu.Lock()
		accepted[r.Header.Get(alert.HeaderIdempotencyKey)] = true
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	hookAccepted := func(key string) bool {
		mu.Lock()
		defer mu.Unlock()
		return accepted[key]
	}
	hookHost := strings.TrimPrefix(hook.URL, "http://")
	deadPort, listen := freePort(t), freePort(t)
	webhooks := func(pathTok string) string {
		return fmt.Sprintf("oncall=http://%s/services/T0PLANT/B0PLANT/%s?token=%s,http://127.0.0.1:%d/api/webhooks/123456789012345678/%s",
			hookHost, pathTok, hookQueryTk, deadPort, deadHookTok)
	}
	alertmanagers := fmt.Sprintf("am-main=http://%s:%s@%s,http://%s:%s@%s", amUser, amPW, am, amUser, amWrongPW, am)
	secrets := []string{amPW, amWrongPW, hookPathTok, hookQueryTk, hookPathTk2, deadHookTok, natsAlertPW}

	var outputs []*role
	env := func(pathTok string) []string {
		return []string{"RDMAWATCH_LOG_LEVEL=debug", natsAs(natsPort, "rdmawatch-alert", natsAlertPW),
			"RDMAWATCH_WEBHOOK=" + webhooks(pathTok), "RDMAWATCH_ALERTMANAGER=" + alertmanagers}
	}
	startAlert := func(pathTok string) *role {
		r := startRole(t, "alert", env(pathTok), "alert", "--listen", fmt.Sprintf("127.0.0.1:%d", listen),
			"--resend-interval", "2s", "--max-attempts", "2", "--retry-min", "50ms", "--retry-max", "100ms")
		outputs = append(outputs, r)
		r.waitLog("alert bridge started", 30*time.Second)
		return r
	}
	consumers := func() map[string]jetstream.ConsumerConfig {
		st, err := js.Stream(ctxT(t, 10*time.Second), schemas.StreamEvents)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]jetstream.ConsumerConfig{}
		l := st.ListConsumers(ctxT(t, 10*time.Second))
		for info := range l.Info() {
			if strings.HasPrefix(info.Name, "rdmawatch-alert-") {
				out[info.Name] = info.Config
			}
		}
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}

	bridge := startAlert(hookPathTok)
	testwait.Until(t, 30*time.Second, "the bridge's four consumers", func() bool { return len(consumers()) == 4 })
	// Data time ten minutes ahead of the clock (a simulator at --speed 10,
	// a fast host clock): Alertmanager must fire the incident, not refuse it.
	ahead := alertEvent(1, schemas.StateOpen, time.Now().Add(10*time.Minute))
	open := alertEvent(2, schemas.StateOpen, time.Now().Add(-time.Minute))
	resolved := alertEvent(2, schemas.StateResolved, time.Now().Add(-time.Minute))
	publishEvents(t, js, []schemas.Event{ahead, open, resolved})
	// A forged type with CR/LF, on a valid subject.
	forged := alertEvent(3, schemas.StateOpen, time.Now())
	forged.Type = "pfc_storm\r\nX-Planted: 1"
	data, err := schemas.EncodeEvent(&forged)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(schemas.EventSubject(&open))
	msg.Data = data
	if _, err := js.PublishMsg(ctxT(t, 10*time.Second), msg); err != nil {
		t.Fatal(err)
	}

	amAuth := "http://" + amUser + ":" + amPW + "@" + am
	testwait.Until(t, 60*time.Second, "the incident ahead of the clock firing in alertmanager", func() bool {
		return activeAlerts(t, amAuth)[ahead.ID].Status.State == "active"
	})
	testwait.Until(t, 60*time.Second, "the webhook to accept both open incidents", func() bool {
		return hookAccepted(ahead.MsgID()) && hookAccepted(open.MsgID())
	})
	dl, err := js.Stream(ctxT(t, 10*time.Second), schemas.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	// Every event is refused by the wrong password and the absent webhook:
	// each has its dead letter (the stream keeps one per event).
	testwait.Until(t, 60*time.Second, "four dead letters", func() bool {
		info, err := dl.Info(ctxT(t, 10*time.Second))
		return err == nil && info.State.Msgs == 4
	})
	// A re-send round (every 2 s) to both Alertmanagers, the refused one
	// logged.
	bridge.waitLog("re-sending open incidents", 30*time.Second)
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", listen))
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	before := consumers()
	bridge.stop()

	// Rotated token: same consumers, and the event published meanwhile is
	// delivered.
	missed := alertEvent(4, schemas.StateOpen, time.Now())
	publishEvents(t, js, []schemas.Event{missed})
	bridge = startAlert(hookPathTk2)
	testwait.Until(t, 60*time.Second, "the event published while the bridge was down, delivered with the rotated token", func() bool {
		return hookAccepted(missed.MsgID())
	})
	bridge.stop()
	after := consumers()
	if fmt.Sprint(sortedKeys(before)) != fmt.Sprint(sortedKeys(after)) {
		t.Errorf("consumers %v before rotating the token, %v after", sortedKeys(before), sortedKeys(after))
	}
	for _, name := range []string{"rdmawatch-alert-am-am-main", "rdmawatch-alert-wh-oncall"} {
		if _, ok := after[name]; !ok {
			t.Errorf("no consumer %s named after its target: %v", name, sortedKeys(after))
		}
	}
	if out := bridge.out.String() + outputs[0].out.String(); strings.Contains(out, "alertmanager am-main refused") {
		t.Errorf("alertmanager refused a live incident:\n%s", out)
	}

	// The dead letters' headers and the consumers as JetStream keeps them.
	var stored strings.Builder
	info, err := dl.Info(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := dl.GetMsg(ctxT(t, 10*time.Second), seq)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&stored, "%v\n", m.Header)
	}
	for name, c := range after {
		j, _ := json.Marshal(c)
		fmt.Fprintf(&stored, "%s %s\n", name, j)
	}

	// The commands that show settings, and a refused setting.
	confFile := filepath.Join(t.TempDir(), "rdmawatch.yaml")
	if err := os.WriteFile(confFile, []byte("alert:\n  alertmanager: "+alertmanagers+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile := []string{"RDMAWATCH_WEBHOOK=" + webhooks(hookPathTok)}
	printed := mustRun(t, fromFile, "--config", confFile, "config", "print", "alert")
	// --help with targets in the environment: it shows the built-in
	// defaults and the variables' names, never what the environment holds.
	help := mustRun(t, []string{"RDMAWATCH_WEBHOOK=" + webhooks(hookPathTok), "RDMAWATCH_ALERTMANAGER=" + alertmanagers}, "alert", "--help")
	refused, code := runOnce(t, env(hookPathTok), "alert", "--webhook", "on call=http://h/x/"+hookPathTok)
	if code == 0 || !strings.Contains(refused, `name "on call"`) {
		t.Errorf("alert with a bad target name: exit %d:\n%s", code, refused)
	}

	channels := map[string]string{
		"metrics":                 string(metrics),
		"dead letters, consumers": stored.String(),
		"config print alert":      printed,
		"alert --help":            help,
		"alert (refused name)":    refused,
	}
	for i, r := range outputs {
		channels[fmt.Sprintf("alert log %d", i+1)] = r.out.String()
	}
	for name, out := range channels {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s shows the secret %q:\n%s", name, s, out)
			}
		}
	}
	if strings.Contains(help, "T0PLANT") {
		t.Errorf("alert --help shows the environment's targets:\n%s", help)
	}
	// The test can fail: the targets are named in each channel.
	deadName := fmt.Sprintf("http://127.0.0.1:%d/api/webhooks/123456789012345678/xxxxx", deadPort)
	for name, want := range map[string][]string{
		"metrics":                 {`receiver="webhook oncall"`, `receiver="alertmanager am-main"`, `receiver="webhook ` + deadName + `"`, `receiver="alertmanager http://` + am + `"`},
		"dead letters, consumers": {"401 Unauthorized", "no route for /services/T0PLANT/B0PLANT/xxxxx?token=xxxxx", "control character", "rdmawatch alert bridge: webhook oncall"},
		"config print alert":      {"amuser:xxxxx@", "/B0PLANT/xxxxx?token=xxxxx"},
		"alert --help":            {"--webhook", "RDMAWATCH_WEBHOOK"},
		"alert log 1":             {"connection refused", "webhook " + deadName, "re-sending open incidents"},
	} {
		for _, w := range want {
			if !strings.Contains(channels[name], w) {
				t.Errorf("%s does not show %q:\n%s", name, w, channels[name])
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
