// Package natsutil starts the embedded NATS JetStream server and creates the
// streams rdmawatch uses; cmd/ and the tests share it.
package natsutil

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Embedded is a NATS JetStream server running inside this process.
type Embedded struct {
	Server *server.Server
}

// StartEmbedded starts a JetStream server on a random loopback port (port 0)
// or the given one, storing in dir.
func StartEmbedded(dir string, port int) (*Embedded, error) {
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: "rdmawatch-embedded",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
		// Replay publishes as fast as it can; the default 1 MiB payload and
		// 64 MiB pending limits are ample for one node's batch.
		MaxPayload: 8 << 20,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("embedded nats: not ready after 10s")
	}
	return &Embedded{Server: s}, nil
}

// URL is the client URL of the server.
func (e *Embedded) URL() string { return e.Server.ClientURL() }

// Shutdown stops the server and waits for it.
func (e *Embedded) Shutdown() {
	e.Server.Shutdown()
	e.Server.WaitForShutdown()
}

// ConnectOptions are the client settings shared by every subcommand.
type ConnectOptions struct {
	URL   string
	Creds string // path to a .creds file, optional
	Name  string
}

// Connect dials NATS with reconnects that never give up: a collector must
// outlive a broker restart.
func Connect(o ConnectOptions) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
	}
	if o.Creds != "" {
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", o.URL, err)
	}
	return nc, nil
}

// EnsureStreams creates or updates the rdmawatch streams.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, o schemas.StreamOptions) error {
	for _, cfg := range schemas.Streams(o) {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}
