package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/deadletter"
	"github.com/rdmawatch/rdmawatch/internal/redact"
	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// openSink connects to ClickHouse, applies migrations and returns the sink
// and a function that closes its connection.
// A topology, when given, is loaded into the topology tables so the per-leaf
// queries know the fabric.
func openSink(ctx context.Context, js jetstream.JetStream, dsn string, cfg sink.Config, topo *schemas.Topology, log *slog.Logger) (*sink.Sink, func(), error) {
	return openSinkCluster(ctx, js, dsn, clusterFlags{}, cfg, topo, log)
}

// clusterFlags select cluster mode (internal/chdb/README.md): the
// migrations run ON CLUSTER, and the user-facing tables the sink writes are
// Distributed tables over Replicated *_local ones.
type clusterFlags struct {
	name, zkPath string
}

func (c *clusterFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.name, "cluster", "", "ClickHouse cluster (remote_servers) for cluster mode: DDL ON CLUSTER, Replicated *_local tables under Distributed ones")
	// The variable's first name, kept for the deployments that set it.
	envAlias(cmd.Flags(), "cluster", "RDMAWATCH_CLICKHOUSE_CLUSTER")
	cmd.Flags().StringVar(&c.zkPath, "cluster-zookeeper-path", chdb.DefaultZooKeeperPath, "cluster mode: ZooKeeper path of the replicated tables, the table name appended")
}

// validate checks the cluster settings: cluster mode needs a ZooKeeper path.
func (c *clusterFlags) validate() error {
	if c.name != "" && c.zkPath == "" {
		return fmt.Errorf("--cluster-zookeeper-path %q: cluster mode (--cluster %s) needs a path, e.g. %s", c.zkPath, c.name, chdb.DefaultZooKeeperPath)
	}
	return nil
}

// ensureAndMigrate creates the DSN's database (on every node in cluster
// mode), connects and applies the migrations.
func ensureAndMigrate(ctx context.Context, dsn string, c clusterFlags, opts ...chdb.Option) (driver.Conn, []string, error) {
	// A server that has just started can drop the first connection (seen
	// once in the cluster test: EOF on CREATE DATABASE ... ON CLUSTER); the
	// statement is idempotent, so a connection failure is tried again for
	// a while. What the server answers with an exception is not.
	_, ensure := retry.Do(ctx, slog.Default(), "clickhouse database", retry.Policy{MaxElapsed: 30 * time.Second}, func(ctx context.Context) (struct{}, error) {
		var err error
		if c.name != "" {
			err = chdb.EnsureDatabaseOnCluster(ctx, dsn, c.name, opts...)
		} else {
			err = chdb.EnsureDatabase(ctx, dsn, opts...)
		}
		var exc *ch.Exception
		if errors.As(err, &exc) || errors.Is(err, chdb.ErrInvalidOption) {
			err = retry.Permanent(err)
		}
		return struct{}{}, err
	})
	if ensure != nil {
		return nil, nil, ensure
	}
	conn, err := chdb.Open(ctx, dsn, opts...)
	if err != nil {
		return nil, nil, err
	}
	var applied []string
	if c.name == "" {
		applied, err = chdb.Migrate(ctx, conn)
	} else {
		applied, err = chdb.MigrateCluster(ctx, conn, chdb.Cluster{Name: c.name, ZooKeeperPath: c.zkPath})
	}
	return conn, applied, err
}

