package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
)

// retentionFlags are the settings of retention.
type retentionFlags struct {
	r      chdb.Retention
	dryRun bool
	now    string
}

// validate checks the limits and --now.
func (o *retentionFlags) validate() error {
	for _, c := range []struct {
		flag string
		v    time.Duration
	}{{"raw", o.r.Raw}, {"minute", o.r.Minute}, {"hour", o.r.Hour}, {"day", o.r.Day}} {
		if c.v < 0 {
			return fmt.Errorf("--%s %s: want 0 (forever) or more", c.flag, c.v)
		}
	}
	_, err := parseTimeFlag("now", o.now, time.Now())
	return err
}

func newRetentionCmd(g *global) *cobra.Command {
	o := retentionFlags{r: chdb.DefaultRetention}
	cmd := &cobra.Command{
		Use:   "retention [--raw 336h] [--minute 2160h] [--hour 17520h] [--day 43800h] [--dry-run]",
		Short: "Drop the ClickHouse partitions older than each table's retention",
		Long: `retention drops whole partitions: port_samples and rollup_minute by day,
rollup_hour and rollup_day by month (and the same of port_minute and port_hour, the
rollups of releases before migration 0012), once the partition's last day is older than the table's
limit (defaults: raw 14 days, minute 90 days, hour 2 years, day 5 years; 0 keeps a table
whole). ClickHouse 18.16 has no TTL: run this daily (cron, a systemd timer).
Newer servers also have TTL at the defaults; this command still shortens them.
Events, inventory and topology are kept. A database migrated with --cluster
is recognised as such: the partitions of every shard's *_local tables are
listed and dropped on every shard (replication carries a drop to the other
replicas, also to one that is down now).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.requireClickHouse(); err != nil {
				return err
			}
			at := time.Now().UTC()
			if o.now != "" {
				t, err := parseTimeFlag("now", o.now, at)
				if err != nil {
					return err
				}
				at = t
			}
			conn, err := chdb.Open(cmd.Context(), g.clickhouse, g.chOptions()...)
			if err != nil {
				return err
			}
			defer conn.Close()
			parts, err := chdb.ApplyRetention(cmd.Context(), conn, o.r, at, o.dryRun)
			out := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "table\tpartition\trows\tbytes\taction")
			dropped := 0
			for _, p := range parts {
				action := "keep"
				if !p.KeepUntil.IsZero() {
					action = "keep until " + p.KeepUntil.Format("2006-01-02")
				}
				if p.Dropped {
					dropped++
					action = "dropped"
					if o.dryRun {
						action = "would drop"
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", p.Table, p.ID, p.Rows, p.Bytes, action)
			}
			tw.Flush()
			if err != nil {
				return err
			}
			verb := "dropped"
			if o.dryRun {
				verb = "would drop"
			}
			fmt.Fprintf(out, "%s %d of %d partitions\n", verb, dropped, len(parts))
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.r.Raw, "raw", o.r.Raw, "keep port_samples this long (0: forever)")
	f.DurationVar(&o.r.Minute, "minute", o.r.Minute, "keep rollup_minute this long (0: forever)")
	f.DurationVar(&o.r.Hour, "hour", o.r.Hour, "keep rollup_hour this long (0: forever)")
	f.DurationVar(&o.r.Day, "day", o.r.Day, "keep rollup_day this long (0: forever)")
	f.BoolVar(&o.dryRun, "dry-run", false, "only print what would be dropped")
	f.StringVar(&o.now, "now", "", "the time to count from instead of the clock (RFC 3339), e.g. for a test")
	g.validates(cmd, &o)
	return cmd
}
