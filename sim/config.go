package sim

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = errors.New("invalid simulator config")

// Link layers as sysfs names them.
const (
	LinkLayerEthernet   = "Ethernet"
	LinkLayerInfiniBand = "InfiniBand"
)

// Config describes a simulated fleet. The same Config gives the same bytes.
type Config struct {
	// Seed drives every random choice.
	Seed uint64
	// Fabric names the fabric in the topology.
	Fabric string
	// Hosts are named HostPrefix + a three-digit number from 001.
	Hosts      int
	HostPrefix string
	// Each host has DevicesPerHost RDMA devices (mlx5_0, mlx5_1, ...) with
	// PortsPerDevice ports each.
	DevicesPerHost int
	PortsPerDevice int
	// IBHosts is how many hosts (the last ones) have InfiniBand ports; the
	// others have RoCE (Ethernet) ports.
	IBHosts int
	// RatesGbps are the link speeds hosts are given (one per host, at
	// random): 25, 40, 56, 100, 200 or 400.
	RatesGbps []int
	// HostsPerLeaf and Spines shape the two-tier fat tree.
	HostsPerLeaf int
	Spines       int
	// Start is the first reading's tick; readings come every Interval until
	// Start+Duration.
	Start    time.Time
	Interval time.Duration
	Duration time.Duration
	// Utilisation is the mean share of the link rate a busy port carries.
	Utilisation float64
	// NIC is the counter set the RoCE ports' driver lists (nic.go): the
	// zero value NICFull is the historical set with rx_bits_phy and PFC
	// counters; NICUpstream drops rx_bits_phy as upstream mlx5 before 2026
	// and MLNX_OFED 5.x do; NICGlobalPause is a fabric on 802.3x global
	// pause. The physics is the same under every profile.
	NIC NICProfile
	// BondedHosts is how many RoCE hosts (the first ones) run a RoCE LAG:
	// each pair of their devices is one RDMA port mlx5_bond_<n> (netdev
	// bond<n>) whose sample sums the members' statistics, and each member
	// netdev has a sample of its own PHY statistics (nic.go). Needs an
	// even DevicesPerHost and one port per device.
	BondedHosts int
	Noise       Noise
	Faults      []Fault
}

// Noise is what makes a trace look like production: everything a collector
// and a fleet do that is not a fault. Counts are placed at random (by Seed) on
// ports and nodes that no fault touches.
type Noise struct {
	// JitterFraction spreads each port's read time over up to this share of
	// the interval (0..0.5); ports of different nodes then interleave.
	JitterFraction float64
	// IdleFraction of ports carry near-zero traffic.
	IdleFraction float64
	// Resets are driver reloads: all counters of a port fall to about zero.
	Resets int
	// CollectorRestarts write a collector_restart line for a node; the
	// counters keep counting.
	CollectorRestarts int
	// PortGaps and NodeGaps drop a port's or a whole node's lines for 1..GapIntervals ticks.
	PortGaps     int
	NodeGaps     int
	GapIntervals int
	// Duplicates write a line twice (redelivery).
	Duplicates int
	// Glitches drop one key from a sample (a file that could not be read).
	Glitches int
	// NearWrap RoCE ports start with their busy 32-bit congestion counters
	// (np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_handled) a little
	// below 2^32, so they wrap during the trace.
	NearWrap int
}

// DefaultConfig is a 16-host RoCE fleet read every 5 s for 10 minutes, with a
// little read-time jitter and no faults.
func DefaultConfig() Config {
	return Config{
		Seed:           1,
		Fabric:         "sim",
		Hosts:          16,
		HostPrefix:     "gpu-",
		DevicesPerHost: 2,
		PortsPerDevice: 1,
		RatesGbps:      []int{200},
		HostsPerLeaf:   8,
		Spines:         2,
		Start:          time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC),
		Interval:       5 * time.Second,
		Duration:       10 * time.Minute,
		Utilisation:    0.35,
		Noise:          Noise{JitterFraction: 0.1, IdleFraction: 0.05, GapIntervals: 3},
	}
}

