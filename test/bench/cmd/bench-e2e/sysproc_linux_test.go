package main

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// niceOf reads the nice value of every thread of pid from /proc.
func niceOf(t *testing.T, pid int) []int {
	t.Helper()
	threads, err := procfs.AllThreads(pid)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, th := range threads {
		st, err := th.Stat()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, st.Nice)
	}
	return out
}

// renice reaches every thread of a running process, and sets them back.
// The child is this test binary running TestReniceHelper: a Go process,
// with several threads already, as the sink is when it is reniced.
func TestRenice(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestReniceHelper$")
	cmd.Env = append(os.Environ(), "RENICE_HELPER=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	buf := make([]byte, 5)
	if _, err := stdout.Read(buf); err != nil { // "ready": its threads exist
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	before := niceOf(t, pid)
	if len(before) < 2 {
		t.Fatalf("helper has %d threads, want several", len(before))
	}
	restore, err := renice(pid, 7)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range niceOf(t, pid) {
		if n != 7 {
			t.Fatalf("thread %d of %d: nice %d after renice 7", i, pid, n)
		}
	}
	restore()
	if os.Geteuid() != 0 {
		return // lowering nice again needs CAP_SYS_NICE
	}
	for i, n := range niceOf(t, pid) {
		if n != before[0] {
			t.Fatalf("thread %d of %d: nice %d after restore, want %d", i, pid, n, before[0])
		}
	}
}

// TestReniceHelper is TestRenice's child: it says ready and waits.
func TestReniceHelper(t *testing.T) {
	if os.Getenv("RENICE_HELPER") != "1" {
		t.Skip("the child of TestRenice")
	}
	os.Stdout.WriteString("ready")
	time.Sleep(time.Minute) // killed by TestRenice
}
