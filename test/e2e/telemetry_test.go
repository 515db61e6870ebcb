package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/test/deploy"
)

func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue sums the samples of a metric (every label set) in a scrape.
func metricValue(body, name string) (float64, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? ([0-9.e+-]+)$`)
	var sum float64
	found := false
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}

// TestRolesServeMetricsAndReadiness runs collector, processor, sink and the
// alert bridge as processes with --listen: each is alive (/healthz) but not
// ready (/readyz 503) while NATS is absent, ready once it is there, its
// /metrics move while the simulated fleet flows, and promtool accepts them.
func TestRolesServeMetricsAndReadiness(t *testing.T) {
	const natsPort = 14560
	ns := startNATS(t, natsPort, "jetstream { store_dir: %STORE% }\n", nil)
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	env := []string{"RDMAWATCH_NATS=" + ns.URL, "RDMAWATCH_CLICKHOUSE=" + dsn}
	mustRun(t, env, "streams", "apply")
	mustRun(t, env, "migrate")
	ns.Stop()

	contract, err := deploy.ParseMetricsContract("../../deploy/prometheus/rules.yml")
	if err != nil || len(contract) == 0 {
		t.Fatalf("metrics contract: %v (%d metrics)", err, len(contract))
	}
	hook := startWebhookSink(t)
	ports := map[string]int{"collector": freePort(t), "processor": freePort(t), "sink": freePort(t), "alert": freePort(t)}
	listen := func(role string) string { return fmt.Sprintf("127.0.0.1:%d", ports[role]) }
	roles := []*role{
		startRole(t, "collector", env, "collector", "--listen", listen("collector"), "--source", "sim", "--sim-nodes", "2", "--sim-interval", "10s", "--speed", "60", "--inject", "link_flap@+1m:gpu-001/mlx5_0/1"),
		startRole(t, "processor", env, "processor", "--listen", listen("processor")),
		startRole(t, "sink", env, "sink", "--listen", listen("sink")),
		startRole(t, "alert", env, "alert", "--listen", listen("alert"), "--webhook", hook),
	}
	url := func(role, path string) string { return "http://" + listen(role) + path }
	for role := range ports {
		testwait.Until(t, 30*time.Second, role+" /healthz", func() bool { code, _ := httpGet(url(role, "/healthz")); return code == 200 })
		if code, body := httpGet(url(role, "/readyz")); code != http.StatusServiceUnavailable {
			t.Errorf("%s /readyz without NATS: %d %s, want 503", role, code, body)
		}
	}
	ns.Start()
	for role := range ports {
		testwait.Until(t, 60*time.Second, role+" ready", func() bool { code, _ := httpGet(url(role, "/readyz")); return code == 200 })
	}
	moving := map[string][]string{
		"collector": {"rdmawatch_collector_batches_published_total", "rdmawatch_collector_samples_published_total", "rdmawatch_collector_scrape_duration_seconds_count"},
		"processor": {"rdmawatch_processor_samples_processed_total", "rdmawatch_processor_events_published_total"},
		"sink":      {"rdmawatch_sink_rows_inserted_total", "rdmawatch_sink_insert_duration_seconds_count", "rdmawatch_sink_rollups_total"},
		"alert":     {"rdmawatch_alert_deliveries_total"},
	}
	for role, names := range moving {
		for _, name := range names {
			testwait.Until(t, 90*time.Second, role+" "+name+" > 0", func() bool {
				_, body := httpGet(url(role, "/metrics"))
				v, ok := metricValue(body, name)
				return ok && v > 0
			})
		}
		_, body := httpGet(url(role, "/metrics"))
		for _, name := range []string{"rdmawatch_build_info", "rdmawatch_ready", "rdmawatch_nats_connected"} {
			if v, ok := metricValue(body, name); !ok || v != 1 {
				t.Errorf("%s: %s = %v (present %v), want 1", role, name, v, ok)
			}
		}
		promtoolCheck(t, role, body)
		// The names the shipped alert rules read are the names served.
		for _, m := range contract {
			if strings.HasPrefix(m.Name, "rdmawatch_"+role+"_") || !strings.Contains(strings.TrimPrefix(m.Name, "rdmawatch_"), "_") || m.Name == "rdmawatch_dead_letters_total" && role != "collector" || strings.HasPrefix(m.Name, "rdmawatch_nats_") {
				if !strings.Contains(body, "# TYPE "+m.Name+" "+m.Type) {
					t.Errorf("%s does not serve %s (%s) of the contract in deploy/prometheus/rules.yml:%d", role, m.Name, m.Type, m.Line)
				}
			}
		}
	}
	for _, r := range roles {
		r.stop()
	}
}

// promtoolCheck lints a scrape with `promtool check metrics`.
func promtoolCheck(t *testing.T, role, body string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("RDMAWATCH_REQUIRE_PROMTOOL") == "1" {
			t.Fatal("promtool not installed (deploy/tools.sh installs it)")
		}
		t.Log("promtool not installed: metrics not linted (deploy/tools.sh installs it)")
		return
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("%s: promtool check metrics: %v\n%s", role, err, out.String())
	}
}

// startWebhookSink is a webhook receiver that accepts everything.
func startWebhookSink(t *testing.T) string {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })}
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/hook"
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// TestProcessorGroupTakeover runs two `processor --group` processes: they
// split the counters stream's partitions; after kill -9 of one, the other
// owns them all within the member TTL and a warm-up (read from /metrics).
func TestProcessorGroupTakeover(t *testing.T) {
	const natsPort = 14561
	ns := startNATS(t, natsPort, "jetstream { store_dir: %STORE% }\n", nil)
	env := []string{"RDMAWATCH_NATS=" + ns.URL}
	mustRun(t, env, "streams", "apply")
	ports := []int{freePort(t), freePort(t)}
	var roles []*role
	for i, p := range ports {
		roles = append(roles, startRole(t, fmt.Sprintf("processor-%d", i), env, "processor", "--group", "e2e", "--member", fmt.Sprintf("m%d", i),
			"--member-ttl", "3s", "--listen", fmt.Sprintf("127.0.0.1:%d", p)))
	}
	owned := func(i int) float64 {
		_, body := httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[i]))
		v, _ := metricValue(body, "rdmawatch_processor_partitions_owned")
		return v
	}
	testwait.Until(t, 60*time.Second, "two members splitting 16 partitions", func() bool {
		a, b := owned(0), owned(1)
		return a > 0 && b > 0 && a+b == 16
	})
	if err := roles[1].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	testwait.Until(t, 30*time.Second, "the survivor owning every partition", func() bool { return owned(0) == 16 })
	t.Logf("partitions taken over %s after kill -9", time.Since(began).Round(100*time.Millisecond))
	roles[0].stop()
}
