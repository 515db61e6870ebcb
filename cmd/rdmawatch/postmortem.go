package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/report"
)

func newPostmortemCmd(g *global) *cobra.Command {
	var (
		rf  rangeFlags
		out string
	)
	cmd := &cobra.Command{
		Use:   "postmortem [--from T --to T] [--node N] [--out DIR]",
		Short: "Write a postmortem report: the events in order, the counters that moved, a plot around each event",
		Long: `postmortem reads the incidents overlapping --from..--to from ClickHouse and
writes DIR/report.md (Markdown, to paste into a postmortem document): a
timeline of every state change, then per incident its evidence and next
checks, the counters of its port that moved against the same length of time
before the onset, and DIR/incident-NN.svg plotting the series that prove the
incident around it (a storm's pauses at its origin and victims, a BER against
its critical level, ECN marks against CNPs). Without --from it covers all the
data the database holds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, p, err := rf.openRange(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer conn.Close()
			path, incs, err := report.Postmortem(cmd.Context(), conn, p, out)
			if err != nil {
				return err
			}
			plots := 0
			for _, in := range incs {
				if in.Plot != "" {
					plots++
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d incidents, %d plots\n", path, len(incs), plots)
			return nil
		},
	}
	rf.register(cmd)
	g.validates(cmd, &rf)
	cmd.Flags().StringVar(&out, "out", "postmortem", "directory for report.md and the SVG plots")
	return cmd
}
