package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
)

// rollupFlags are the range of rollup.
type rollupFlags struct{ from, to string }

// validate checks that --from and --to read as times; --from is required
// at the start (a range to roll is the invocation's, not a setting).
func (o *rollupFlags) validate() error {
	now := time.Now().UTC()
	if _, err := parseTimeFlag("from", o.from, now); err != nil {
		return err
	}
	_, err := parseTimeFlag("to", o.to, now)
	return err
}

func newRollupCmd(g *global) *cobra.Command {
	var o rollupFlags
	cmd := &cobra.Command{
		Use:   "rollup --from T [--to T]",
		Short: "Roll port_samples into the minute, hour and day rollups over a time range, by hand",
		Long: `rollup rolls the samples of --from..--to into rollup_minute (one row per
port per minute, from port_samples FINAL), then those minutes into
rollup_hour, then those hours into rollup_day. The sinks do this as they store samples (sink --rollup-every);
this command is for what they could not: samples inserted by other means,
a sink stopped with --rollup-every negative, or minutes older than a
restarted sink's --rollup-lookback. Rolling a range again is harmless: the
newer roll replaces the older. The range is widened to whole minutes, and
to whole hours for the hour rollup and to whole days (of the server's time
zone) for the day rollup.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.requireClickHouse(); err != nil {
				return err
			}
			now := time.Now().UTC()
			start, err := parseTimeFlag("from", o.from, now)
			if err != nil {
				return err
			}
			if start.IsZero() {
				return fmt.Errorf("--from is required: the start of the range to roll (RFC 3339, a date, or a duration back from now)")
			}
			end, err := parseTimeFlag("to", o.to, now)
			if err != nil {
				return err
			}
			if end.IsZero() {
				end = now
			}
			if !start.Before(end) {
				return fmt.Errorf("--from %s is not before --to %s", start.Format(time.RFC3339), end.Format(time.RFC3339))
			}
			conn, err := chdb.Open(cmd.Context(), g.clickhouse, g.chOptions()...)
			if err != nil {
				return err
			}
			defer conn.Close()
			if err := chdb.CheckSchema(cmd.Context(), conn); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			// A day per statement: each INSERT ... SELECT stays bounded. In
			// chdb.Rollups order: each rollup is rolled from the one before.
			for _, r := range chdb.Rollups {
				for t := start.Truncate(r.Step()); t.Before(end); t = t.Add(24 * time.Hour) {
					stop := t.Add(24 * time.Hour)
					if stop.After(end) {
						stop = end
					}
					began := time.Now()
					if err := chdb.Roll(cmd.Context(), conn, r, t, stop); err != nil {
						return err
					}
					fmt.Fprintf(out, "rolled %s rollup %s..%s in %s\n", r, t.Format(time.RFC3339), stop.Format(time.RFC3339), time.Since(began).Round(time.Millisecond))
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.from, "from", "", "start of the range (RFC 3339, a date, or a duration back from now: 6h, 7d)")
	cmd.Flags().StringVar(&o.to, "to", "", "end of the range (default now)")
	g.validates(cmd, &o)
	return cmd
}
