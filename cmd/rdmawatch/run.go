//go:build !fleet

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/pipeline"
	"github.com/rdmawatch/rdmawatch/internal/redact"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/schemas/trace"
	"github.com/rdmawatch/rdmawatch/sim"
)

// runFlags are the settings of run.
type runFlags struct {
	tracePath, topologyPath, eventsOut string
	sf                                 simFlags
	noProgress                         bool
	// changed reports whether a flag was given: the simulated fleet's own
	// speed and seed hold otherwise.
	changed func(string) bool
}

// validate checks the live fleet's settings (without --trace), building it
// once, which reads nothing.
func (o *runFlags) validate() error {
	if o.tracePath != "" {
		return nil
	}
	_, err := o.sf.build(o.changed)
	return err
}

func newRunCmd(g *global) *cobra.Command {
	var o runFlags
	cmd := &cobra.Command{
		Use:   "run [--trace FILE]",
		Short: "The main job on the embedded default: embedded NATS, the local ClickHouse, a live simulated fleet",
		Long: `run starts the whole pipeline in one process on an embedded NATS JetStream
server and writes to ClickHouse when a DSN is set (make run starts a local one).

Without --trace it runs live: a simulated fabric (default: 64 hosts, RoCE and
InfiniBand, a PFC storm, a drifting optic and a disabled notification point on a
schedule) whose every node publishes its own batches, paced in accelerated data
time (--speed). A progress line shows the data time, samples/s and the
processing lag; every event is printed as it opens, updates and resolves, with
its key evidence. It ends by itself when the scenario's data time is over,
then prints a summary and the SQL to explore what was stored. Faults can be
added with --inject, or on demand while it runs with a NATS request to
` + simInjectSubject + ` on the embedded server (its URL is printed).

With --trace it replays a recorded trace as fast as the machine allows.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			topo, err := loadTopology(o.topologyPath)
			if err != nil {
				return err
			}
			stdout := cmd.OutOrStdout()
			var evOut io.Writer
			if o.eventsOut != "" {
				f, err := os.Create(o.eventsOut)
				if err != nil {
					return err
				}
				defer f.Close()
				evOut = f
			}
			if g.clickhouse == "" {
				fmt.Fprintln(stdout, "no ClickHouse DSN (--clickhouse or RDMAWATCH_CLICKHOUSE): events only, nothing stored")
			}
			if o.tracePath != "" {
				return runTrace(cmd, g, o.tracePath, topo, evOut)
			}
			fleet, err := o.sf.build(o.changed)
			if err != nil {
				return err
			}
			return runLive(cmd.Context(), g, fleet, topo, evOut, stdout, cmd.ErrOrStderr(), !o.noProgress)
		},
	}
	f := cmd.Flags()
	o.changed = f.Changed
	f.StringVar(&o.tracePath, "trace", "", "replay this trace (format v1) instead of running the live simulated fleet")
	f.StringVar(&o.topologyPath, "topology", "", "fabric topology, format v1 (default with the live fleet: its own)")
	f.StringVar(&o.eventsOut, "events-out", "", "also write the events here, one JSON object per line")
	f.BoolVar(&o.noProgress, "no-progress", false, "do not print the progress line")
	o.sf.register(cmd)
	g.validates(cmd, &o)
	return cmd
}

// runTrace replays a trace as fast as the machine allows.
func runTrace(cmd *cobra.Command, g *global, tracePath string, topo *schemas.Topology, evOut io.Writer) error {
	stdout := cmd.OutOrStdout()
	tr, err := trace.Open(tracePath)
	if err != nil {
		return err
	}
	defer tr.Close()
	if topo == nil {
		if p := filepath.Join(filepath.Dir(tracePath), "topology.json"); fileExists(p) {
			if topo, err = schemas.LoadTopology(p); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(stdout, "rdmawatch run: replaying %s on an embedded NATS JetStream\n", tracePath)
	var mu sync.Mutex
	res, runErr := pipeline.Run(cmd.Context(), pipeline.Config{
		Source:     collector.NewTraceSource(tr),
		Topology:   topo,
		EventsOut:  evOut,
		ClickHouse: g.clickhouse,
		Log:        g.log,
		OnEvent: func(ev *schemas.Event) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintln(stdout, formatEvent(ev))
		},
	})
	if res != nil {
		fmt.Fprintln(stdout)
		printSummary(stdout, res, tr.Line())
		if g.clickhouse != "" {
			printSQL(stdout, g.clickhouse, time.Time{}, time.Time{})
		}
	}
	return runErr
}

// runLive runs the simulated fleet through the pipeline, paced in
// accelerated data time, printing progress to stderr and events to stdout.
func runLive(ctx context.Context, g *global, fl *simFleet, topo *schemas.Topology, evOut io.Writer, stdout, stderr io.Writer, progress bool) error {
	fleet, err := sim.NewFleet(fl.cfg)
	if err != nil {
		return err
	}
	if topo == nil {
		if topo, err = sim.ParsedTopology(fl.cfg); err != nil {
			return err
		}
	}
	src, err := sim.NewSource(fleet, sim.WithSpeed(fl.speed))
	if err != nil {
		return err
	}
	lay := fleet.Layout()
	printLiveHeader(stdout, fl, lay)

	out := &liveOutput{stdout: stdout, stderr: stderr, tty: isTerminal(stderr), start: lay.Start}
	pcfg := pipeline.Config{
		Source:     src,
		Topology:   topo,
		EventsOut:  evOut,
		ClickHouse: g.clickhouse,
		Log:        g.log,
		// Every simulated node is its own collector: its own boot id,
		// a new one after each restart, as a real collector picks one at
		// start.
		BootID:  func(string, int) string { return randomBootID() },
		OnEvent: out.event,
	}
	if progress {
		pcfg.OnProgress = out.progress
	}
	p, err := pipeline.Start(ctx, pcfg)
	if err != nil {
		return err
	}
	if _, err := p.Conn().Subscribe(simInjectSubject, func(m *nats.Msg) {
		reply := injectOnDemand(src, string(m.Data))
		out.line(reply)
		_ = m.Respond([]byte(reply))
	}); err != nil {
		return errors.Join(fmt.Errorf("subscribe %s: %w", simInjectSubject, err), p.Shutdown())
	}
	fmt.Fprintf(stdout, "  faults on demand: nats --server %s request %s 'pfc_storm@+30s:%s'\n", p.URL(), simInjectSubject, lay.Ports[0].PortRef)
	fmt.Fprintln(stdout)
	res, runErr := p.Run(ctx)
	out.endProgress()
	interrupted := errors.Is(runErr, context.Canceled) && ctx.Err() != nil
	if res != nil {
		fmt.Fprintln(stdout)
		if interrupted {
			fmt.Fprintf(stdout, "interrupted at data time %s\n", src.DataTime().Format(time.RFC3339))
		}
		printLiveSummary(stdout, res, src, fleet, lay.Start)
		if g.clickhouse != "" {
			printSQL(stdout, g.clickhouse, lay.Start, src.DataTime())
		}
	}
	if interrupted {
		return nil
	}
	return runErr
}

// printLiveHeader says what the live run will simulate and how fast.
func printLiveHeader(w io.Writer, fl *simFleet, lay *sim.Layout) {
	ib := 0
	for _, p := range lay.Ports {
		if p.LinkLayer == sim.LinkLayerInfiniBand {
			ib++
		}
	}
	wall := "as fast as the machine allows"
	if fl.speed > 0 {
		wall = fmt.Sprintf("%gx, about %s wall", fl.speed, (time.Duration(float64(fl.cfg.Duration) / fl.speed)).Round(time.Second))
	}
	fmt.Fprintf(w, "rdmawatch run: live simulated fleet %s: %d hosts, %d ports (%d RoCE, %d InfiniBand) on %d leaves and %d spines\n",
		fl.name, len(lay.Nodes), len(lay.Ports), len(lay.Ports)-ib, ib, len(lay.Leaves), len(lay.Spines))
	fmt.Fprintf(w, "  data time %s to %s, read every %s, played at %s\n",
		lay.Start.Format(time.RFC3339), lay.End.Format(time.RFC3339), fl.cfg.Interval, wall)
	for _, f := range fl.cfg.Faults {
		fmt.Fprintf(w, "  scheduled: %s\n", describeFault(f, lay.Start))
	}
}

func printLiveSummary(w io.Writer, res *pipeline.Result, src *sim.Source, fleet *sim.Fleet, start time.Time) {
	sum := fleet.Summary()
	dataEnd := src.DataTime()
	fmt.Fprintf(w, "ran %s of data time in %s: %d nodes, %d port samples (%d resets, %d wraps, %d glitches held, %d collector restarts) in %d messages\n",
		dataEnd.Sub(start).Round(time.Second), res.Elapsed.Round(time.Second), sum.Nodes, res.Engine.Samples,
		res.Engine.Resets, res.Engine.Wraps, res.Engine.Glitches, res.Engine.Restarts, res.Batches)
	printIncidentCounts(w, res)
	evs := make([]*schemas.Event, 0, len(res.Incidents))
	for _, ev := range res.Incidents {
		evs = append(evs, ev)
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].Start != evs[j].Start {
			return evs[i].Start < evs[j].Start
		}
		return evs[i].ID < evs[j].ID
	})
	if len(evs) > 0 {
		fmt.Fprintln(w, "incidents:")
	}
	for _, ev := range evs {
		end := "still open"
		if ev.End != nil {
			end = "to " + ev.End.Time().Format("15:04:05")
		}
		fmt.Fprintf(w, "  %-18s %-8s %-22s from %s %s (%s)\n", ev.Type, ev.Severity, ev.Subject, ev.Start.Time().Format("15:04:05"), end, ev.Layer)
	}
	fmt.Fprintf(w, "injected (ground truth): %d labels", sum.Labels)
	var lt []string
	for _, l := range fleet.Labels() {
		lt = append(lt, l.Type+" "+l.Subject.String())
	}
	if len(lt) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(lt, "; "))
	}
	fmt.Fprintln(w)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// printSQL ends a run with what to paste next: the run's incidents and a
// postmortem through rdmawatch itself, for the run's data range (from and
// to zero: the range the database holds, which query and postmortem take by
// default), then the same tables through clickhouse-client.
func printSQL(w io.Writer, dsn string, from, to time.Time) {
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
	// A DSN with a password (or a secret parameter) is not printed: the
	// commands read it from the environment instead. The database name is
	// left out of the comparison: a random one (a test's) reads as a token
	// to redact.String, and the pasted command would then read another
	// database from the environment.
	dsnArg := "'" + dsn + "'"
	probe := dsn
	if u, err := url.Parse(dsn); err == nil {
		u.Path = ""
		probe = u.String()
	}
	if redact.String(probe) != probe {
		dsnArg = `"$RDMAWATCH_CLICKHOUSE"`
	}
	rng := ""
	if !from.IsZero() && to.After(from) {
		rng = fmt.Sprintf(" --from %s --to %s", from.UTC().Format(time.RFC3339), to.UTC().Add(time.Second).Format(time.RFC3339))
	}
	self := os.Args[0]
	fmt.Fprintf(w, `
What was stored, in ClickHouse (%s). The run's incidents, then a postmortem with a plot per incident:
  %s query events --clickhouse %s%s
  %s query storm_spread --clickhouse %s%s
  %s postmortem --clickhouse %s%s --out postmortem && ls postmortem
The raw tables:
  %s -q "SELECT node, device, port, count() AS samples, sum(link_downed) AS downs, max(symbol_error) AS symbol_errors FROM port_samples FINAL GROUP BY node, device, port ORDER BY downs DESC LIMIT 10 FORMAT PrettyCompact"
  %s -q "SELECT node, device, port, link_layer, rate, last_seen FROM inventory FINAL ORDER BY node LIMIT 20 FORMAT PrettyCompact"
ClickHouse keeps running until: make stop
`, redact.String(dsn), self, dsnArg, rng, self, dsnArg, rng, self, dsnArg, rng, client, client)
}
