package main

// What every long-running role shares: telemetry, the NATS connection and
// the reason it stopped.

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/telemetry"
)

// serveTelemetry starts a role's /metrics, /healthz and /readyz on --listen
// before the role connects anywhere: a role waiting for NATS or ClickHouse
// is alive and says why it is not ready.
func serveTelemetry(cmd *cobra.Command, g *global, role string) (*telemetry.Server, error) {
	s := telemetry.New(role, version, g.log)
	if _, err := s.ServeWeb(cmd.Context(), g.listen, g.webConfig); err != nil {
		return nil, err
	}
	return s, nil
}

// connectJS dials NATS, waiting with backoff while the server is not up
// yet, and checks (never changes) the streams the role needs: a missing or
// incompatible stream stops the role with the stream and field named.
func connectJS(cmd *cobra.Command, g *global, name string, streams ...string) (*nats.Conn, jetstream.JetStream, error) {
	nc, js, err := dial(cmd.Context(), g, name, roleInbox(cmd))
	if err != nil {
		return nil, nil, err
	}
	if err := natsutil.CheckStreams(cmd.Context(), js, streams...); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// dialJS dials NATS as name for an admin command (streams apply|check),
// with the admin's inbox prefix, waiting with backoff while the server is
// not up yet, and opens JetStream; the caller closes the connection.
func dialJS(ctx context.Context, g *global, name string) (*nats.Conn, jetstream.JetStream, error) {
	return dial(ctx, g, name, natsutil.InboxPrefix(natsutil.RoleAdmin, ""))
}

// dial is dialJS with the replies arriving under inbox.
func dial(ctx context.Context, g *global, name, inbox string) (*nats.Conn, jetstream.JetStream, error) {
	if err := checkURLs("--nats", g.natsURL, true, natsSchemes...); err != nil {
		return nil, nil, err
	}
	o := g.natsOptions(name)
	o.InboxPrefix = inbox
	nc, err := natsutil.ConnectWait(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// roleInbox is the inbox prefix of the role cmd runs
// (natsutil.InboxPrefix): each user of deploy/nats/rdmawatch-auth.conf may
// receive on its own role's prefix only, a collector's user on its node's.
// A command not named here gets a prefix of its own name, which no shipped
// user may read: it fails at its first request until it is given one.
func roleInbox(cmd *cobra.Command) string {
	flag := func(name string) string {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	switch name := cmd.Name(); name {
	case "collector":
		if flag("source") == "sim" {
			// One process publishing as many nodes: the user rdmawatch-sim.
			return natsutil.InboxPrefix(natsutil.RoleSim, "")
		}
		return natsutil.InboxPrefix(natsutil.RoleCollector, flag("node"))
	case "processor":
		return natsutil.InboxPrefix(natsutil.RoleProcessor, "")
	case "sink":
		return natsutil.InboxPrefix(natsutil.RoleSink, "")
	case "alert":
		return natsutil.InboxPrefix(natsutil.RoleAlert, "")
	case "tail":
		return natsutil.InboxPrefix(natsutil.RoleReader, "")
	default:
		return natsutil.InboxPrefix(name, "")
	}
}

// deprecatePartitions keeps --partitions accepted on the roles, which no
// longer use it: the partition count belongs to the counters stream.
func deprecatePartitions(cmd *cobra.Command) {
	var ignored int
	cmd.Flags().IntVar(&ignored, "partitions", 0, "ignored: the counters stream's transform sets the partition count (rdmawatch streams apply --partitions)")
	_ = cmd.Flags().MarkDeprecated("partitions", "the partition count is the counters stream's; set it with `rdmawatch streams apply --partitions N`")
}

// stopReason says why a role's main loop ended, for its last log line.
func stopReason(cmd *cobra.Command, err error) string {
	switch {
	case cmd.Context().Err() != nil:
		return "signal: drained and stopped"
	case err != nil:
		return "error"
	default:
		return "done"
	}
}
