package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/schemas"
	chschema "github.com/rdmawatch/rdmawatch/schemas/clickhouse"
	"github.com/rdmawatch/rdmawatch/sink"
)

// openSink connects to ClickHouse, applies migrations and returns the sink
// and a function that closes its connection.
// A topology, when given, is loaded into the topology tables so the per-leaf
// queries know the fabric.
func openSink(ctx context.Context, js jetstream.JetStream, dsn string, cfg sink.Config, topo *schemas.Topology, log *slog.Logger) (*sink.Sink, func(), error) {
	if err := chschema.EnsureDatabase(ctx, dsn); err != nil {
		return nil, nil, err
	}
	conn, err := chschema.Open(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	applied, err := chschema.Migrate(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	for _, m := range applied {
		log.Info("clickhouse migration applied", "migration", m)
	}
	if topo != nil {
		if _, _, err := chschema.LoadTopology(ctx, conn, topo); err != nil {
			conn.Close()
			return nil, nil, err
		}
	}
	cfg.DSN = dsn
	s, err := sink.New(js, conn, cfg, log)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return s, func() { conn.Close() }, nil
}

func newSinkCmd(g *global) *cobra.Command {
	var (
		batchRows int
		flush     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "sink",
		Short: "Write counter samples, events and inventory from JetStream to ClickHouse",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.clickhouse == "" {
				return fmt.Errorf("no ClickHouse DSN: set --clickhouse or RDMAWATCH_CLICKHOUSE")
			}
			ctx := cmd.Context()
			js, closeNC, err := connectJS(cmd, g, "rdmawatch-sink", schemas.DefaultPartitions)
			if err != nil {
				return err
			}
			defer closeNC()
			s, closeSink, err := openSink(ctx, js, g.clickhouse, sink.Config{BatchRows: batchRows, FlushInterval: flush}, nil, g.log)
			if err != nil {
				return err
			}
			defer closeSink()
			g.log.Info("sink started")
			return s.Run(ctx)
		},
	}
	cmd.Flags().IntVar(&batchRows, "batch-rows", 10000, "rows per INSERT at most")
	cmd.Flags().DurationVar(&flush, "flush-interval", time.Second, "longest time rows wait before an INSERT")
	return cmd
}

func newMigrateCmd(g *global) *cobra.Command {
	var topologyPath string
	cmd := &cobra.Command{
		Use:   "migrate [--topology FILE]",
		Short: "Create or upgrade the ClickHouse tables (idempotent); load a topology for the per-leaf queries",
		Long: `migrate applies, in order, every migration the database has not seen
(schemas/clickhouse/migrations; the variant the server's version supports)
and prints each one it applied with the server's version. With --topology it
then loads the fabric topology (format v1) into topology_ports and
topology_links, replacing what was loaded for that fabric, so the
leaf_capacity query groups ports by leaf.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.clickhouse == "" {
				return fmt.Errorf("no ClickHouse DSN: set --clickhouse or RDMAWATCH_CLICKHOUSE")
			}
			var topo *schemas.Topology
			if topologyPath != "" {
				t, err := schemas.LoadTopology(topologyPath)
				if err != nil {
					return err
				}
				topo = t
			}
			if err := chschema.EnsureDatabase(cmd.Context(), g.clickhouse); err != nil {
				return err
			}
			conn, err := chschema.Open(cmd.Context(), g.clickhouse)
			if err != nil {
				return err
			}
			defer conn.Close()
			out := cmd.OutOrStdout()
			server, err := chschema.ServerVersion(cmd.Context(), conn)
			if err != nil {
				return err
			}
			applied, err := chschema.Migrate(cmd.Context(), conn)
			for _, m := range applied {
				fmt.Fprintln(out, "applied", m)
			}
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintf(out, "schema up to date on ClickHouse %s: nothing applied\n", server)
			} else {
				fmt.Fprintf(out, "applied %d migrations on ClickHouse %s\n", len(applied), server)
			}
			if topo != nil {
				ports, links, err := chschema.LoadTopology(cmd.Context(), conn, topo)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "loaded topology %q: %d host ports, %d links\n", topo.Fabric, ports, links)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&topologyPath, "topology", "", "fabric topology, format v1 (JSON), to load for the per-leaf queries")
	return cmd
}
