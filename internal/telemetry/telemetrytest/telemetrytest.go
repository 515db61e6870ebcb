// Package telemetrytest holds what the tests of every role's metrics share:
// a request to a handler, and Prometheus's own linter over /metrics.
package telemetrytest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Get serves one GET of path by h: the status code and the body.
func Get(t testing.TB, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

// CheckWithPromtool lints what h serves on /metrics with `promtool check
// metrics`; it skips without promtool, unless RDMAWATCH_REQUIRE_PROMTOOL=1
// (make test installs Debian's prometheus package, which ships it).
func CheckWithPromtool(t testing.TB, h http.Handler) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		msg := "promtool not installed (apt-get install prometheus; deploy/tools.sh does)"
		if os.Getenv("RDMAWATCH_REQUIRE_PROMTOOL") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	_, body := Get(t, h, "/metrics")
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out.String())
	}
}