func openSinkCluster(ctx context.Context, js jetstream.JetStream, dsn string, cluster clusterFlags, cfg sink.Config, topo *schemas.Topology, log *slog.Logger, opts ...chdb.Option) (*sink.Sink, func(), error) {
	conn, applied, err := ensureAndMigrate(ctx, dsn, cluster, opts...)
	if err != nil && conn == nil {
		return nil, nil, err
	}
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	for _, m := range applied {
		log.Info("clickhouse migration applied", "migration", m)
	}
	if topo != nil {
		if _, _, err := chdb.LoadTopology(ctx, conn, topo); err != nil {
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

// sinkFlags are the sink command's settings.
type sinkFlags struct {
	batchRows  int
	blockRows  int
	maxPending int
	flush      time.Duration
	rollup     sink.Config // RollupEvery, RollupDelay, RollupLookback
	cluster    clusterFlags
	maxBehind  time.Duration
}

func (o *sinkFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&o.batchRows, "batch-rows", sink.DefaultBatchRows, "rows per flush at most (fewer, larger INSERTs cost ClickHouse far less per row than many small ones)")
	f.IntVar(&o.blockRows, "block-rows", 0, "rows per INSERT block at most: a flush larger than this goes in several (0: twice --batch-rows, so a flush goes in one)")
	f.IntVar(&o.maxPending, "max-ack-pending", sink.DefaultMaxAckPending, "messages each consumer holds unacknowledged at most; a flush takes at most half, the other half is pulled meanwhile (the rows held are bounded by two flushes of batch-rows, whatever the message size)")
	f.DurationVar(&o.flush, "flush-interval", sink.DefaultFlushInterval, "longest time rows wait before an INSERT")
	f.DurationVar(&o.rollup.RollupEvery, "rollup-every", sink.DefaultRollupEvery, "how often the sink rolls the minutes, hours and days it stored samples of into rollup_minute, rollup_hour and rollup_day (negative: this sink does not roll; `rdmawatch rollup` rolls by hand)")
	f.DurationVar(&o.rollup.RollupDelay, "rollup-delay", sink.DefaultRollupDelay, "how far data time (the newest sample stored) must be past a minute's end before it is rolled; rows that come later roll it again")
	f.DurationVar(&o.rollup.RollupLookback, "rollup-lookback", sink.DefaultRollupLookback, "at a start, roll again the minutes from the newest rolled one minus this (the sink before may have died with them pending)")
	f.DurationVar(&o.maxBehind, "max-behind", schemas.DefaultMaxBehind, "dead-letter a counters message with a sample dated more than this before JetStream stored it (port_samples has a partition per day; 0: no bound, e.g. for a simulated scenario dated in the past)")
	o.cluster.register(cmd)
}

// config is the sink.Config of the flags, without the DSN and the hooks.
func (o *sinkFlags) config() sink.Config {
	return sink.Config{BatchRows: o.batchRows, BlockRows: o.blockRows, MaxAckPending: o.maxPending, FlushInterval: o.flush,
		RollupEvery: o.rollup.RollupEvery, RollupDelay: o.rollup.RollupDelay, RollupLookback: o.rollup.RollupLookback,
		MaxBehind: o.maxBehind}
}

// validate checks the sink's settings by flag, then as sink.New will (the
// rules between them: the rollup lookback against the delay).
func (o *sinkFlags) validate() error {
	for _, c := range []struct {
		flag string
		v    int
	}{{"batch-rows", o.batchRows}, {"block-rows", o.blockRows}, {"max-ack-pending", o.maxPending}} {
		if c.v < 0 {
			return fmt.Errorf("--%s %d: want 0 (the default) or more", c.flag, c.v)
		}
	}
	for _, c := range []struct {
		flag string
		v    time.Duration
	}{{"flush-interval", o.flush}, {"rollup-delay", o.rollup.RollupDelay}, {"rollup-lookback", o.rollup.RollupLookback}, {"max-behind", o.maxBehind}} {
		if c.v < 0 {
			return fmt.Errorf("--%s %s: want 0 or more", c.flag, c.v)
		}
	}
	if err := o.config().Validate(); err != nil {
		return fmt.Errorf("sink settings (--rollup-*, --batch-rows, ...): %w", err)
	}
	return o.cluster.validate()
}

func newSinkCmd(g *global) *cobra.Command {
	var o sinkFlags
	cmd := &cobra.Command{
		Use:   "sink",
		Short: "Write counter samples, events and inventory from JetStream to ClickHouse",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSink(cmd, g, o)
		},
	}
	o.register(cmd)
	g.validates(cmd, &o)
	return cmd
}

// runSink runs the role on settings validateCommand checked (a ClickHouse
// DSN among them).
func runSink(cmd *cobra.Command, g *global, o sinkFlags) error {
	ctx := cmd.Context()
	tel, err := serveTelemetry(cmd, g, "sink")
	if err != nil {
		return err
	}
	nc, js, err := connectJS(cmd, g, "rdmawatch-sink", schemas.StreamCounters, schemas.StreamEvents, schemas.StreamInventory, schemas.StreamDeadLetter)
	if err != nil {
		return err
	}
	defer nc.Close()
	tel.WatchNATS(nc)
	// Not ready from the start until the sink writes: the check answers
	// why while the connection is being made, then the sink's own Ready.
	ready := &sinkReadiness{}
	ready.waiting(errors.New("not connected yet"))
	tel.AddCheck("clickhouse", func(context.Context) error { return ready.err() })
	conn, err := openSinkClickHouse(ctx, g, ready)
	if err != nil {
		return err
	}
	defer conn.Close()
	cfg := o.config()
	cfg.DSN, cfg.ObserveInsert = g.clickhouse, sinkInsertObserver(tel.Registry())
	s, err := sink.New(js, conn, cfg, g.log)
	if err != nil {
		return err
	}
	registerSinkMetrics(tel.Registry(), s.Stats)
	registerSinkRollupMetrics(tel.Registry(), s.RollupStats)
	// The dead-letter stream's depth, read at every scrape: the sink
	// serves it because it runs wherever storage runs (one exporter of it
	// per deployment, not one per collector).
	if dl, err := deadletter.Open(ctx, js); err != nil {
		g.log.Warn("dead-letter depth not served", "err", err)
	} else {
		tel.Registry().MustRegister(deadletter.DepthCollector(dl))
	}
	ready.connected(s)
	g.log.Info("sink started", "nats", natsURLForLog(g), "clickhouse", redact.String(g.clickhouse))
	err = s.Run(ctx)
	g.log.Info("sink stopped", "reason", stopReason(cmd, err))
	return err
}

// openSinkClickHouse connects the sink to ClickHouse. No migrations here:
// the sink needs only SELECT and INSERT; an admin runs `rdmawatch migrate`.
// A ClickHouse that is not up yet is waited for, and so is a database not
// created yet (as the sink waits for the tables); one that answers with
// another error (password, permissions) is not. ready says why meanwhile.
func openSinkClickHouse(ctx context.Context, g *global, ready *sinkReadiness) (driver.Conn, error) {
	return retry.Do(ctx, g.log, "clickhouse", retry.Policy{}, func(ctx context.Context) (driver.Conn, error) {
		conn, err := chdb.Open(ctx, g.clickhouse, g.chOptions()...)
		var exc *ch.Exception
		switch {
		case errors.As(err, &exc) && exc.Code == codeUnknownDatabase:
			err = fmt.Errorf("%w (waiting for it: an admin runs `rdmawatch migrate`)", err)
		case errors.As(err, &exc) || errors.Is(err, chdb.ErrInvalidOption):
			err = retry.Permanent(err)
		}
		if err != nil {
			ready.waiting(fmt.Errorf("not connected yet: %w", err))
		}
		return conn, err
	})
}

// codeUnknownDatabase is ClickHouse's UNKNOWN_DATABASE: the sink's database
// is not created yet (`rdmawatch migrate` creates it).
const codeUnknownDatabase = 81

// sinkReadiness is the sink command's ClickHouse readiness: why it is not
// connected yet, then the sink's Ready.
type sinkReadiness struct {
	mu     sync.Mutex
	reason error
	s      *sink.Sink
}

func (r *sinkReadiness) waiting(reason error) {
	r.mu.Lock()
	r.reason = reason
	r.mu.Unlock()
}

func (r *sinkReadiness) connected(s *sink.Sink) {
	r.mu.Lock()
	r.s = s
	r.mu.Unlock()
}

func (r *sinkReadiness) err() error {
	r.mu.Lock()
	s, reason := r.s, r.reason
	r.mu.Unlock()
	if s != nil {
		return s.Ready()
	}
	return reason
}

func newMigrateCmd(g *global) *cobra.Command {
	var (
		topologyPath string
		cluster      clusterFlags
	)
	cmd := &cobra.Command{
		Use:   "migrate [--topology FILE] [--cluster NAME]",
		Short: "Create or upgrade the ClickHouse tables (idempotent); load a topology for the per-leaf queries",
		Long: `migrate applies, in order, every migration the database has not seen
(schemas/ddl/migrations; the variant the server's version supports)
and prints each one it applied with the server's version. With --topology it
then loads the fabric topology (format v1) into topology_ports and
topology_links, replacing what was loaded for that fabric, so the
leaf_capacity query groups ports by leaf.

With --cluster NAME (a cluster of the servers' remote_servers, with
ZooKeeper/Keeper for distributed DDL and the {shard} and {replica} macros)
every statement runs ON CLUSTER NAME: the data lives in Replicated
<table>_local tables on each node and the user-facing names (port_samples,
events, ...) are Distributed tables over them, so the sink and the queries
need no other setting. --topology then replaces the fabric's partition on
every shard. See internal/chdb/README.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.requireClickHouse(); err != nil {
				return err
			}
			var topo *schemas.Topology
			if topologyPath != "" {
				t, err := schemas.LoadTopology(topologyPath)
				if err != nil {
					return err
				}
				topo = t
			}
			conn, applied, err := ensureAndMigrate(cmd.Context(), g.clickhouse, cluster, g.chOptions()...)
			if conn == nil {
				return err
			}
			defer conn.Close()
			out := cmd.OutOrStdout()
			server, verr := chdb.ServerVersion(cmd.Context(), conn)
			if verr != nil && err == nil {
				return verr
			}
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
			if cluster.name != "" {
				fmt.Fprintf(out, "cluster mode: ON CLUSTER %s, Distributed tables over *_local\n", cluster.name)
			}
			if topo != nil {
				ports, links, err := chdb.LoadTopology(cmd.Context(), conn, topo)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "loaded topology %q: %d host ports, %d links\n", topo.Fabric, ports, links)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&topologyPath, "topology", "", "fabric topology, format v1 (JSON), to load for the per-leaf queries")
	cluster.register(cmd)
	g.validates(cmd, &cluster)
	return cmd
}
