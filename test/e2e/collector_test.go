package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/collector/sysfstest"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func embeddedJS(t *testing.T) (string, jetstream.JetStream) {
	t.Helper()
	srv := natstest.Start(t, &schemas.StreamOptions{})
	return srv.URL, srv.JS
}

// startCollector runs the binary (through argv, e.g. under unshare) and
// stops it with SIGTERM when the test ends, checking it exits cleanly.
func startCollector(t *testing.T, argv []string) *bytes.Buffer {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("collector did not exit cleanly on SIGTERM: %v\n%s", err, out.String())
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("collector ignored SIGTERM\n%s", out.String())
		}
	})
	return &out
}

// TestCollectorWithoutDevices: this host has no RDMA devices; the collector
// says so once and keeps running.
func TestCollectorWithoutDevices(t *testing.T) {
	if _, err := os.Stat("/sys/class/infiniband"); err == nil {
		entries, _ := os.ReadDir("/sys/class/infiniband")
		if len(entries) > 0 {
			t.Skip("this host has RDMA devices; TestCollectorOnFixtureTree covers the reading path")
		}
	}
	url, _ := embeddedJS(t)
	out := startCollector(t, []string{bin, "collector", "--nats", url, "--interval", "200ms", "--node", "e2e-empty"})
	if err := testwait.Poll(10*time.Second, "a clear 'no RDMA devices' message", func() error {
		if !strings.Contains(out.String(), "no RDMA devices") {
			return errors.New("not logged")
		}
		return nil
	}); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	// Several more intervals: still running, said once. A sleep: it proves
	// the message is not repeated in that time.
	time.Sleep(time.Second)
	if n := strings.Count(out.String(), "keeps running"); n != 1 {
		t.Errorf("'no RDMA devices' said %d times, want once:\n%s", n, out.String())
	}
}

// TestCollectorOnFixtureTree runs the real binary, reading through rdmamap,
// on the mlx5/mlx4 capture bind-mounted over /sys/class in a private mount
// namespace, and checks its batches on the stream.
func TestCollectorOnFixtureTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("skipped: bind-mounting a fixture over /sys/class needs root; running as uid %d", os.Geteuid())
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skipf("skipped: unshare(1) is needed for a private mount namespace: %v", err)
	}
	spec, err := sysfstest.FromCapture("../fixtures/mlx-sysfs-capture.txt")
	if err != nil {
		t.Fatal(err)
	}
	tree := t.TempDir()
	if err := sysfstest.Build(tree, spec); err != nil {
		t.Fatal(err)
	}
	url, js := embeddedJS(t)
	script := `mount --bind "$1" /sys/class || exit 97
shift
exec "$@"`
	argv := []string{unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", tree,
		bin, "collector", "--nats", url, "--interval", "200ms", "--node", "e2e-fixture", "--ethtool=false"}
	out := startCollector(t, argv)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var batches []*schemas.CounterBatch
	err = testwait.Poll(20*time.Second, "three batches from the collector on the fixture tree", func() error {
		s, err := js.Stream(ctx, schemas.StreamCounters)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs < 3 {
			return fmt.Errorf("%d batches on the stream", info.State.Msgs)
		}
		batches = batches[:0]
		for seq := uint64(1); seq <= 3; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				return err
			}
			b, err := schemas.DecodeBatch(m.Data)
			if err != nil {
				t.Fatalf("batch %d: %v", seq, err)
			}
			batches = append(batches, b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	first := batches[0]
	if first.Node != "e2e-fixture" {
		t.Errorf("node %q", first.Node)
	}
	ports := map[string]schemas.PortSample{}
	for _, p := range first.Ports {
		ports[p.Device+"/"+string(rune('0'+p.Port))] = p
	}
	// The capture: mlx4_0 ports 1 and 2, mlx5_0 port 1, all ACTIVE.
	for _, want := range []string{"mlx4_0/1", "mlx4_0/2", "mlx5_0/1"} {
		if _, ok := ports[want]; !ok {
			t.Errorf("port %s missing from the first batch (have %v)\n%s", want, first.Ports, out.String())
		}
	}
	p := ports["mlx5_0/1"]
	c, ok := p.Counter(schemas.SourceCounters, "port_xmit_data")
	if !ok || c.Value != 2880761508848 || c.Flags&schemas.FlagFirst == 0 {
		t.Errorf("mlx5_0/1 port_xmit_data %+v, want the captured 2880761508848 as a baseline", c)
	}
	if p.Gauges["lifespan"] != 10 {
		t.Errorf("lifespan should be a gauge of 10, got %v", p.Gauges)
	}
	if p.LinkLayer != "InfiniBand" || p.State != "ACTIVE" || p.Rate != "25 Gb/sec (1X EDR)" {
		t.Errorf("mlx5_0/1 link %q state %q rate %q", p.LinkLayer, p.State, p.Rate)
	}
	// Later scrapes of unchanged files: deltas of zero, not baselines.
	c2, _ := batches[2].Ports[0].Counter(schemas.SourceCounters, "port_xmit_data")
	if c2.Flags != 0 || c2.Delta != 0 {
		t.Errorf("third scrape port_xmit_data %+v, want delta 0 with no flags", c2)
	}
}
