// Package natstest gives tests a real embedded NATS JetStream server, never a
// fake broker, cleaned up when the test ends.
package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsembed"
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
	srv, err := natsembed.Start(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, js := Connect(t, srv.URL())
	if streams != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := natsutil.EnsureStreams(ctx, js, *streams); err != nil {
			t.Fatal(err)
		}
	}
	return &Server{URL: srv.URL(), Conn: nc, JS: js}
}

// Connect opens a client connection with opts and its JetStream context,
// closed when the test ends.
func Connect(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return nc, JetStream(t, nc)
}

// JetStream closes nc when the test ends and returns its JetStream context.
func JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
