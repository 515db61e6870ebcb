//go:build !fleet

package main

// The simulated fleet of `rdmawatch collector --source sim` and of the live
// `rdmawatch run`: its flags, and the collector that publishes it. The
// collector package does not know the simulator; this file wires
// sim.Source in.

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/sim"
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

// injectOnDemand injects a fault from a request; the +offset counts from the
// fleet's current data time.
func injectOnDemand(src *sim.Source, spec string) string {
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

// describeFault is sim.DescribeFault for a fault it has no words for
// (config_report, misconfig): the kind and the fault's settings instead of
// the Go type's name.
func describeFault(f sim.Fault, base time.Time) string {
	d := sim.DescribeFault(f, base)
	if d != fmt.Sprintf("%T", f) {
		return d
	}
	v := reflect.ValueOf(f)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return fmt.Sprintf("%s %+v", snakeName(v.Type().Name()), v.Interface())
}

// snakeName turns a Go type name into the kind a fault spec names:
// ConfigReport -> config_report.
func snakeName(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// logFault is a fault as a log value: DescribeFault aligns its columns for a
// terminal, which in a log line is only runs of spaces.
func logFault(f sim.Fault, base time.Time) string {
	return strings.Join(strings.Fields(describeFault(f, base)), " ")
}

// runSimCollector is `rdmawatch collector --source sim`: the simulated fleet
// published to a real JetStream, every node with its own node name and boot
// id, paced in accelerated data time, taking faults on demand on
// simInjectSubject. pc is the publisher's (the collector command's
// --max-in-flight, --spool-dir, --spool-max-bytes), cc the collector's
// (OnScrape, FlushTimeout; the interval is the fleet's own pace).
//
// The spool: one directory for the collector, as for a host's collector.
// One publisher sends every simulated node's batches, each under its own
// node's subject and Nats-Msg-Id, so what it spools when it stops with
// NATS away goes out at the next start under the ids it had, before any
// new batch, and a batch the stream already holds is dropped there as a
// duplicate. The next start simulates new boots (new boot ids), so its
// batches never collide with the spooled ones.
func runSimCollector(ctx context.Context, g *global, nc *nats.Conn, js jetstream.JetStream, fl *simFleet, pc collector.PublisherConfig, cc collector.Config) error {
	fleet, err := sim.NewFleet(fl.cfg)
	if err != nil {
		return err
	}
	src, err := sim.NewSource(fleet, sim.WithSpeed(fl.speed))
	if err != nil {
		return err
	}
	if pc.Log == nil {
		pc.Log = g.log
	}
	pub, err := collector.NewPublisherConfig(js, pc)
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
	if err := pub.ResendSpool(ctx); err != nil {
		return err
	}
	lay := fleet.Layout()
	eng := collector.NewEngine(func(string, int) string { return randomBootID() })
	g.log.Info("simulated collectors started", "fleet", fl.name, "nodes", len(lay.Nodes), "ports", len(lay.Ports),
		"interval", fl.cfg.Interval, "data_start", lay.Start, "data_end", lay.End, "speed", fl.speed, "inject_subject", simInjectSubject,
		"spool_dir", pc.SpoolDir)
	for _, f := range fl.cfg.Faults {
		g.log.Info("fault scheduled", "fault", logFault(f, lay.Start))
	}
	if cc.Log == nil {
		cc.Log = g.log
	}
	cc.Interval = 0 // the source paces itself
	err = collector.New(src, eng, pub, cc).Run(ctx)
	st := eng.Stats()
	d := pub.Dropped()
	g.log.Info("simulated collectors stopped", "data_time", src.DataTime(), "samples", st.Samples, "published", pub.Published(), "restarts", st.Restarts,
		"dropped_batches", d.Messages, "dropped_samples", d.Samples)
	return err
}
