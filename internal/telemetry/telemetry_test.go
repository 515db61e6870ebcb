package telemetry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rdmawatch/rdmawatch/internal/natsembed"
	"github.com/rdmawatch/rdmawatch/internal/telemetry/telemetrytest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	return telemetrytest.Get(t, h, path)
}

func TestHealthAndReadiness(t *testing.T) {
	s := New("sink", "v1.2.3", nil)
	h := s.Handler()
	if code, _ := get(t, h, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz %d", code)
	}
	if code, body := get(t, h, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
		t.Errorf("/readyz with no checks: %d %q, want 503 starting", code, body)
	}
	var clickhouseDown error = errors.New("dial tcp 127.0.0.1:9000: connection refused")
	s.AddCheck("clickhouse", func(context.Context) error { return clickhouseDown })
	s.AddCheck("streams", func(context.Context) error { return nil })
	if code, body := get(t, h, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "clickhouse: dial tcp") || strings.Contains(body, "streams") {
		t.Errorf("/readyz with clickhouse down: %d %q", code, body)
	}
	if _, body := get(t, h, "/metrics"); !strings.Contains(body, `rdmawatch_ready{role="sink"} 0`) {
		t.Errorf("/metrics does not say not ready:\n%s", grep(body, "rdmawatch_"))
	}
	clickhouseDown = nil
	if code, _ := get(t, h, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with every check passing: %d", code)
	}
	_, body := get(t, h, "/metrics")
	for _, want := range []string{`rdmawatch_ready{role="sink"} 1`, `rdmawatch_build_info{goversion="`, `role="sink",version="v1.2.3"} 1`, "process_cpu_seconds_total", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grep(body, "rdmawatch_"))
		}
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestWatchNATS(t *testing.T) {
	srv, err := natsembed.Start(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s := New("collector", "dev", nil)
	s.WatchNATS(nc)
	ctx := context.Background()
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("ready while connected: %v", err)
	}
	srv.Shutdown()
	testwait.Until(t, 10*time.Second, "the client to see the server gone", func() bool { return !nc.IsConnected() })
	if err := s.Ready(ctx); err == nil || !strings.Contains(err.Error(), "nats: not connected") {
		t.Errorf("ready with NATS down: %v", err)
	}
	if _, body := get(t, s.Handler(), "/metrics"); !strings.Contains(body, `rdmawatch_nats_connected{role="collector"} 0`) {
		t.Errorf("metrics:\n%s", grep(body, "rdmawatch_nats"))
	}
}

// TestMetricsPassPromtool runs Prometheus's own linter over the output.
func TestMetricsPassPromtool(t *testing.T) {
	telemetrytest.CheckWithPromtool(t, New("processor", "dev", nil).Handler())
}
