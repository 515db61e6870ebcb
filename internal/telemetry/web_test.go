package telemetry

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/rdmawatch/rdmawatch/internal/testwait"
)

// TestServeWebBasicAuth: with an exporter-toolkit web configuration, the
// endpoints answer only with the configured user's password; without one
// they answer anybody; a bad file fails the start, naming the file.
func TestServeWebBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret-scrape"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(good, fmt.Appendf(nil, "basic_auth_users:\n  prometheus: %s\n", hash), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("tls_server_config:\n  cert_file: /nonexistent.pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, config, user, pass string
		want                     int
	}{
		{"no configuration: open", "", "", "", http.StatusOK},
		{"basic auth, no credentials", good, "", "", http.StatusUnauthorized},
		{"basic auth, wrong password", good, "prometheus", "guess", http.StatusUnauthorized},
		{"basic auth, right password", good, "prometheus", "s3cret-scrape", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			s := New("sink", "test", nil)
			addr := freeAddr(t)
			done, err := s.ServeWeb(ctx, addr, tc.config)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { cancel(); <-done }()
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
			if tc.user != "" {
				req.SetBasicAuth(tc.user, tc.pass)
			}
			var resp *http.Response
			testwait.For(t, 5*time.Second, "an answer from "+addr, func() (err error) {
				resp, err = http.DefaultClient.Do(req)
				return err
			})
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}

	_, err = New("sink", "test", nil).ServeWeb(context.Background(), freeAddr(t), bad)
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a web configuration naming a missing certificate: %v, want an error naming %s", err, bad)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
