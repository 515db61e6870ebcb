package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/collector/sim"
	"github.com/rdmawatch/rdmawatch/internal/redact"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// simInjectSubject is where a live run takes faults on demand: the request
// body is a fault spec (sim.ParseFault) whose +offset counts from the
// fleet's current data time; the reply says what was injected or why not.
const simInjectSubject = "rdmawatch.sim.inject"

// simFlags choose and shape the simulated fleet of a live run.
type simFlags struct {
	scenario string
	nodes    int
	interval time.Duration
	duration time.Duration
	speed    float64
	seed     uint64
	inject   []string
}

func (s *simFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.scenario, "sim-scenario", sim.DefaultLiveScenario, "live scenario: "+liveScenarioNames())
	f.IntVar(&s.nodes, "sim-nodes", 0, "simulate a healthy fleet of this many hosts instead of a scenario (add faults with --inject)")
	f.DurationVar(&s.interval, "sim-interval", 0, "collection interval of the simulated fleet (default: the scenario's, 10s with --sim-nodes)")
	f.DurationVar(&s.duration, "sim-duration", 0, "data time the simulated fleet runs for (default: the scenario's, 1h with --sim-nodes)")
	f.Float64Var(&s.speed, "speed", 0, "seconds of data time per wall second; 0 runs as fast as the machine allows (default: the scenario's, 60 with --sim-nodes)")
	f.Uint64Var(&s.seed, "sim-seed", 0, "override the simulated fleet's random seed")
	f.StringArrayVar(&s.inject, "inject", nil, "inject a fault, KIND@+OFFSET[,DURATION]:NODE/DEVICE/PORT, e.g. pfc_storm@+2m:gpu-007/mlx5_0/1 (repeatable; kinds: "+strings.Join(faultKinds(), ", ")+")")
}

