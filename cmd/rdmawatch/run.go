package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// defaultScenario is the bundled example fleet `run` replays when no trace is
// given; `make run` runs from the repository root.
const defaultScenario = "test/scenarios/example-fleet"

func newRunCmd(g *global) *cobra.Command {
	var (
		tracePath, topologyPath, eventsOut string
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "The main job on the embedded default: embedded NATS, the local ClickHouse, an example fleet",
		Long: `run starts the whole pipeline in one process on an embedded NATS JetStream
server, writes to ClickHouse when a DSN is set (make run starts a local one), and
feeds it the bundled example fleet trace until it ends. Events are printed as
they are decided, then a summary and the SQL to explore what was stored.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if tracePath == "" {
				tracePath = firstExisting(filepath.Join(defaultScenario, "trace.jsonl.gz"), filepath.Join(defaultScenario, "trace.jsonl"))
				if tracePath == "" {
					return fmt.Errorf("no --trace given and the bundled %s is not here: run from the repository root, or write one with `rdmawatch simulate --out DIR`", defaultScenario)
				}
				if topologyPath == "" {
					topologyPath = firstExisting(filepath.Join(defaultScenario, "topology.json"))
				}
			}
			var topo *schemas.Topology
			if topologyPath != "" {
				t, err := schemas.LoadTopology(topologyPath)
				if err != nil {
					return err
				}
				topo = t
			}
			tr, err := collector.OpenTrace(tracePath)
			if err != nil {
				return err
			}
			defer tr.Close()
			stdout := cmd.OutOrStdout()
			var evOut io.Writer
			if eventsOut != "" {
				f, err := os.Create(eventsOut)
				if err != nil {
					return err
				}
				defer f.Close()
				evOut = f
			}
			if g.clickhouse == "" {
				fmt.Fprintln(stdout, "no ClickHouse DSN (--clickhouse or RDMAWATCH_CLICKHOUSE): events only, nothing stored")
			}
			fmt.Fprintf(stdout, "rdmawatch run: replaying %s on an embedded NATS JetStream\n", tracePath)
			var mu sync.Mutex
			res, runErr := runPipeline(cmd.Context(), pipelineConfig{
				source:     collector.NewTraceSource(tr),
				topology:   topo,
				eventsOut:  evOut,
				clickhouse: g.clickhouse,
				processors: 1,
				log:        g.log,
				onEvent: func(ev *schemas.Event) {
					mu.Lock()
					defer mu.Unlock()
					fmt.Fprintln(stdout, formatEvent(ev))
				},
			})
			if res != nil {
				fmt.Fprintln(stdout)
				printSummary(stdout, res, tr.Line())
				if g.clickhouse != "" {
					printSQL(stdout, g.clickhouse)
				}
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&tracePath, "trace", "", "trace to replay (default: the bundled example fleet)")
	f.StringVar(&topologyPath, "topology", "", "fabric topology, format v1")
	f.StringVar(&eventsOut, "events-out", "", "also write the events here, one JSON object per line")
	return cmd
}

func firstExisting(paths ...string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// formatEvent is the one-line terminal form of an event.
func formatEvent(ev *schemas.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-8s %-18s %-8s %-24s %s", ev.DetectedAt, strings.ToUpper(ev.State), ev.Type, ev.Severity, ev.Subject, ev.Summary)
	if ev.End != nil && ev.State == schemas.StateResolved {
		fmt.Fprintf(&b, " (lasted %s)", ev.End.Time().Sub(ev.Start.Time()))
	}
	return b.String()
}

func printSQL(w io.Writer, dsn string) {
	client := "clickhouse-client"
	if u, err := url.Parse(dsn); err == nil {
		port := u.Port()
		if port == "" {
			port = "9000"
		}
		client += " --host " + u.Hostname() + " --port " + port
		if db := strings.TrimPrefix(u.Path, "/"); db != "" {
			client += " --database " + db
		}
	}
	fmt.Fprintf(w, `
What was stored, in ClickHouse (%s). Try:
  %s -q "SELECT type, state, severity, subject_node, subject_device, subject_port, summary FROM events FINAL ORDER BY detected_at_ms FORMAT PrettyCompact"
  %s -q "SELECT node, device, port, count() AS samples, sum(link_downed) AS downs, max(symbol_error) AS symbol_errors FROM port_samples FINAL GROUP BY node, device, port ORDER BY downs DESC LIMIT 10 FORMAT PrettyCompact"
  %s -q "SELECT node, device, port, link_layer, rate, last_seen FROM inventory FINAL ORDER BY node LIMIT 20 FORMAT PrettyCompact"
ClickHouse keeps running until: make stop
`, dsn, client, client, client)
}