var rateText = map[int]string{
	25:  "25 Gb/sec (1X EDR)",
	40:  "40 Gb/sec (4X QDR)",
	56:  "56 Gb/sec (4X FDR)",
	100: "100 Gb/sec (4X EDR)",
	200: "200 Gb/sec (4X HDR)",
	400: "400 Gb/sec (4X NDR)",
}

// Ticks is the number of reading rounds.
func (c *Config) Ticks() int { return int(c.Duration / c.Interval) }

// Validate checks the config, including that every fault names a port of
// the fleet and fits in the trace.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.Fabric == "":
		return bad("empty fabric name")
	case c.Hosts < 1 || c.Hosts > 100000:
		return bad("hosts %d, want 1..100000", c.Hosts)
	case c.HostPrefix == "":
		return bad("empty host prefix")
	case c.DevicesPerHost < 1 || c.DevicesPerHost > 16:
		return bad("devices per host %d, want 1..16", c.DevicesPerHost)
	case c.PortsPerDevice < 1 || c.PortsPerDevice > 2:
		return bad("ports per device %d, want 1 or 2", c.PortsPerDevice)
	case c.IBHosts < 0 || c.IBHosts > c.Hosts:
		return bad("IB hosts %d of %d", c.IBHosts, c.Hosts)
	case len(c.RatesGbps) == 0:
		return bad("no link rates")
	case c.HostsPerLeaf < 1:
		return bad("hosts per leaf %d", c.HostsPerLeaf)
	case c.Spines < 1:
		return bad("spines %d", c.Spines)
	case c.Start.IsZero():
		return bad("no start time")
	case c.Interval < time.Second || c.Interval > 10*time.Second || c.Interval%time.Millisecond != 0:
		return bad("interval %v, want 1s..10s in whole milliseconds", c.Interval)
	case c.Duration < c.Interval:
		return bad("duration %v shorter than the interval", c.Duration)
	case c.Ticks() > 10_000_000:
		return bad("duration %v is more than 10M intervals", c.Duration)
	case c.Utilisation < 0 || c.Utilisation > 0.95:
		return bad("utilisation %v, want 0..0.95", c.Utilisation)
	case !c.NIC.valid():
		return bad("NIC profile %q unknown", c.NIC)
	case c.BondedHosts < 0 || c.BondedHosts > c.Hosts-c.IBHosts:
		return bad("bonded hosts %d of %d RoCE hosts", c.BondedHosts, c.Hosts-c.IBHosts)
	case c.BondedHosts > 0 && (c.DevicesPerHost%bondMembers != 0 || c.PortsPerDevice != 1):
		return bad("bonded hosts need an even number of single-port devices per host, not %d x %d ports", c.DevicesPerHost, c.PortsPerDevice)
	}
	for _, r := range c.RatesGbps {
		if rateText[r] == "" {
			return bad("rate %d Gb/s unknown", r)
		}
	}
	n := c.Noise
	switch {
	case n.JitterFraction < 0 || n.JitterFraction > 0.5:
		return bad("jitter fraction %v, want 0..0.5", n.JitterFraction)
	case n.IdleFraction < 0 || n.IdleFraction > 1:
		return bad("idle fraction %v, want 0..1", n.IdleFraction)
	case n.Resets < 0 || n.CollectorRestarts < 0 || n.PortGaps < 0 || n.NodeGaps < 0 || n.Duplicates < 0 || n.Glitches < 0 || n.NearWrap < 0:
		return bad("negative noise count")
	case (n.PortGaps > 0 || n.NodeGaps > 0) && n.GapIntervals < 1:
		return bad("gaps need GapIntervals >= 1")
	}
	lay := newLayout(c)
	for i, f := range c.Faults {
		if f == nil {
			return bad("fault %d is nil", i)
		}
		if _, err := f.Start(lay); err != nil {
			return fmt.Errorf("%w: fault %d: %w", ErrInvalidConfig, i, err)
		}
	}
	return nil
}