func liveScenarioNames() string {
	var names []string
	for _, s := range sim.LiveScenarios() {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

func faultKinds() []string {
	kinds := make([]string, 0, len(sim.FaultKinds))
	for k := range sim.FaultKinds {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// simFleet is a fleet ready to run live: its config (faults included), the
// speed to play it at, and the name to show.
type simFleet struct {
	name  string
	cfg   sim.Config
	speed float64
}

// build resolves the flags into a fleet config. changed reports whether a
// flag was set on the command line.
func (s *simFlags) build(changed func(string) bool) (*simFleet, error) {
	var out simFleet
	if s.nodes > 0 {
		interval := s.interval
		if interval == 0 {
			interval = 10 * time.Second
		}
		duration := s.duration
		if duration == 0 {
			duration = time.Hour
		}
		out.cfg = sim.LiveConfig(s.nodes, interval, duration, time.Now().UTC().Truncate(time.Second))
		out.name = fmt.Sprintf("%d hosts", s.nodes)
		out.speed = 60
	} else {
		sc, ok := sim.LiveScenarioByName(s.scenario)
		if !ok {
			return nil, fmt.Errorf("--sim-scenario %q: not one of %s", s.scenario, liveScenarioNames())
		}
		out.cfg, out.name, out.speed = sc.Config, sc.Name, sc.Speed
		if s.interval > 0 {
			out.cfg.Interval = s.interval
		}
		if s.duration > 0 {
			out.cfg.Duration = s.duration
		}
	}
	if changed("speed") {
		if s.speed < 0 {
			return nil, fmt.Errorf("--speed %v: want 0 (as fast as the machine allows) or more", s.speed)
		}
		out.speed = s.speed
	}
	if changed("sim-seed") {
		out.cfg.Seed = s.seed
	}
	for _, spec := range s.inject {
		f, err := sim.ParseFault(spec, out.cfg.Start)
		if err != nil {
			return nil, fmt.Errorf("--inject: %w", err)
		}
		out.cfg.Faults = append(out.cfg.Faults, f)
	}
	if err := out.cfg.Validate(); err != nil {
		return nil, err
	}
	return &out, nil
}

func newRunCmd(g *global) *cobra.Command {
	var (
		tracePath, topologyPath, eventsOut string
		sf                                 simFlags
		noProgress                         bool
	)
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
			topo, err := loadTopology(topologyPath)
			if err != nil {
				return err
			}
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
			if tracePath != "" {
				return runTrace(cmd, g, tracePath, topo, evOut)
			}
			fleet, err := sf.build(cmd.Flags().Changed)
			if err != nil {
				return err
			}
			return runLive(cmd.Context(), g, fleet, topo, evOut, stdout, cmd.ErrOrStderr(), !noProgress)
		},
	}
	f := cmd.Flags()
	f.StringVar(&tracePath, "trace", "", "replay this trace (format v1) instead of running the live simulated fleet")
	f.StringVar(&topologyPath, "topology", "", "fabric topology, format v1 (default with the live fleet: its own)")
	f.StringVar(&eventsOut, "events-out", "", "also write the events here, one JSON object per line")
	f.BoolVar(&noProgress, "no-progress", false, "do not print the progress line")
	sf.register(cmd)
	return cmd
}

// runTrace replays a trace as fast as the machine allows.
func runTrace(cmd *cobra.Command, g *global, tracePath string, topo *schemas.Topology, evOut io.Writer) error {
	stdout := cmd.OutOrStdout()
	tr, err := collector.OpenTrace(tracePath)
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
}

// runLive runs the simulated fleet through the pipeline, paced in
// accelerated data time, printing progress to stderr and events to stdout.
func runLive(ctx context.Context, g *global, fl *simFleet, topo *schemas.Topology, evOut io.Writer, stdout, stderr io.Writer, progress bool) error {
	fleet, err := sim.NewFleet(fl.cfg)
	if err != nil {
		return err
	}
	if topo == nil {
		if topo, err = simTopology(fl.cfg); err != nil {
			return err
		}
	}
	src, err := collector.NewSimSource(fleet, collector.WithSimSpeed(fl.speed))
	if err != nil {
		return err
	}
	lay := fleet.Layout()
	cfg := fl.cfg
	ib := 0
	for _, p := range lay.Ports {
		if p.LinkLayer == sim.LinkLayerInfiniBand {
			ib++
		}
	}
	wall := "as fast as the machine allows"
	if fl.speed > 0 {
		wall = fmt.Sprintf("%gx, about %s wall", fl.speed, (time.Duration(float64(cfg.Duration) / fl.speed)).Round(time.Second))
	}
	fmt.Fprintf(stdout, "rdmawatch run: live simulated fleet %s: %d hosts, %d ports (%d RoCE, %d InfiniBand) on %d leaves and %d spines\n",
		fl.name, len(lay.Nodes), len(lay.Ports), len(lay.Ports)-ib, ib, len(lay.Leaves), len(lay.Spines))
	fmt.Fprintf(stdout, "  data time %s to %s, read every %s, played at %s\n",
		lay.Start.Format(time.RFC3339), lay.End.Format(time.RFC3339), cfg.Interval, wall)
	for _, f := range cfg.Faults {
		fmt.Fprintf(stdout, "  scheduled: %s\n", describeFault(f, lay.Start))
	}

	out := &liveOutput{stdout: stdout, stderr: stderr, tty: isTerminal(stderr), start: lay.Start}
	res, runErr := runPipeline(ctx, pipelineConfig{
		source:     src,
		topology:   topo,
		eventsOut:  evOut,
		clickhouse: g.clickhouse,
		processors: 1,
		log:        g.log,
		// Every simulated node is its own collector: its own boot id,
		// a new one after each restart, as a real collector picks one at
		// start.
		bootID: func(string, int) string { return randomBootID() },
		onStart: func(nc *nats.Conn, url string) error {
			_, err := nc.Subscribe(simInjectSubject, func(m *nats.Msg) {
				reply := injectOnDemand(src, string(m.Data))
				out.line(reply)
				_ = m.Respond([]byte(reply))
			})
			if err != nil {
				return fmt.Errorf("subscribe %s: %w", simInjectSubject, err)
			}
			fmt.Fprintf(stdout, "  faults on demand: nats --server %s request %s 'pfc_storm@+30s:%s'\n", url, simInjectSubject, lay.Ports[0].PortRef)
			fmt.Fprintln(stdout)
			return nil
		},
		onEvent: out.event,
		onProgress: func(p pipelineProgress) {
			if progress {
				out.progress(p)
			}
		},
	})
	out.endProgress()
	interrupted := errors.Is(runErr, context.Canceled) && ctx.Err() != nil
	if res != nil {
		fmt.Fprintln(stdout)
		if interrupted {
			fmt.Fprintf(stdout, "interrupted at data time %s\n", src.DataTime().Format(time.RFC3339))
		}
		printLiveSummary(stdout, res, src, fleet, lay.Start)
		if g.clickhouse != "" {
			printSQL(stdout, g.clickhouse)
		}
	}
	if interrupted {
		return nil
	}
	return runErr
}

// injectOnDemand injects a fault from a request; the +offset counts from the
// fleet's current data time.
func injectOnDemand(src *collector.SimSource, spec string) string {
	now := src.FleetNow()
	f, err := sim.ParseFault(spec, now)
	if err == nil {
		err = src.Inject(f)
	}
	if err != nil {
		return "inject: " + err.Error()
	}
	return "injected: " + describeFault(f, time.Time{})
}

func describeFault(f sim.Fault, base time.Time) string {
	at := func(t time.Time) string {
		if base.IsZero() {
			return t.UTC().Format(time.RFC3339)
		}
		return "+" + t.Sub(base).Round(time.Second).String()
	}
	switch v := f.(type) {
	case sim.PFCStorm:
		silent := ""
		if v.Silent {
			silent = " (host hung, its collector silent)"
		}
		return fmt.Sprintf("pfc_storm          %s at %s for %s%s", v.Port, at(v.From), v.Duration, silent)
	case sim.BERDrift:
		until := ""
		if !v.Until.IsZero() {
			until = ", optic replaced at " + at(v.Until)
		}
		return fmt.Sprintf("ber_drift          %s from %s, critical BER %s later%s", v.Port, at(v.From), v.ToCritical, until)
	case sim.CNPECNImbalance:
		return fmt.Sprintf("cnp_ecn_imbalance  %s %s at %s for %s", v.Kind, v.Port, at(v.From), v.Duration)
	case sim.LinkFlap:
		return fmt.Sprintf("link_flap          %s at %s", v.Port, at(v.At))
	case sim.CounterSaturated:
		return fmt.Sprintf("counter_saturated  %s %s from %s", v.Port, v.Counter, at(v.From))
	case sim.Incast:
		return fmt.Sprintf("incast (not a fault: congestion that must raise nothing) into %s from %d senders from %s", v.Receiver, len(v.Senders), at(v.From))
	}
	return fmt.Sprintf("%T", f)
}

// liveOutput serialises the terminal: events on stdout, the progress line on
// stderr (redrawn in place on a terminal, one line a second otherwise).
type liveOutput struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
	tty            bool
	drawn          bool
	start          time.Time
}

func (o *liveOutput) clearLocked() {
	if o.tty && o.drawn {
		fmt.Fprint(o.stderr, "\r\033[K")
		o.drawn = false
	}
}

func (o *liveOutput) line(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clearLocked()
	fmt.Fprintln(o.stdout, s)
}

func (o *liveOutput) event(ev *schemas.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clearLocked()
	fmt.Fprintln(o.stdout, formatEvent(ev))
	if e := formatEvidence(ev); e != "" {
		fmt.Fprintln(o.stdout, "    "+e)
	}
}

func (o *liveOutput) progress(p pipelineProgress) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p.Published.IsZero() {
		return
	}
	s := fmt.Sprintf("progress: data %s (+%s)  %.0f samples/s  lag %s data time, %d batches  events %d  wall %s",
		p.Published.Format("15:04:05"), p.Published.Sub(o.start).Round(time.Second), p.SamplesPerSec,
		p.Lag().Round(100*time.Millisecond), p.Backlog, p.Events, p.Wall.Round(time.Second))
	if o.tty {
		fmt.Fprint(o.stderr, "\r\033[K"+s)
		o.drawn = true
		return
	}
	fmt.Fprintln(o.stderr, s)
}

