package engine

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// ErrInvalidConfig is wrapped by every Config.Validate error.
var ErrInvalidConfig = errors.New("invalid processor config")

// StartMode says where in the counters stream a processor begins.
type StartMode int

const (
	// StartWarmUp (production, the zero value) rebuilds state after a
	// restart: it starts at StartTime, or WarmUp before now. Before reading
	// it learns from the events stream the last revision of every incident
	// already there (see published.go), so the warm-up publishes exactly
	// the revisions the previous run did not, however long the outage was
	// and whatever the events stream's duplicate window.
	StartWarmUp StartMode = iota
	// StartAll reads the whole stream and publishes everything (replay).
	StartAll
)

// Config configures a processor. The zero value, after defaults, is one
// instance owning every partition, starting with a warm-up.
type Config struct {
	// Partitions is the partition count of the counters stream; default
	// schemas.DefaultPartitions. Run checks it against the stream.
	Partitions int
	// Instance of Instances: this processor owns partition p when
	// p%Instances == Instance. Default 0 of 1.
	Instance, Instances int
	// OwnedPartitions, if set, lists the owned partitions instead.
	OwnedPartitions []int
	// Topology is optional; fabric detectors use it.
	Topology *schemas.Topology
	// AllowedLateness is how far behind the newest data time a sample may
	// arrive and still count for fabric detectors: watermark = max data time
	// seen - AllowedLateness. Zero (the default) adapts it to the observed
	// collection interval: docs/formats.md lets lines of different ports be up to
	// one interval out of order, so one interval (plus a tenth for read-time
	// jitter) is enough, and a fixed 10 s would hold fabric decisions back by
	// ten intervals on a fleet read every second. Until an interval has been
	// seen it is 10 s.
	AllowedLateness time.Duration
	Start           StartMode
	// WarmUp is how much history StartWarmUp reads: the longest detector
	// window. Default 2 h.
	WarmUp time.Duration
	// StartTime overrides now - WarmUp.
	StartTime time.Time
	// MaxAhead is how far ahead of the data clock a sample may be; further
	// ahead it is refused as implausible (schemas.TimeBounds). Default
	// schemas.DefaultMaxAhead, which the sink applies too.
	MaxAhead time.Duration
	// Tick is the data-time step at which fabric detectors are called as the
	// watermark advances. Zero (the default) is 1 s, or a quarter of the
	// allowed lateness when that is shorter: on a fleet read every second a
	// 1 s step would add up to a whole interval to every fabric decision.
	Tick time.Duration
	// MaxPortsPerNode bounds the tracked ports of a node no inventory of
	// which is known (ports.go): the samples of further new ports are
	// refused. A node whose inventory is known may have as many as it
	// lists. Default DefaultMaxPortsPerNode.
	MaxPortsPerNode int
	// PortTTL forgets a port silent for this long (data time, against the
	// watermark), so that a churning fleet does not grow the processor
	// forever. Default 3 h, longer than WarmUp.
	PortTTL time.Duration
	// DetectorNames selects registered detectors; empty: all of them.
	DetectorNames []string
	// ConfigureDetectors, when set, is applied to the detectors built from
	// the registry before the first sample (settings from a config file);
	// a processor group applies it at every rebalance.
	ConfigureDetectors func([]processor.Detector) error
	// Detectors, if set, is used instead of the registry (tests, custom
	// settings); each processor needs its own instances.
	Detectors []processor.Detector
	// NewDetectors, if set, builds the detectors instead of the registry,
	// once per processor: custom detectors in a processor group, which
	// builds fresh ones at every rebalance. ConfigureDetectors is applied
	// to what it builds.
	NewDetectors func() ([]processor.Detector, error)
	// Name goes into the consumer's metadata, for people reading server
	// state.
	Name string

	// Group, for NewElastic only, names the processor group whose live
	// members share the partitions (group.go). Member is this member's
	// unique name in it (default: host, pid and a random tail); MemberTTL
	// is how long a member that stopped heartbeating keeps its partitions
	// (default DefaultMemberTTL); it becomes the members bucket's TTL when
	// this member creates the bucket, the first creator's TTL stays.
	Group     string
	Member    string
	MemberTTL time.Duration
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Partitions == 0 {
		c.Partitions = schemas.DefaultPartitions
	}
	if c.Instances == 0 {
		c.Instances = 1
	}
	if c.WarmUp == 0 {
		c.WarmUp = 2 * time.Hour
	}
	if c.MaxAhead == 0 {
		c.MaxAhead = schemas.DefaultMaxAhead
	}
	if c.PortTTL == 0 {
		c.PortTTL = 3 * time.Hour
	}
	if c.MaxPortsPerNode == 0 {
		c.MaxPortsPerNode = DefaultMaxPortsPerNode
	}
	if c.Name == "" {
		c.Name = "rdmawatch-processor"
	}
	return c
}

// Validate checks the config after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Partitions < 1:
		return fmt.Errorf("%w: partitions %d", ErrInvalidConfig, c.Partitions)
	case c.Instances < 1 || c.Instance < 0 || c.Instance >= c.Instances:
		return fmt.Errorf("%w: instance %d of %d", ErrInvalidConfig, c.Instance, c.Instances)
	case c.AllowedLateness < 0 || c.WarmUp < 0 || c.MaxAhead < 0 || c.Tick < 0 || c.PortTTL < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	case c.MaxPortsPerNode < 0:
		return fmt.Errorf("%w: max ports per node %d: want 0 (the default, %d) or more", ErrInvalidConfig, c.MaxPortsPerNode, DefaultMaxPortsPerNode)
	case c.Start != StartWarmUp && c.Start != StartAll:
		return fmt.Errorf("%w: start mode %d", ErrInvalidConfig, c.Start)
	case c.NewDetectors != nil && (c.Detectors != nil || len(c.DetectorNames) > 0):
		return fmt.Errorf("%w: detectors from NewDetectors and from Detectors or DetectorNames", ErrInvalidConfig)
	}
	for _, p := range c.OwnedPartitions {
		if p < 0 || p >= c.Partitions {
			return fmt.Errorf("%w: partition %d not in [0, %d)", ErrInvalidConfig, p, c.Partitions)
		}
	}
	if len(c.owned()) == 0 {
		return fmt.Errorf("%w: instance %d of %d owns no partition of %d", ErrInvalidConfig, c.Instance, c.Instances, c.Partitions)
	}
	return nil
}

// owned lists the owned partitions, sorted, without duplicates.
func (c Config) owned() []int {
	var out []int
	if len(c.OwnedPartitions) > 0 {
		seen := map[int]bool{}
		for _, p := range c.OwnedPartitions {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
		sort.Ints(out)
		return out
	}
	for p := 0; p < c.Partitions; p++ {
		if p%c.Instances == c.Instance {
			out = append(out, p)
		}
	}
	return out
}
