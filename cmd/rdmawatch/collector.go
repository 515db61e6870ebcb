package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/telemetry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// collectorFlags are the collector command's settings.
type collectorFlags struct {
	node        string
	interval    time.Duration
	ethtool     bool
	cfgEvery    time.Duration
	maxInFlight int
	source      string
	sf          simFlags
	spoolDir    string
	spoolMax    int64
}

func newCollectorCmd(g *global) *cobra.Command {
	var cf collectorFlags
	cmd := &cobra.Command{
		Use:   "collector",
		Short: "Read this host's RDMA counters (sysfs via rdmamap, ethtool) and publish deltas to JetStream",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var fleet *simFleet
			switch cf.source {
			case "sysfs":
			case "sim":
				var err error
				if fleet, err = cf.sf.build(cmd.Flags().Changed); err != nil {
					return err
				}
			default:
				return fmt.Errorf("--source %q: want sysfs or sim", cf.source)
			}
			if cf.interval < 100*time.Millisecond {
				return fmt.Errorf("--interval %s: must be at least 100ms", cf.interval)
			}
			tel, err := serveTelemetry(cmd, g, "collector")
			if err != nil {
				return err
			}
			nc, js, err := connectJS(cmd, g, "rdmawatch-collector/"+cf.node, schemas.StreamCounters, schemas.StreamInventory)
			if err != nil {
				return err
			}
			defer nc.Close()
			tel.WatchNATS(nc)
			if fleet != nil {
				err = runSimCollector(cmd.Context(), g, nc, js, fleet,
					collector.PublisherConfig{MaxInFlight: cf.maxInFlight, Log: g.log, SpoolDir: cf.spoolDir, SpoolMaxBytes: cf.spoolMax},
					collector.Config{OnScrape: tel.RegisterCollector(cf.source)})
			} else {
				err = cf.runHost(cmd, g, js, tel.RegisterCollector(cf.source), tel.AddCheck)
			}
			g.log.Info("collector stopped", "reason", stopReason(cmd, err))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cf.node, "node", envOr("RDMAWATCH_NODE", hostname()), "node name published with every batch (env RDMAWATCH_NODE)")
	f.DurationVar(&cf.interval, "interval", 10*time.Second, "scrape interval")
	f.BoolVar(&cf.ethtool, "ethtool", true, "read each port's netdev ethtool statistics (PFC, PHY/FEC)")
	f.DurationVar(&cf.cfgEvery, "config-interval", collector.DefaultConfigInterval, "read each RoCE port's configuration (MTU, PFC, ECN, trust) this often, in data time; 0 turns it off")
	f.IntVar(&cf.maxInFlight, "max-in-flight", 64, "unacknowledged batches allowed before the collector waits")
	deprecatePartitions(cmd)
	f.StringVar(&cf.source, "source", "sysfs", "what to read: sysfs (this host) or sim (a simulated fleet, every node publishing as its own collector; see --sim-*)")
	f.StringVar(&cf.spoolDir, "spool-dir", "", "keep batches NATS has not acknowledged when the collector stops here, and send them at the next start (empty: none, they are counted as lost)")
	f.Int64Var(&cf.spoolMax, "spool-max-bytes", 256<<20, "bound of --spool-dir; the oldest batches are dropped (and counted) past it")
	cf.sf.register(cmd)
	return cmd
}

// runHost collects this host until the command's context ends. addCheck
// adds the publisher's readiness: not ready while the stream's store
// refuses what it publishes (a full JetStream disk).
func (cf *collectorFlags) runHost(cmd *cobra.Command, g *global, js jetstream.JetStream, onScrape func(collector.Scrape), addCheck func(string, telemetry.Check)) error {
	ctx := cmd.Context()
	src, err := collector.NewHostSource(cf.node, collector.WithEthtool(cf.ethtool), collector.WithHostLogger(g.log), collector.WithConfigInterval(cf.cfgEvery))
	if err != nil {
		return err
	}
	defer src.Close()
	boot := randomBootID()
	eng := collector.NewEngine(func(string, int) string { return boot })
	pub, err := collector.NewPublisherConfig(js, collector.PublisherConfig{MaxInFlight: cf.maxInFlight, Log: g.log, SpoolDir: cf.spoolDir, SpoolMaxBytes: cf.spoolMax})
	if err != nil {
		return err
	}
	addCheck("jetstream", func(context.Context) error { return pub.StoreError() })
	if err := pub.ResendSpool(ctx); err != nil {
		return err
	}
	g.log.Info("collector started", "node", cf.node, "interval", cf.interval, "boot_id", boot, "nats", natsURLForLog(g))
	err = collector.New(src, eng, pub, collector.Config{Interval: cf.interval, Log: g.log, OnScrape: onScrape}).Run(ctx)
	st := eng.Stats()
	d := pub.Dropped()
	g.log.Info("collector counts", "samples", st.Samples, "published", pub.Published(), "resets", st.Resets, "glitches", st.Glitches, "dropped_batches", d.Messages, "dropped_samples", d.Samples)
	return err
}

func randomBootID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Sprintf("t%d", time.Now().UnixNano())
	}
	return hex.EncodeToString(b[:])
}