func (o *liveOutput) endProgress() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tty && o.drawn {
		fmt.Fprintln(o.stderr)
		o.drawn = false
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func printLiveSummary(w io.Writer, res *pipelineResult, src *collector.SimSource, fleet *sim.Fleet, start time.Time) {
	sum := fleet.Summary()
	dataEnd := src.DataTime()
	fmt.Fprintf(w, "ran %s of data time in %s: %d nodes, %d port samples (%d resets, %d wraps, %d glitches held, %d collector restarts) in %d messages\n",
		dataEnd.Sub(start).Round(time.Second), res.elapsed.Round(time.Second), sum.Nodes, res.engine.Samples,
		res.engine.Resets, res.engine.Wraps, res.engine.Glitches, res.engine.Restarts, res.batches)
	printIncidentCounts(w, res)
	evs := make([]*schemas.Event, 0, len(res.incidents))
	for _, ev := range res.incidents {
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

// formatEvent is the one-line terminal form of an event.
func formatEvent(ev *schemas.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-8s %-18s %-8s %-24s %s", ev.DetectedAt, strings.ToUpper(ev.State), ev.Type, ev.Severity, ev.Subject, ev.Summary)
	if ev.End != nil && ev.State == schemas.StateResolved {
		fmt.Fprintf(&b, " (lasted %s)", ev.End.Time().Sub(ev.Start.Time()))
	}
	return b.String()
}

// keyEvidence are the figures worth a glance per event type, most telling
// first; other types show their first numeric figures by name.
var keyEvidence = map[string][]string{
	schemas.TypePFCStorm:         {"tx_pause_fraction", "tx_pause_frames_per_s", "affected_ports", "rcv_gbps", "tx_pause_storm_error_events"},
	schemas.TypeBERDrift:         {"current_ber", "baseline_ber", "minutes_to_critical", "slope_decades_per_h", "critical_crossed"},
	schemas.TypeCNPECNImbalance:  {"marked_per_s", "cnp_sent_per_s", "cnp_ignored_per_s", "ratio", "gap_fraction", "fabric_cnp_sent", "fabric_cnp_handled"},
	schemas.TypeLinkFlap:         {"downs", "state", "last_down_at"},
	schemas.TypeCounterSaturated: {"saturated", "values", "state"},
}

// formatEvidence is a compact one-line rendering of an event's key
// evidence: at most four figures, plus where a PFC storm reached.
func formatEvidence(ev *schemas.Event) string {
	const maxFigures = 4
	var parts []string
	seen := map[string]bool{}
	for _, k := range keyEvidence[ev.Type] {
		if len(parts) == maxFigures {
			break
		}
		if v, ok := ev.Evidence[k]; ok {
			parts = append(parts, k+"="+formatFigure(v))
			seen[k] = true
		}
	}
	if len(parts) < maxFigures {
		keys := make([]string, 0, len(ev.Evidence))
		for k, v := range ev.Evidence {
			if !seen[k] && isNumber(v) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys[:min(len(keys), maxFigures-len(parts))] {
			parts = append(parts, k+"="+formatFigure(ev.Evidence[k]))
		}
	}
	if len(ev.Affected) > 0 {
		nodes := make([]string, 0, len(ev.Affected))
		for _, a := range ev.Affected {
			nodes = append(nodes, fmt.Sprintf("%s/%s/%d(%d hop)", a.Node, a.Device, a.Port, a.Hops))
		}
		if len(nodes) > 4 {
			nodes = append(nodes[:4], fmt.Sprintf("+%d", len(nodes)-4))
		}
		parts = append(parts, "affected="+strings.Join(nodes, ","))
	}
	if len(parts) == 0 {
		return ""
	}
	return "evidence: " + strings.Join(parts, " ")
}

func isNumber(v any) bool {
	switch v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return true
	}
	return false
}

func formatFigure(v any) string {
	switch x := v.(type) {
	case float64:
		return formatFloat(x)
	case float32:
		return formatFloat(float64(x))
	case []any:
		s := make([]string, len(x))
		for i, e := range x {
			s[i] = formatFigure(e)
		}
		return strings.Join(s, ",")
	case []string:
		return strings.Join(x, ",")
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		s := make([]string, len(keys))
		for i, k := range keys {
			s[i] = k + ":" + formatFigure(x[k])
		}
		return "{" + strings.Join(s, ",") + "}"
	}
	return fmt.Sprint(v)
}

func formatFloat(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1e9 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.3g", x)
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
`, redact.String(dsn), client, client, client)
}

// runSimCollector is `rdmawatch collector --source sim`: the simulated fleet
// published to a real JetStream, every node with its own node name and boot
// id, paced in accelerated data time, taking faults on demand on
// simInjectSubject.
func runSimCollector(ctx context.Context, g *global, nc *nats.Conn, js jetstream.JetStream, fl *simFleet, maxInFlight int) error {
	fleet, err := sim.NewFleet(fl.cfg)
	if err != nil {
		return err
	}
	src, err := collector.NewSimSource(fleet, collector.WithSimSpeed(fl.speed))
	if err != nil {
		return err
	}
	sub, err := nc.Subscribe(simInjectSubject, func(m *nats.Msg) {
		reply := injectOnDemand(src, string(m.Data))
		g.log.Info("fault on demand", "request", string(m.Data), "reply", reply)
		_ = m.Respond([]byte(reply))
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", simInjectSubject, err)
	}
	defer sub.Unsubscribe()
	lay := fleet.Layout()
	eng := collector.NewEngine(func(string, int) string { return randomBootID() })
	pub := collector.NewPublisher(js, maxInFlight, g.log)
	g.log.Info("simulated collectors started", "fleet", fl.name, "nodes", len(lay.Nodes), "ports", len(lay.Ports),
		"interval", fl.cfg.Interval, "data_start", lay.Start, "data_end", lay.End, "speed", fl.speed, "inject_subject", simInjectSubject)
	for _, f := range fl.cfg.Faults {
		g.log.Info("fault scheduled", "fault", describeFault(f, lay.Start))
	}
	err = collector.New(src, eng, pub, collector.Config{Log: g.log}).Run(ctx)
	st := eng.Stats()
	g.log.Info("simulated collectors stopped", "data_time", src.DataTime(), "samples", st.Samples, "published", pub.Published(), "restarts", st.Restarts)
	return err
}

// simTopology is the simulated fleet's topology, read back through the
// format v1 parser so the processor sees exactly what a file would give it.
func simTopology(cfg sim.Config) (*schemas.Topology, error) {
	var b bytes.Buffer
	if err := sim.WriteTopology(cfg, &b); err != nil {
		return nil, err
	}
	topo, err := schemas.ParseTopology(&b)
	if err != nil {
		return nil, fmt.Errorf("the simulated fleet's topology: %w", err)
	}
	return topo, nil
}
