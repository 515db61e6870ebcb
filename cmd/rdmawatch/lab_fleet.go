//go:build fleet

package main

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/collector"
)

// The fleet build: the roles and the operators' commands, without the lab
// (see labCommands in lab.go).
func labCommands(*global) []*cobra.Command { return nil }

// errNoSim is what `collector --source sim` says in the fleet build.
var errNoSim = errors.New("--source sim: this is the fleet build of rdmawatch, without the simulator; use the full build (go build ./cmd/rdmawatch)")

type simFlags struct{}

type simFleet struct{}

func (*simFlags) register(*cobra.Command) {}

func (*simFlags) build(func(string) bool) (*simFleet, error) { return nil, errNoSim }

func runSimCollector(context.Context, *global, *nats.Conn, jetstream.JetStream, *simFleet, collector.PublisherConfig, collector.Config) error {
	return errNoSim
}
