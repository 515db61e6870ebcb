// Package natstest gives tests a real embedded NATS JetStream server, never a
// fake broker, cleaned up when the test ends.
package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Server is a running embedded server and one client connection to it.
type Server struct {
	URL  string
	Conn *nats.Conn
	JS   jetstream.JetStream
}

// Start runs an embedded JetStream server storing in a temporary folder.
// With streams non-nil, the rdmawatch streams are created with those options.
func Start(t testing.TB, streams *schemas.StreamOptions) *Server {
	t.Helper()
	srv, err := natsutil.StartEmbedded(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if streams != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := natsutil.EnsureStreams(ctx, js, *streams); err != nil {
			t.Fatal(err)
		}
	}
	return &Server{URL: srv.URL(), Conn: nc, JS: js}
}
