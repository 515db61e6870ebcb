// Package natsembed runs a NATS JetStream server inside the process, for
// the jobs that put the whole pipeline in one process (replay, run), the
// benchmarks and the tests. It is its own package so that the fleet build
// of rdmawatch (the roles and the operators' commands), which never runs a
// server, does not link nats-server.
package natsembed

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is a NATS JetStream server running inside this process.
type Server struct {
	Server *server.Server
}

// Start starts a JetStream server on a random loopback port (port 0)
// or the given one, storing in dir.
func Start(dir string, port int) (*Server, error) {
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
	return &Server{Server: s}, nil
}

// URL is the client URL of the server.
func (e *Server) URL() string { return e.Server.ClientURL() }

// Shutdown stops the server and waits for it.
func (e *Server) Shutdown() {
	e.Server.Shutdown()
	e.Server.WaitForShutdown()
}
