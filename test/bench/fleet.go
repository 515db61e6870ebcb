// Package bench holds the load generator the benchmarks of BENCHMARKS.md
// share: a simulated fleet (sim) run through the collector's
// delta engine, giving the counter batches a real collector would publish.
package bench

import (
	"fmt"
	"time"

	"context"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sim"
	"testing"
)

// PortsPerHost is the shape of a benchmark host: eight single-port
// ConnectX devices, as on a GPU server with one NIC per GPU.
const PortsPerHost = 8

// FleetConfig is a RoCE fleet of about ports ports (rounded up to whole
// hosts) read every interval for duration, with the default noise of a
// production fleet (read jitter, idle links) and no faults.
func FleetConfig(ports int, interval, duration time.Duration) sim.Config {
	cfg := sim.DefaultConfig()
	cfg.Hosts = max(1, (ports+PortsPerHost-1)/PortsPerHost)
	cfg.DevicesPerHost, cfg.PortsPerDevice = PortsPerHost, 1
	cfg.HostsPerLeaf = 16
	cfg.Spines = 4
	cfg.Interval, cfg.Duration = interval, duration
	return cfg
}

// Tick is one reading round of the fleet: per node, the raw sample lines
// and the batch the delta engine made of them.
type Tick struct {
	Time    time.Time
	Lines   [][]sim.Sample // per node, in node order
	Batches []*schemas.CounterBatch
}

// Run steps the fleet to its end, calling fn once per tick. The batches are
// what collector.Engine makes of each node's readings; every node has its
// own engine state as a collector would.
func Run(cfg sim.Config, fn func(*Tick) error) error {
	f, err := sim.NewFleet(cfg)
	if err != nil {
		return err
	}
	eng := collector.NewEngine(func(node string, restarts int) string { return fmt.Sprintf("bench-%d", restarts) })
	for {
		at, lines, ok := f.Step()
		if !ok {
			return nil
		}
		t := &Tick{Time: at}
		for i := 0; i < len(lines); {
			j := i + 1
			for j < len(lines) && lines[j].Node == lines[i].Node {
				j++
			}
			node := lines[i:j]
			t.Lines = append(t.Lines, node)
			if b := eng.Apply(Reading(at, node)); b != nil {
				t.Batches = append(t.Batches, b)
			}
			i = j
		}
		if err := fn(t); err != nil {
			return err
		}
	}
}

// Reading turns one node's sample lines into the reading its collector
// would have taken.
func Reading(at time.Time, lines []sim.Sample) *collector.Reading {
	r := &collector.Reading{Node: lines[0].Node, Time: at}
	for i := range lines {
		s := &lines[i]
		if s.Kind == sim.KindCollectorRestart {
			r.Restart = true
			continue
		}
		r.Ports = append(r.Ports, collector.PortReading{
			Device: s.Device, Port: s.Port, Netdev: s.Netdev, LinkLayer: s.LinkLayer,
			State: s.State, Rate: s.Rate, Time: s.Time,
			Counters:   s.Map(schemas.SourceCounters),
			HWCounters: s.Map(schemas.SourceHWCounters),
			Ethtool:    s.Map(schemas.SourceEthtool),
		})
	}
	return r
}

// PublishFleet starts an embedded JetStream (memory streams), publishes ticks
// seconds of a 1 s fleet of the given ports through the real delta engine
// and publisher, and returns the stream and the port-samples published.
func PublishFleet(tb testing.TB, ports, ticks int) (jetstream.JetStream, int) {
	tb.Helper()
	ctx := context.Background()
	js := natstest.Start(tb, &schemas.StreamOptions{Memory: true}).JS
	pub := collector.NewPublisher(js, 1024, nil)
	samples := 0
	err := Run(FleetConfig(ports, time.Second, time.Duration(ticks)*time.Second), func(t *Tick) error {
		for _, bt := range t.Batches {
			samples += len(bt.Ports)
			if err := pub.PublishBatch(ctx, bt); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = pub.Flush(ctx)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return js, samples
}
