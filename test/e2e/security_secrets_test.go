package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
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
	chtest.Eventually(t, time.Minute, 250*time.Millisecond, func() error {
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
