// Package chaos proves the pipeline's guarantees from the outside, against
// real processes: bin/rdmawatch roles, a real NATS JetStream and a real
// ClickHouse. The poison corpus (poison_test.go) runs with every `go test
// ./...`; the kill -9 / outage run (chaos_test.go) only with -tags chaos
// (`make test-chaos`), because it takes minutes and a standalone nats-server.
package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// bin is the rdmawatch binary under test: RDMAWATCH_BIN, or one built for
// this run.
var bin string

func TestMain(m *testing.M) {
	bin = os.Getenv("RDMAWATCH_BIN")
	if bin != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "rdmawatch-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "rdmawatch")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/rdmawatch").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build rdmawatch: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// portBase is the first of the ports this package may use (14600-14699 on
// the shared development machine); RDMAWATCH_CHAOS_PORT_BASE moves them.
func portBase() int {
	if v := os.Getenv("RDMAWATCH_CHAOS_PORT_BASE"); v != "" {
		var p int
		if _, err := fmt.Sscan(v, &p); err == nil && p > 0 && p < 65000 {
			return p
		}
	}
	return 14600
}

// logBuffer is a process's combined output, safe to read while it runs.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tail is the last n lines, for failure messages.
func (l *logBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimRight(l.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// panicLine is the first line of a Go panic or fatal error in a log.
var panicLine = regexp.MustCompile(`(?m)^(panic: .*|fatal error: .*)$`)

// role is one run of a bin/rdmawatch subcommand. Its output is kept whole
// (every run of the role in one buffer, each start marked) and also written
// to a file in the test's temporary folder.
type role struct {
	t    testing.TB
	name string
	args []string
	log  *logBuffer
	file *os.File

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	err    error // the last run's exit
	starts int
	// exits lists how every run ended that the test did not end itself.
	exits []string
	// killing is set while the test stops or kills the process, so its
	// exit is not reported as a crash.
	killing bool
	// endsByItself: a clean exit (status 0) is expected (a collector at
	// the end of its data).
	endsByItself bool
}

func newRole(t testing.TB, name string, args ...string) *role {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	r := &role{t: t, name: name, args: args, log: &logBuffer{}, file: f}
	t.Cleanup(func() {
		r.stop(10 * time.Second)
		f.Close()
	})
	return r
}

// start runs the role; it must not be running.
func (r *role) start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts++
	fmt.Fprintf(r.log, "=== chaos: start %d of %s at %s\n", r.starts, r.name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(bin, r.args...)
	w := &teeWriter{a: r.log, b: r.file}
	cmd.Stdout, cmd.Stderr = w, w
	// Its own process group: a kill never reaches the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start %s: %v", r.name, err)
	}
	r.cmd, r.done, r.killing = cmd, make(chan struct{}), false
	done := r.done
	go func() {
		err := cmd.Wait()
		r.mu.Lock()
		r.err = err
		if !r.killing && !(r.endsByItself && err == nil) {
			msg := fmt.Sprintf("%s run %d exited by itself: %v", r.name, r.starts, err)
			if m := panicLine.FindString(r.log.String()); m != "" {
				msg += " (" + m + ")"
			}
			r.exits = append(r.exits, msg)
		}
		r.mu.Unlock()
		close(done)
	}()
}

// running reports whether the current run is alive.
func (r *role) running() bool {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// crashes lists the runs that ended without the test ending them.
func (r *role) crashes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.exits...)
}

// kill9 sends SIGKILL and waits for the exit.
func (r *role) kill9() {
	r.signal(syscall.SIGKILL, 10*time.Second)
}

// stop sends SIGTERM, then SIGKILL after grace.
func (r *role) stop(grace time.Duration) {
	r.signal(syscall.SIGTERM, grace)
}

func (r *role) signal(sig syscall.Signal, grace time.Duration) {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	if cmd == nil || done == nil {
		r.mu.Unlock()
		return
	}
	select {
	case <-done:
		r.mu.Unlock()
		return
	default:
	}
	r.killing = true
	fmt.Fprintf(r.log, "=== chaos: %s to %s (pid %d) at %s\n", sig, r.name, cmd.Process.Pid, time.Now().UTC().Format(time.RFC3339Nano))
	r.mu.Unlock()
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(grace):
		r.t.Errorf("%s did not exit %s after %s; killing it", r.name, sig, grace)
		_ = cmd.Process.Kill()
		<-done
	}
}

// wait waits for the current run to end by itself (a collector at the end
// of its data) and returns its exit error.
func (r *role) wait(ctx context.Context) error {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	select {
	case <-done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

type teeWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (w *teeWriter) Write(p []byte) (int, error) {
	_, _ = w.b.Write(p)
	return w.a.Write(p)
}

// streamsApplyArgs is `rdmawatch streams apply` when the binary has it (the
// admin step that creates the streams so roles need no rights to), else nil.
func streamsApplyArgs(natsURL string) []string {
	out, err := exec.Command(bin, "streams", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "apply") {
		return nil
	}
	return []string{"streams", "apply", "--nats", natsURL}
}
