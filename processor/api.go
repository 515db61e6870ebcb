// Package processor is what detectors see: per-port state kept in data time,
// the fabric view with the topology, an event emitter, the incident
// lifecycle, cause linking, the helpers every detector writes its checks and
// figures with, and the registry detectors add themselves to in init().
//
// The detectors are packages of their own under processor/detect (one per
// detector; judged is the engine three of them share, pause the pause
// reading two of them share), and processor/detect/all links them all into
// a program.
//
// It does not import the engine (processor/engine), which consumes the
// counters stream, owns the port states and the watermark, and calls the
// detectors; the engine imports this package.
//
// Calls into detectors are sequential per processor: one goroutine drives a
// processor's ports, detectors and emitter, so detectors need no locks. Each
// processor builds its own detector instances from the registry factories,
// so detector-level state is never shared between processors.
package processor

import (
	"context"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Detector is a named detector. A detector implements PortDetector,
// FabricDetector or both.
type Detector interface {
	// Name is the registry name, also the key of the detector's per-port
	// state; usually the event type it emits.
	Name() string
}

// PortDetector looks at one port's samples as they arrive, in data-time
// order per port: duplicates and samples not newer than the port's last one
// are dropped before detectors see them.
type PortDetector interface {
	Detector
	// OnSample is called once per accepted sample. port.LastTime is still the
	// previous sample's time; the runtime updates it after every detector
	// ran. s is valid only during the call.
	OnSample(ctx context.Context, port *PortState, s *Sample, em Emitter)
}

// FabricDetector is called when the watermark advances (at most once per
// runtime tick of data time). It is for detectors that need many ports at
// once and the topology (PFC storm spread, fabric-wide CNP/ECN sums), and for
// timeouts that have to fire when a port goes silent: no sample will come to
// call OnSample.
type FabricDetector interface {
	Detector
	// OnWatermark is called with the new watermark: every sample with a data
	// time up to wm has been delivered (within the allowed lateness).
	OnWatermark(ctx context.Context, fabric FabricView, wm schemas.Millis, em Emitter)
}

// Initializer is implemented by detectors that want the fabric view before
// the first sample: a port detector uses its topology to name the switch port
// at the other end of a cable.
type Initializer interface {
	Init(fabric FabricView) error
}

// FabricView is what a fabric detector can read. It never blocks and never
// allocates per port; iterate with Ports.
type FabricView interface {
	// Topology is nil when the processor runs without one.
	Topology() *schemas.Topology
	// Watermark is the current watermark.
	Watermark() schemas.Millis
	// Port returns a tracked port.
	Port(id schemas.PortID) (*PortState, bool)
	// Ports calls fn for every tracked port in a stable order (by node,
	// device, port) until fn returns false.
	Ports(fn func(*PortState) bool)
	// Complete reports whether this processor sees every partition. A
	// processor that owns only some partitions sees only their nodes:
	// fabric-wide sums computed on it are partial.
	Complete() bool
}

// ConfigView is implemented by the FabricView of a processor that reads the
// inventory stream: the fleet's port configuration (docs/formats.md, the
// trace's `config`), every node's and not only the owned partitions', since
// comparing a port with its link's other end and with the fabric needs them
// all. A config is known from the data time it was read: at watermark wm a
// detector sees, per port, the latest config read at or before wm. Read it
// with ConfigOf and EachConfig, which accept any FabricView.
type ConfigView interface {
	// PortConfig returns what is known of the port's configuration.
	PortConfig(id schemas.PortID) (KnownConfig, bool)
	// Configs calls fn for every port with a known configuration, in a
	// stable order (by node, device, port), until fn returns false.
	Configs(fn func(*KnownConfig) bool)
}

// KnownConfig is one port's configuration as the inventory told it.
type KnownConfig struct {
	ID schemas.PortID
	// LinkLayer and Netdev are the inventory's: Ethernet ports are the
	// fabric's RoCE ports.
	LinkLayer string
	Netdev    string
	// Since is the data time this configuration was first read (it has
	// not changed since); Read the latest reading that confirmed it.
	Since, Read schemas.Millis
	// Config is never nil; its nil fields are unknown.
	Config *schemas.PortConfig
}

// ConfigOf returns the port's known configuration when fabric keeps them.
func ConfigOf(fabric FabricView, id schemas.PortID) (KnownConfig, bool) {
	if cv, ok := fabric.(ConfigView); ok {
		return cv.PortConfig(id)
	}
	return KnownConfig{}, false
}

// EachConfig iterates the known configurations when fabric keeps them.
func EachConfig(fabric FabricView, fn func(*KnownConfig) bool) {
	if cv, ok := fabric.(ConfigView); ok {
		cv.Configs(fn)
	}
}

// Emitter takes the events a detector decides. The runtime publishes them
// in emission order after the message that caused them.
type Emitter interface {
	Emit(ev *schemas.Event)
}

// EmitterFunc adapts a function to Emitter.
type EmitterFunc func(ev *schemas.Event)

// Emit calls f.
func (f EmitterFunc) Emit(ev *schemas.Event) { f(ev) }

// Sample is one accepted reading of one port.
type Sample struct {
	ID schemas.PortID
	// Time is the reading's data time.
	Time schemas.Millis
	// PortSample is the decoded wire sample (counters with delta, value and
	// flags, interval, link state); it belongs to the message being
	// processed and must not be kept.
	*schemas.PortSample

	// flags is the union of the counters' flags, computed on first use
	// (flagsKnown) and shared by the detectors of the sample.
	flags      schemas.Flag
	flagsKnown bool
}

// AnyFlags returns the union of the flags of the sample's counters.
func (s *Sample) AnyFlags() schemas.Flag {
	if !s.flagsKnown {
		var f schemas.Flag
		for i := range s.Counters {
			f |= s.Counters[i].Flags
		}
		s.flags, s.flagsKnown = f, true
	}
	return s.flags
}

// Since is the data time the sample's deltas start from: the previous
// reading when the collector knew one, else the sample's own time.
func (s *Sample) Since() schemas.Millis {
	if s.IntervalMs > 0 {
		return s.Time - schemas.Millis(s.IntervalMs)
	}
	return s.Time
}

// Baseline reports whether every counter of the sample is a baseline
// (collector start or restart): such a sample carries no deltas.
func (s *Sample) Baseline() bool {
	for _, c := range s.Counters {
		if c.Flags&schemas.FlagFirst == 0 {
			return false
		}
	}
	return true
}

// PortState is what the processor keeps per tracked port. It stays small:
// detectors that need long windows keep compact aggregates (see Buckets) in
// their per-port state, never raw samples. The budget is 8 KiB per port with
// every detector's state for a 2-hour window.
type PortState struct {
	ID schemas.PortID
	// Netdev, LinkLayer and State are as of the latest sample.
	Netdev    string
	LinkLayer string
	State     string
	// FirstTime is the data time of the first sample seen; LastTime of the
	// latest accepted one (during OnSample: the previous one).
	FirstTime schemas.Millis
	LastTime  schemas.Millis
	// LastIntervalMs is the interval of the latest sample, the port's
	// collection interval in practice: silence is measured in it.
	LastIntervalMs int64
	Samples        uint64

	locals []portLocal
}

type portLocal struct {
	key string
	v   any
}

// NewPortState starts the state of a port; the runtime creates them.
func NewPortState(id schemas.PortID) *PortState { return &PortState{ID: id} }

// Observe records an accepted sample on the port, after the detectors ran.
func (p *PortState) Observe(s *Sample) {
	if p.Samples == 0 {
		p.FirstTime = s.Time
	}
	p.Samples++
	p.LastTime = s.Time
	if s.IntervalMs > 0 {
		p.LastIntervalMs = s.IntervalMs
	}
	p.Netdev, p.LinkLayer, p.State = s.Netdev, s.LinkLayer, s.PortSample.State
}

// SilentFor is how long the port has not reported at data time now.
func (p *PortState) SilentFor(now schemas.Millis) time.Duration {
	return time.Duration(now-p.LastTime) * time.Millisecond
}

// PortLocal returns the per-port state a detector keeps under key (its
// Name()), created as a zero T on first use. A linear scan: a port carries
// one entry per detector that keeps state, a handful.
func PortLocal[T any](p *PortState, key string) *T {
	for i := range p.locals {
		if p.locals[i].key == key {
			return p.locals[i].v.(*T)
		}
	}
	v := new(T)
	p.locals = append(p.locals, portLocal{key: key, v: v})
	return v
}

// LookupPortLocal returns the per-port state under key if there is one,
// without creating it: detectors keep nothing on healthy ports.
func LookupPortLocal[T any](p *PortState, key string) (*T, bool) {
	for i := range p.locals {
		if p.locals[i].key == key {
			return p.locals[i].v.(*T), true
		}
	}
	return nil, false
}
