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
	// changed reports whether a flag was given (on the command line, in
	// the environment or the file): the simulated fleet's own speed and
	// seed hold otherwise.
	changed func(string) bool
}

// validate checks the collector's settings; a simulated fleet is built
// once to check it (its scenario, its faults), which reads nothing.
func (cf *collectorFlags) validate() error {
	switch cf.source {
	case "sysfs", "sim":
	default:
		return fmt.Errorf("--source %q: want sysfs or sim", cf.source)
	}
	switch {
	case cf.node == "":
		return fmt.Errorf("--node %q: want the host's name", cf.node)
	case cf.interval < 100*time.Millisecond:
		return fmt.Errorf("--interval %s: must be at least 100ms", cf.interval)
	case cf.cfgEvery < 0:
		return fmt.Errorf("--config-interval %s: want 0 (off) or more", cf.cfgEvery)
	case cf.maxInFlight < 1:
		return fmt.Errorf("--max-in-flight %d: want 1 or more", cf.maxInFlight)
	case cf.spoolMax < 1:
		return fmt.Errorf("--spool-max-bytes %d: want 1 or more", cf.spoolMax)
	}
	if cf.source == "sim" {
		if _, err := cf.sf.build(cf.changed); err != nil {
			return err
		}
	}
	return nil
}

func newCollectorCmd(g *global) *cobra.Command {
	var cf collectorFlags
	cmd := &cobra.Command{
		Use:   "collector",
		Short: "Read this host's RDMA counters (sysfs via rdmamap, ethtool) and publish deltas to JetStream",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// validate checked the settings before this runs.
			var fleet *simFleet
			if cf.source == "sim" {
				var err error
				if fleet, err = cf.sf.build(cf.changed); err != nil {
					return err
				}
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
					collector.Config{OnScrape: registerCollectorMetrics(tel.Registry(), cf.source)})
			} else {
				err = cf.runHost(cmd, g, js, registerCollectorMetrics(tel.Registry(), cf.source), tel.AddCheck)
			}
			g.log.Info("collector stopped", "reason", stopReason(cmd, err))
			return err
		},
	}
	f := cmd.Flags()
	cf.changed = f.Changed
	g.validates(cmd, &cf)
	f.StringVar(&cf.node, "node", hostname(), "node name published with every batch")
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
