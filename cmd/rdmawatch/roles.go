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
	if _, err := s.Serve(cmd.Context(), g.listen); err != nil {
		return nil, err
	}
	return s, nil
}

// connectJS dials NATS, waiting with backoff while the server is not up
// yet, and checks (never changes) the streams the role needs: a missing or
// incompatible stream stops the role with the stream and field named.
func connectJS(cmd *cobra.Command, g *global, name string, streams ...string) (*nats.Conn, jetstream.JetStream, error) {
	nc, js, err := dialJS(cmd.Context(), g, name)
	if err != nil {
		return nil, nil, err
	}
	if err := natsutil.CheckStreams(cmd.Context(), js, streams...); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// dialJS dials NATS as name, waiting with backoff while the server is not
// up yet, and opens JetStream; the caller closes the connection.
func dialJS(ctx context.Context, g *global, name string) (*nats.Conn, jetstream.JetStream, error) {
	if err := checkURLs("--nats", g.natsURL, true, natsSchemes...); err != nil {
		return nil, nil, err
	}
	nc, err := natsutil.ConnectWait(ctx, g.natsOptions(name))
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
