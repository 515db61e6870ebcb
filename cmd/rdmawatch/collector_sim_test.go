//go:build !fleet

package main

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/natsembed"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// freePort is a loopback port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// spooledIDs are the Nats-Msg-Id of the messages in a publisher's spool
// (line 3 of each file, collector/spool.go).
func spooledIDs(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.msg"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range files {
		fh, err := os.Open(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // sent and acknowledged meanwhile
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for i := 0; i < 3 && sc.Scan(); i++ {
			if i == 2 {
				ids = append(ids, sc.Text())
			}
		}
		fh.Close()
	}
	return ids
}

// TestSimCollectorSpools: `collector --source sim --spool-dir` stopped
// while NATS is down keeps the unacknowledged batches in the spool (it
// used to build its publisher without one: they were lost, in the log
// only), and the next start sends them before anything new, each stored
// once.
func TestSimCollectorSpools(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and starts a NATS server")
	}
	port := freePort(t)
	store := t.TempDir()
	spool := filepath.Join(t.TempDir(), "spool")
	var srv *natsembed.Server
	startServer := func() {
		t.Helper()
		var err error
		if srv, err = natsembed.Start(store, port); err != nil {
			t.Fatal(err)
		}
	}
	startServer()
	t.Cleanup(func() {
		if srv != nil {
			srv.Shutdown()
		}
	})
	log := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	g := &global{log: log}
	connect := func() (*nats.Conn, jetstream.JetStream) {
		t.Helper()
		nc, err := natsutil.Connect(natsutil.ConnectOptions{URL: srv.URL(), Name: t.Name(), Log: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := natsutil.EnsureStreams(ctx, js, schemas.StreamOptions{}); err != nil {
			t.Fatal(err)
		}
		return nc, js
	}
	sf := simFlags{nodes: 4, interval: 10 * time.Second, duration: 24 * time.Hour, speed: 200}
	fleet, err := sf.build(func(name string) bool { return name == "speed" })
	if err != nil {
		t.Fatal(err)
	}
	pc := collector.PublisherConfig{MaxInFlight: 8, SpoolDir: spool, AckWarnAfter: 200 * time.Millisecond}
	cc := collector.Config{FlushTimeout: time.Second}
	run := func(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) chan error {
		// A test that fails midway stops the collector before its
		// connection closes and before the test's log goes away.
		rctx, cancel := context.WithCancel(ctx)
		exited := make(chan struct{})
		t.Cleanup(func() { cancel(); <-exited })
		done := make(chan error, 1)
		go func() {
			defer close(exited)
			done <- runSimCollector(rctx, g, nc, js, fleet, pc, cc)
		}()
		return done
	}
	counters := func(js jetstream.JetStream) map[string]int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, schemas.StreamCounters)
		if err != nil {
			t.Fatal(err)
		}
		st := s.CachedInfo().State
		ids := map[string]int{}
		for seq := st.FirstSeq; st.Msgs > 0 && seq <= st.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				t.Fatal(err)
			}
			ids[m.Header.Get(jetstream.MsgIDHeader)]++
		}
		return ids
	}

	// First run: publishes, then NATS goes away, then the collector stops.
	nc, js := connect()
	ctx, cancel := context.WithCancel(context.Background())
	done := run(ctx, nc, js)
	testwait.Until(t, 20*time.Second, "batches on the stream", func() bool { return len(counters(js)) >= 8 })
	srv.Shutdown()
	srv = nil
	// Batches pile up unacknowledged. A sleep: the outage itself must last
	// while the collector goes on making batches.
	time.Sleep(time.Second)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the sim collector stopped with %v, want nil: what it could not send is spooled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the sim collector did not stop")
	}
	nc.Close()
	spooled := spooledIDs(t, spool)
	if len(spooled) == 0 {
		t.Fatalf("nothing spooled in %s: the sim collector's batches sent while NATS was down are lost", spool)
	}
	t.Logf("%d batches spooled, e.g. %s", len(spooled), spooled[0])

	// Second run: the spool goes out first, each batch once.
	startServer()
	nc, js = connect()
	ctx, cancel = context.WithCancel(context.Background())
	done = run(ctx, nc, js)
	testwait.Until(t, 30*time.Second, "the spool emptied", func() bool { return len(spooledIDs(t, spool)) == 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("second run: %v", err)
	}
	stored := counters(js)
	for _, id := range spooled {
		if n := stored[id]; n != 1 {
			t.Errorf("spooled batch %s stored %d times, want once", id, n)
		}
	}
	for id, n := range stored {
		if n != 1 || !strings.Contains(id, "/") {
			t.Errorf("Nats-Msg-Id %q stored %d times", id, n)
		}
	}
}

// testLogWriter sends log lines to the test's log.
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
