package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// niceOf reads the nice value of every thread of pid from /proc.
func niceOf(t *testing.T, pid int) []int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, task := range tasks {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		// Fields after the command's closing parenthesis: state is the
		// first, nice the 17th.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		n, err := strconv.Atoi(fields[16])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
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
