package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/internal/retry"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// ErrInvalidOption wraps every invalid option of a source.
var ErrInvalidOption = errors.New("invalid option")

// Source is a simulated fleet as a collector.Source: one process standing in for
// every node of a fabric. Each reading is one node's scrape, exactly what
// that node's collector would read (its own node name, its own restarts),
// so the engine gives each node its own batches and boot id.
//
// With a speed, readings are released in data-time order at the wall time
// their data time maps to (data time runs speed times faster than the wall
// clock from the first reading on); without one, as fast as the fleet steps.
// The fleet's end is io.EOF.
type Source struct {
	mu    sync.Mutex // guards fleet: Inject may come from another goroutine
	fleet *Fleet

	speed float64
	now   func() time.Time
	wait  func(ctx context.Context, d time.Duration) error

	queue            []*collector.Reading
	restartPending   map[string]bool
	started          bool
	wall0, data0     time.Time
	newestMs, rounds atomic.Int64
}

// Option configures a Source.
type Option func(*Source) error

// WithSpeed paces the source: speed seconds of data time per wall second
// (90 plays two hours in 80 s). 0, the default, does not pace.
func WithSpeed(speed float64) Option {
	return func(s *Source) error {
		if speed < 0 || speed > 1e6 {
			return fmt.Errorf("%w: sim speed %v, want 0 (unpaced) or up to 1e6", ErrInvalidOption, speed)
		}
		s.speed = speed
		return nil
	}
}

// WithClock replaces the wall clock and the wait between readings
// (tests).
func WithClock(now func() time.Time, wait func(ctx context.Context, d time.Duration) error) Option {
	return func(s *Source) error {
		if now == nil || wait == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidOption)
		}
		s.now, s.wait = now, wait
		return nil
	}
}

// NewSource reads fleet. The collector command wires it in with
// `rdmawatch collector --source sim`; the real collector does not depend on
// the simulator.
func NewSource(fleet *Fleet, opts ...Option) (*Source, error) {
	if fleet == nil {
		return nil, fmt.Errorf("%w: nil fleet", ErrInvalidOption)
	}
	s := &Source{fleet: fleet, now: time.Now, wait: retry.Sleep, restartPending: map[string]bool{}}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Inject adds a fault to the running fleet (see Fleet.Inject); it is
// safe to call while another goroutine reads the source.
func (s *Source) Inject(f Fault) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fleet.Inject(f)
}

// FleetNow is the data time of the fleet's next reading round: the base of
// a fault injected now.
func (s *Source) FleetNow() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fleet.Now()
}

// DataTime is the data time of the newest reading released so far (zero
// before the first); safe to call from any goroutine.
func (s *Source) DataTime() time.Time {
	ms := s.newestMs.Load()
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Rounds is the number of reading rounds stepped so far.
func (s *Source) Rounds() int64 { return s.rounds.Load() }

// Next implements collector.Source.
func (s *Source) Next(ctx context.Context) (*collector.Reading, error) {
	for len(s.queue) == 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.mu.Lock()
		_, lines, ok := s.fleet.Step()
		s.mu.Unlock()
		if !ok {
			return nil, io.EOF
		}
		s.rounds.Add(1)
		s.queue = s.readings(lines)
	}
	r := s.queue[0]
	if s.speed > 0 {
		if !s.started {
			s.started, s.wall0, s.data0 = true, s.now(), r.Time
		}
		due := s.wall0.Add(time.Duration(float64(r.Time.Sub(s.data0)) / s.speed))
		if d := due.Sub(s.now()); d > 0 {
			if err := s.wait(ctx, d); err != nil {
				return nil, err
			}
		}
	}
	s.queue[0] = nil
	s.queue = s.queue[1:]
	if ms := r.Time.UnixMilli(); ms > s.newestMs.Load() {
		s.newestMs.Store(ms)
	}
	return r, nil
}

// readings turns one round of trace lines into one reading per node, in the
// order of their data time. A collector_restart line marks the node's next
// reading as the first after a restart; a port read twice in one round (the
// simulator's redelivery noise, which a live collector never produces) is
// kept once.
func (s *Source) readings(lines []Sample) []*collector.Reading {
	byNode := map[string]*collector.Reading{}
	var out []*collector.Reading
	for i := range lines {
		l := &lines[i]
		if l.Kind == KindCollectorRestart {
			s.restartPending[l.Node] = true
			continue
		}
		r := byNode[l.Node]
		if r == nil {
			r = &collector.Reading{Node: l.Node, Time: l.Time, Restart: s.restartPending[l.Node], Devices: map[string]collector.DeviceInfo{}}
			delete(s.restartPending, l.Node)
			byNode[l.Node] = r
			out = append(out, r)
		}
		dup := false
		for _, p := range r.Ports {
			if p.Device == l.Device && p.Port == l.Port {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		r.Ports = append(r.Ports, collector.PortReading{
			Device:     l.Device,
			Port:       l.Port,
			Netdev:     l.Netdev,
			LinkLayer:  l.LinkLayer,
			State:      l.State,
			Rate:       l.Rate,
			Time:       l.Time,
			Counters:   l.Map(schemas.SourceCounters),
			HWCounters: l.Map(schemas.SourceHWCounters),
			Ethtool:    l.Map(schemas.SourceEthtool),
			Config:     l.Config,
		})
		if _, ok := r.Devices[l.Device]; !ok {
			r.Devices[l.Device] = deviceInfo(l.Node, l.Device, l.LinkLayer)
		}
		if l.Time.After(r.Time) {
			r.Time = l.Time
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// deviceInfo is what sysfs would say about a ConnectX-6 (RoCE) or
// ConnectX-7 (InfiniBand) adapter; the GUID is stable per node and device.
func deviceInfo(node, device, linkLayer string) collector.DeviceInfo {
	h := fnv.New64a()
	h.Write([]byte(node + "/" + device))
	g := h.Sum64()
	guid := fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
	if linkLayer == LinkLayerInfiniBand {
		return collector.DeviceInfo{FWVersion: "28.39.1002", BoardID: "MT_0000000838", HCAType: "MT4129", NodeGUID: guid}
	}
	return collector.DeviceInfo{FWVersion: "20.39.1002", BoardID: "MT_0000000223", HCAType: "MT4123", NodeGUID: guid}
}
