// Package cluster tests rdmawatch on real clusters started by the project's
// own scripts (deploy/cluster): a 3-node NATS JetStream cluster with R3
// streams and a ClickHouse shard of two replicas with ZooKeeper. The nodes
// are killed with SIGKILL mid-stream and restarted.
//
// The tests start processes and take minutes, so they run only under
// `make test-cluster`, which sets RDMAWATCH_CLUSTER_TEST=1.
package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// root is the checkout: the scripts and bin/ live there.
func root(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := stopSharedCH(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func requireCluster(t *testing.T) {
	t.Helper()
	if os.Getenv("RDMAWATCH_CLUSTER_TEST") == "" {
		t.Skip("cluster tests run under `make test-cluster` (RDMAWATCH_CLUSTER_TEST=1)")
	}
}

// script runs deploy/cluster/<name> with args and returns its stdout.
func script(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(root(t), "deploy", "cluster", name), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s%s", name, args, err, out, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
