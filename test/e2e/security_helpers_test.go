package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
)

// natsProc is a real nats-server, configured by a config file as an
// operator would, inside the test process (so it can be stopped and
// started again on the same port and store).
type natsProc struct {
	t    *testing.T
	conf string
	srv  *server.Server
	URL  string
}

// startNATS writes conf (a nats-server config; %STORE% becomes a
// temporary JetStream store) into a temporary folder next to the files,
// and starts the server on port (from this helper's range 14500-14599).
func startNATS(t *testing.T, port int, conf string, files map[string]string) *natsProc {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf = fmt.Sprintf("listen: 127.0.0.1:%d\n", port) + strings.ReplaceAll(conf, "%STORE%", filepath.Join(dir, "js"))
	path := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &natsProc{t: t, conf: path, URL: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

func (p *natsProc) Start() {
	p.t.Helper()
	opts, err := server.ProcessConfigFile(p.conf)
	if err != nil {
		p.t.Fatalf("nats config: %v", err)
	}
	opts.NoSigs, opts.NoLog = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		p.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		p.t.Fatal("nats-server not ready")
	}
	p.srv = s
}

func (p *natsProc) Stop() {
	if p.srv != nil {
		p.srv.Shutdown()
		p.srv.WaitForShutdown()
		p.srv = nil
	}
}

// adminJS connects with opts (the admin's credentials) for the test's own
// changes and checks.
func adminJS(t *testing.T, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	_, js := natstest.Connect(t, url, opts...)
	return js
}

// outBuffer is run_test.go's syncBuffer: output read while written.
type outBuffer = syncBuffer

// role is a bin/rdmawatch process.
type role struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  *outBuffer
	done chan struct{}
	err  error
}

// startRole runs bin with args and extra environment; the test's cleanup
// kills it if the test did not stop it.
func startRole(t *testing.T, name string, env []string, args ...string) *role {
	t.Helper()
	r := &role{t: t, name: name, out: &outBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Env = append(os.Environ(), env...)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// waitLog waits for substr in the output; it fails the test with the
// output after total, or as soon as the process exits without it.
func (r *role) waitLog(substr string, total time.Duration) {
	r.t.Helper()
	err := testwait.Poll(total, fmt.Sprintf("%s to log %q", r.name, substr), func() error {
		if strings.Contains(r.out.String(), substr) {
			return nil
		}
		select {
		case <-r.done:
			// It may have logged it on its way out.
			if strings.Contains(r.out.String(), substr) {
				return nil
			}
			return testwait.Stop(fmt.Errorf("it exited (%v)", r.err))
		default:
			return errors.New("not logged yet")
		}
	})
	if err != nil {
		r.t.Fatalf("%v:\n%s", err, r.out.String())
	}
}

// stop sends SIGTERM and wants a clean exit (0) within 30s, saying so.
func (r *role) stop() {
	r.t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		r.t.Fatalf("%s ignored SIGTERM for 30s:\n%s", r.name, r.out.String())
	}
	if r.err != nil {
		r.t.Errorf("%s exited with %v after SIGTERM, want 0:\n%s", r.name, r.err, r.out.String())
	}
	if !strings.Contains(r.out.String(), "drained and stopped") {
		r.t.Errorf("%s did not say it drained and stopped:\n%s", r.name, r.out.String())
	}
}

// exitCode waits for a process that should end by itself.
func (r *role) exitCode(total time.Duration) int {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(total):
		_ = r.cmd.Process.Kill()
		r.t.Fatalf("%s still running after %v:\n%s", r.name, total, r.out.String())
	}
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		return ee.ExitCode()
	}
	if r.err != nil {
		r.t.Fatalf("%s: %v", r.name, r.err)
	}
	return 0
}

// runOnce runs a command to its end and returns its output and exit code.
func runOnce(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	r := startRole(t, args[0], env, args...)
	code := r.exitCode(2 * time.Minute)
	return r.out.String(), code
}

// mustRun is runOnce that wants exit 0.
func mustRun(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, code := runOnce(t, env, args...)
	if code != 0 {
		t.Fatalf("rdmawatch %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// chProc is a ClickHouse of the test's own, run by
// deploy/clickhouse/local.sh on the given ports (this helper's range) with
// env (users, TLS); local.sh stops it by the PID in its pid file.
type chProc struct {
	t   *testing.T
	DSN string
	run func(verb string) (string, error)
}

func (c *chProc) Up() {
	c.t.Helper()
	out, err := c.run("up")
	if err != nil {
		c.t.Fatalf("local.sh up: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	c.DSN = lines[len(lines)-1]
}

func (c *chProc) Down() {
	c.t.Helper()
	if out, err := c.run("down"); err != nil {
		c.t.Errorf("local.sh down: %v\n%s", err, out)
	}
}

// newClickHouse prepares a private server without starting it.
func newClickHouse(t *testing.T, tcp, http int, env ...string) *chProc {
	t.Helper()
	if !chtest.HaveBinary() {
		if os.Getenv(chtest.EnvRequire) == "1" {
			t.Fatal("no clickhouse-server on PATH")
		}
		t.Skip("no clickhouse or clickhouse-server on PATH: this test runs a private server")
	}
	dir := t.TempDir()
	c := &chProc{t: t}
	c.run = func(verb string) (string, error) {
		cmd := exec.Command("bash", chtest.LocalScript(), verb)
		cmd.Env = append(os.Environ(), append([]string{
			"RDMAWATCH_CH_DIR=" + dir,
			fmt.Sprintf("RDMAWATCH_CH_TCP_PORT=%d", tcp),
			fmt.Sprintf("RDMAWATCH_CH_HTTP_PORT=%d", http),
		}, env...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(c.Down)
	return c
}

// privateClickHouse starts a private server and returns its DSN.
func privateClickHouse(t *testing.T, tcp, http int, env ...string) string {
	t.Helper()
	c := newClickHouse(t, tcp, http, env...)
	c.Up()
	return c.DSN
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }

const sigterm = syscall.SIGTERM
