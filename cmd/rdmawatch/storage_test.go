package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// `rdmawatch sink` is not ready from its start until it can write: while
// its database does not exist it waits (as it waits for the tables), and
// /readyz says why; once an admin migrated, it is ready.
func TestSinkReadyzWaitsForTheDatabase(t *testing.T) {
	serverDSN := chtest.DSN(t)
	nats := natstest.Start(t, &schemas.StreamOptions{Memory: true, Partitions: 2})
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := "test_sink_readyz_" + hex.EncodeToString(b[:])
	dsn := chtest.WithDatabase(t, serverDSN, db)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := chdb.Open(ctx, serverDSN)
		if err != nil {
			t.Errorf("drop database %s: %v", db, err)
			return
		}
		defer admin.Close()
		if err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			t.Errorf("drop database %s: %v", db, err)
		}
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	root := newRoot()
	root.SetArgs([]string{"sink", "--nats", nats.URL, "--clickhouse", dsn, "--listen", addr, "--log-level", "error"})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	go func() { done <- root.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("sink: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("sink did not stop 30s after its context ended")
		}
	}()

	readyz := func(code int, want ...string) {
		t.Helper()
		testwait.For(t, 60*time.Second, fmt.Sprintf("/readyz %d", code), func() error {
			select {
			case err := <-done:
				t.Fatalf("sink stopped: %v", err)
			default:
			}
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != code {
				return fmt.Errorf("/readyz %d %q, want %d", resp.StatusCode, body, code)
			}
			for _, w := range want {
				if !strings.Contains(string(body), w) {
					return fmt.Errorf("/readyz %q, want %q in it", body, w)
				}
			}
			return nil
		})
	}
	readyz(http.StatusServiceUnavailable, "clickhouse: not connected yet", db)

	mctx, mcancel := context.WithTimeout(context.Background(), time.Minute)
	defer mcancel()
	conn, _, err := ensureAndMigrate(mctx, dsn, clusterFlags{})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	readyz(http.StatusOK, "ready")
}
