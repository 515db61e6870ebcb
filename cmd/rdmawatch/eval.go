//go:build !fleet

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/eval"
	"github.com/rdmawatch/rdmawatch/internal/pipeline"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/schemas/trace"
)

func newEvalCmd(g *global) *cobra.Command {
	var (
		tracePath, topologyPath, labelsPath, eventsPath string
		asJSON                                          bool
	)
	cmd := &cobra.Command{
		Use:   "eval --trace T --topology P --labels L",
		Short: "Replay a labelled trace and score the events: precision, recall, latency, lead, affected-F1",
		Long: `eval runs replay over the trace (or reads --events from an earlier run) and
compares the incidents with the labels by docs/formats.md's rule: same type and subject,
and the incident overlaps [label.start - 2 intervals, label.end + 120 s]. An
incident that matches no label, or only an already matched one (a fragment),
counts against precision.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if tracePath == "" || labelsPath == "" {
				return fmt.Errorf("--trace and --labels are required")
			}
			labels, err := schemas.LoadLabels(labelsPath)
			if err != nil {
				return err
			}
			interval, err := eval.TraceInterval(tracePath)
			if err != nil {
				return err
			}
			var events []schemas.Event
			if eventsPath != "" {
				events, err = readEvents(eventsPath)
				if err != nil {
					return err
				}
			} else {
				topo, err := loadTopology(topologyPath)
				if err != nil {
					return err
				}
				tr, err := trace.Open(tracePath)
				if err != nil {
					return err
				}
				defer tr.Close()
				var buf bytes.Buffer
				res, err := pipeline.Run(cmd.Context(), pipeline.Config{
					Source: collector.NewTraceSource(tr), Topology: topo, EventsOut: &buf, Log: g.log,
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "replayed %d port samples in %s\n", res.Engine.Samples, res.Elapsed.Round(1e6))
				if events, err = decodeEvents(buf.Bytes(), "replay"); err != nil {
					return err
				}
			}
			rep := eval.Evaluate(events, labels, eval.Options{Interval: interval})
			if asJSON {
				return rep.WriteJSON(cmd.OutOrStdout())
			}
			fmt.Fprintf(cmd.OutOrStdout(), "interval %s, %d labels, %d events\n", interval, len(labels), len(events))
			rep.WriteText(cmd.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tracePath, "trace", "", "trace, format v1")
	f.StringVar(&topologyPath, "topology", "", "topology, format v1")
	f.StringVar(&labelsPath, "labels", "", "labels, format v1")
	f.StringVar(&eventsPath, "events", "", "score these events (JSON lines) instead of replaying")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func readEvents(path string) ([]schemas.Event, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decodeEvents(data, path)
}

func decodeEvents(data []byte, name string) ([]schemas.Event, error) {
	var out []schemas.Event
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev schemas.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("%s line %d: %v", name, n+1, err)
		}
		out = append(out, ev)
	}
	return out, nil
}
