package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
)

// runLive runs `rdmawatch run` (live mode) with args and env, and returns
// stdout and stderr; it fails the test when the run does not exit 0 within
// limit.
func runLive(t *testing.T, limit time.Duration, env []string, args ...string) (string, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"run"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("rdmawatch run %s: %v after %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, took, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String(), took
}

// The live run of the short scenario: a progress line every second, each
// scheduled fault detected and printed with its evidence as it opens and
// resolves, then the summary; it ends by itself, exit 0, well within 30 s.
func TestRunLive(t *testing.T) {
	stdout, stderr, took := runLive(t, 60*time.Second, []string{"RDMAWATCH_CLICKHOUSE="},
		"--sim-scenario", "live-short", "--inject", "pfc_storm@+9m,2m:gpu-006/mlx5_1/1")
	if took > 30*time.Second {
		t.Errorf("live-short took %s, want it under 30 s", took)
	}
	progress := regexp.MustCompile(`(?m)^progress: data \d\d:\d\d:\d\d \(\+[0-9hms]+\)\s+\d+ samples/s\s+lag \S+ data time`)
	if n := len(progress.FindAllString(stderr, -1)); n < 5 {
		t.Errorf("%d progress lines on stderr, want one a second (at least 5)\n%s", n, stderr)
	}
	for _, want := range []string{
		"live simulated fleet live-short: 16 hosts",
		"scheduled: pfc_storm          gpu-006/mlx5_1/1 at +9m0s",
		"faults on demand: nats --server nats://",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	for _, ev := range []struct{ state, typ, subject string }{
		{"OPEN", "link_flap", "gpu-005/mlx5_1/1"},
		{"RESOLVED", "link_flap", "gpu-005/mlx5_1/1"},
		{"OPEN", "pfc_storm", "gpu-002/mlx5_0/1"},
		{"RESOLVED", "pfc_storm", "gpu-002/mlx5_0/1"},
		{"OPEN", "pfc_storm", "gpu-006/mlx5_1/1"}, // the injected one
		{"OPEN", "cnp_ecn_imbalance", "gpu-011/mlx5_0/1"},
	} {
		re := regexp.MustCompile(`(?m)^\S+Z  ` + ev.state + ` +` + ev.typ + ` +\S+ +` + regexp.QuoteMeta(ev.subject) + ` .*\n    evidence: \S+=`)
		if !re.MatchString(stdout) {
			t.Errorf("no %s %s on %s with its evidence line", ev.state, ev.typ, ev.subject)
		}
	}
	for _, want := range []string{
		"of data time in",
		"  cnp_ecn_imbalance    incidents 1 ",
		"  link_flap            incidents 1 ",
		"  pfc_storm            incidents 2 ",
		"injected (ground truth): 4 labels",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr (tail):\n%s", stdout, tail(stderr, 2000))
	}
}

// With ClickHouse, what the live run printed is what it stored, and it
// prints the SQL to look at it.
// pastable is a command line the run summary prints for a newcomer.
var pastable = regexp.MustCompile(`^\S*rdmawatch (query events|postmortem) `)

func TestRunLiveIntoClickHouse(t *testing.T) {
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	stdout, stderr, _ := runLive(t, 90*time.Second, []string{"RDMAWATCH_CLICKHOUSE=" + dsn},
		"--sim-scenario", "live-short", "--speed", "300", "--no-progress")
	if strings.Contains(stderr, "progress:") {
		t.Errorf("--no-progress printed progress lines")
	}
	m := regexp.MustCompile(`(\d+) port samples .* in (\d+) messages\n(\d+) events, (\d+) incidents`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no summary in\n%s", stdout)
	}
	samples, _ := strconv.Atoi(m[1])
	events, _ := strconv.Atoi(m[3])
	// The summary ends with commands to paste: run them as a newcomer would.
	pasted := 0
	for _, line := range strings.Split(stdout, "\n") {
		line = strings.TrimSpace(line)
		if !pastable.MatchString(line) {
			continue
		}
		pasted++
		dir := t.TempDir()
		sh := exec.Command("bash", "-c", line)
		sh.Dir = dir
		out, err := sh.CombinedOutput()
		if err != nil {
			t.Errorf("pasted %q: %v\n%s", line, err, out)
			continue
		}
		switch {
		case strings.Contains(line, " query events "):
			for _, typ := range []string{"link_flap", "pfc_storm", "cnp_ecn_imbalance"} {
				if !strings.Contains(string(out), typ) {
					t.Errorf("pasted %q: no %s in\n%s", line, typ, out)
				}
			}
		default:
			report, err := os.ReadFile(filepath.Join(dir, "postmortem", "report.md"))
			if err != nil || !strings.Contains(string(report), "pfc_storm") {
				t.Errorf("pasted %q: report %v\n%s", line, err, report)
			}
			if svgs, _ := filepath.Glob(filepath.Join(dir, "postmortem", "*.svg")); len(svgs) == 0 {
				t.Errorf("pasted %q: no plot", line)
			}
		}
	}
	if pasted != 2 || !strings.Contains(stdout, "clickhouse-client --host") {
		t.Errorf("the summary does not end with the query events and postmortem commands and the raw-table SQL:\n%s", stdout)
	}
	conn := chtest.Open(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for table, want := range map[string]int{"port_samples": samples, "events": events} {
		n, err := chtest.Count(ctx, conn, table, "")
		if err != nil {
			t.Fatal(err)
		}
		if int(n) != want {
			t.Errorf("%s has %d rows, the run printed %d", table, n, want)
		}
	}
}

// ctrl-C stops a live run cleanly: what was read is drained, the summary is
// printed, exit 0, within seconds.
func TestRunLiveInterrupt(t *testing.T) {
	cmd := exec.Command(bin, "run", "--sim-scenario", "live-fleet")
	cmd.Env = append(os.Environ(), "RDMAWATCH_CLICKHOUSE=")
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := testwait.Poll(30*time.Second, "a progress line", func() error {
		if !strings.Contains(stderr.String(), "progress: data") {
			return errors.New("none yet")
		}
		return nil
	}); err != nil {
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGINT: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), tail(stderr.String(), 2000))
		}
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("still running 15 s after SIGINT\n%s", tail(stderr.String(), 2000))
	}
	for _, want := range []string{"interrupted at data time", "of data time in"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q\n%s", want, stdout.String())
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// syncBuffer is a bytes.Buffer the test may read while the process writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
