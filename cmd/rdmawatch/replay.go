//go:build !fleet

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/pipeline"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/schemas/trace"
)

// replayFlags are the settings of replay.
type replayFlags struct {
	tracePath, topologyPath, eventsOut string
	processors, partitions             int
}

// validate checks the counts; --trace and --events-out are required at
// the start (they are the invocation's, not settings).
func (o *replayFlags) validate() error {
	if o.processors < 1 {
		return fmt.Errorf("--processors %d: want 1 or more", o.processors)
	}
	if o.partitions < 1 {
		return fmt.Errorf("--partitions %d: want 1 or more", o.partitions)
	}
	return nil
}

func newReplayCmd(g *global) *cobra.Command {
	var o replayFlags
	cmd := &cobra.Command{
		Use:   "replay --trace FILE --topology FILE --events-out FILE [--clickhouse DSN]",
		Short: "Run the real pipeline in one process over a recorded trace, in data time",
		Long: `replay starts an embedded NATS JetStream server, feeds the trace (format v1,
.gz read as gzip) through the collector's delta engine, runs the processors
and, with --clickhouse, the sink. Time is the data's time: the same input gives
the same events. A malformed line stops it with a non-zero exit naming the line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.tracePath == "" {
				return fmt.Errorf("--trace is required")
			}
			if o.eventsOut == "" {
				return fmt.Errorf("--events-out is required")
			}
			topo, err := loadTopology(o.topologyPath)
			if err != nil {
				return err
			}
			tr, err := trace.Open(o.tracePath)
			if err != nil {
				return err
			}
			defer tr.Close()
			out, commit, err := createAtomic(o.eventsOut)
			if err != nil {
				return err
			}
			res, runErr := pipeline.Run(cmd.Context(), pipeline.Config{
				Source:     collector.NewTraceSource(tr),
				Topology:   topo,
				EventsOut:  out,
				ClickHouse: g.clickhouse,
				Processors: o.processors,
				Partitions: o.partitions,
				Log:        g.log,
			})
			// Events decided before a malformed line are kept either way.
			if err := commit(); err != nil && runErr == nil {
				runErr = err
			}
			if res != nil {
				printSummary(cmd.ErrOrStderr(), res, tr.Line())
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tracePath, "trace", "", "trace file, format v1 (JSON Lines, .gz read as gzip)")
	f.StringVar(&o.topologyPath, "topology", "", "fabric topology, format v1 (JSON)")
	f.StringVar(&o.eventsOut, "events-out", "", "where to write the events, one JSON object per line")
	f.IntVar(&o.processors, "processors", 1, "processor instances sharing the partitions")
	f.IntVar(&o.partitions, "partitions", schemas.DefaultPartitions, "partitions of the counters stream")
	g.validates(cmd, &o)
	return cmd
}

// createAtomic writes to a temporary file next to path and renames it into
// place on commit, so a reader never sees half a file.
func createAtomic(path string) (io.Writer, func() error, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, nil, fmt.Errorf("events-out: %w", err)
	}
	commit := func() error {
		if err := f.Close(); err != nil {
			return fmt.Errorf("events-out %s: %w", path, err)
		}
		if err := os.Rename(f.Name(), path); err != nil {
			return fmt.Errorf("events-out %s: %w", path, err)
		}
		return nil
	}
	return f, commit, nil
}

func printSummary(w io.Writer, res *pipeline.Result, lines int) {
	fmt.Fprintf(w, "replayed %d lines: %d port samples (%d duplicates dropped, %d resets, %d wraps, %d glitches held, %d collector restarts) in %d messages, %s\n",
		lines, res.Engine.Samples, res.Engine.Duplicates, res.Engine.Resets, res.Engine.Wraps, res.Engine.Glitches, res.Engine.Restarts, res.Batches, res.Elapsed.Round(1e6))
	printIncidentCounts(w, res)
}

// printIncidentCounts prints the events and incidents per type.
func printIncidentCounts(w io.Writer, res *pipeline.Result) {
	types := make([]string, 0, len(res.ByType))
	for t := range res.ByType {
		types = append(types, t)
	}
	sort.Strings(types)
	incidents := map[string]int{}
	for _, ev := range res.Incidents {
		incidents[ev.Type]++
	}
	fmt.Fprintf(w, "%d events, %d incidents\n", res.Events, len(res.Incidents))
	for _, t := range types {
		st := res.ByType[t]
		fmt.Fprintf(w, "  %-20s incidents %d (open %d, update %d, resolved %d)\n", t, incidents[t], st[schemas.StateOpen], st[schemas.StateUpdate], st[schemas.StateResolved])
	}
}
