package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"sync"
	"time"
)

// ErrInvalidHostOption is wrapped by every HostOption that rejects its value.
var ErrInvalidHostOption = errors.New("invalid host source option")

// HostOption configures a HostSource.
type HostOption func(*hostConfig) error

type hostConfig struct {
	ethtool     bool
	ethStats    EthtoolStats
	root        string
	now         func() time.Time
	logger      *slog.Logger
	configEvery time.Duration
}

// WithEthtool switches the ethtool statistics of each port's netdev on or off
// (on by default). Off saves the ioctls on InfiniBand-only hosts.
func WithEthtool(enabled bool) HostOption {
	return func(c *hostConfig) error {
		c.ethtool = enabled
		return nil
	}
}

// WithEthtoolStats reads the netdevs' statistics through r instead of the
// ethtool ioctl: replayed captures and tests of hosts that cannot be had
// here (a RoCE LAG's members) answer with what such a host would.
func WithEthtoolStats(r EthtoolStats) HostOption {
	return func(c *hostConfig) error {
		if r == nil {
			return fmt.Errorf("%w: nil ethtool statistics reader", ErrInvalidHostOption)
		}
		c.ethtool, c.ethStats = true, r
		return nil
	}
}

// WithSysfsRoot reads the sysfs mounted at dir instead of /sys (a container
// that mounts the host's at /host/sys, like node_exporter's --path.sysfs).
func WithSysfsRoot(dir string) HostOption {
	return func(c *hostConfig) error {
		if dir == "" {
			return fmt.Errorf("%w: empty sysfs root", ErrInvalidHostOption)
		}
		c.root = dir
		return nil
	}
}

// WithHostClock sets the clock that stamps readings; tests use a fixed one.
func WithHostClock(now func() time.Time) HostOption {
	return func(c *hostConfig) error {
		if now == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidHostOption)
		}
		c.now = now
		return nil
	}
}

// WithHostLogger sets the logger (default slog.Default()).
func WithHostLogger(l *slog.Logger) HostOption {
	return func(c *hostConfig) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidHostOption)
		}
		c.logger = l
		return nil
	}
}

// HostSource reads this host's RDMA ports: sysfs counters through rdmamap,
// the ethtool statistics of each port's netdev, and every
// DefaultConfigInterval the netdev's configuration (config.go). It implements Source;
// the collector's loop paces it.
//
// It never sets Reading.Restart: a new process starts a new delta engine,
// which has no baseline to lose.
type HostSource struct {
	node   string
	now    func() time.Time
	logger *slog.Logger
	sysfs  *SysfsReader

	// mu serialises Next and Close: ethErr is per-source state.
	mu  sync.Mutex
	eth EthtoolStats // nil when ethtool is off or after Close
	// netDir is <root>/class/net: netdev ifindex, LAG members.
	netDir string
	// netErr is the last netdev read error per netdev, logged like ethErr.
	netErr map[string]string
	// ethErr is the last ethtool error per netdev, so a netdev that keeps
	// failing is logged at warn once and at debug after that.
	ethErr map[string]string
	// cfg reads the ports' configuration every configEvery (config.go).
	cfg    hostConfigState
	closed bool
	// skipped counts, by Skip reason, the ports and files the scrapes left
	// out since the source was made: a host whose ports are never read is
	// seen on /metrics, not only in debug logs.
	skipped map[string]uint64
}

var _ Source = (*HostSource)(nil)

// EthtoolStats is what the host source needs of an EthtoolReader; tests
// feed it what a host they cannot have (a LAG's members) would answer.
type EthtoolStats interface {
	Stats(netdev string) (map[string]uint64, error)
	Close() error
}

// NewHostSource returns a source for node (the name readings carry; usually
// the host name).
func NewHostSource(node string, opts ...HostOption) (*HostSource, error) {
	if node == "" {
		return nil, fmt.Errorf("%w: empty node name", ErrInvalidHostOption)
	}
	cfg := hostConfig{ethtool: true, root: sysfsDefaultRoot, now: time.Now, logger: slog.Default(), configEvery: DefaultConfigInterval}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	h := &HostSource{
		node:   node,
		now:    cfg.now,
		logger: cfg.logger,
		sysfs:  newSysfsReader(cfg.root, cfg.logger, cfg.now),
		ethErr: make(map[string]string),
		netDir: filepath.Join(cfg.root, configNetDir),
		netErr: make(map[string]string),
		cfg:    hostConfigState{reader: NewConfigReader(cfg.root), every: cfg.configEvery, failed: make(map[string]string)},
	}
	switch {
	case cfg.ethStats != nil:
		h.eth = cfg.ethStats
	case cfg.ethtool:
		eth, err := NewEthtoolReader()
		if err != nil {
			return nil, fmt.Errorf("host source %s: %w", node, err)
		}
		h.eth = eth
	}
	return h, nil
}

// Next scrapes the host once. With no RDMA device it returns an empty
// reading (Node and Time set) together with an error wrapping ErrNoDevices,
// so the caller can log it and keep polling. An ethtool failure on one
// netdev leaves that port's Ethtool nil and is logged; it never fails the
// scrape.
func (h *HostSource) Next(ctx context.Context) (*Reading, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("host source %s: closed", h.node)
	}
	start := h.now()
	sc, err := h.sysfs.Read(ctx)
	if err != nil && !errors.Is(err, ErrNoDevices) {
		return nil, fmt.Errorf("host source %s: %w", h.node, err)
	}
	rd := &Reading{Node: h.node, Time: start, Devices: sc.Devices, Ports: sc.Ports}
	h.countSkipped(sc)
	if err != nil {
		return rd, err
	}
	h.readNetdevs(rd)
	if h.eth != nil {
		h.readEthtool(rd.Ports)
	}
	h.readConfig(ctx, rd)
	return rd, nil
}

func (h *HostSource) countSkipped(sc *SysfsScrape) {
	if len(sc.Skipped) == 0 && len(sc.SkippedFiles) == 0 {
		return
	}
	if h.skipped == nil {
		h.skipped = map[string]uint64{}
	}
	for _, s := range sc.Skipped {
		h.skipped[s.Why]++
	}
	for why, n := range sc.SkippedFiles {
		h.skipped[why] += uint64(n)
	}
}

// Skipped returns, by reason (the Skip constants), how many ports and
// files the scrapes so far left out.
func (h *HostSource) Skipped() map[string]uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.skipped)
}

// readNetdevs reads each RoCE port's netdev ifindex (the delta engine's
// restart signal) and, for a LAG, its members: their ifindexes, and a
// port sample for each member that is up, appended to the reading.
func (h *HostSource) readNetdevs(rd *Reading) {
	n := len(rd.Ports)
	for i := 0; i < n; i++ {
		p := &rd.Ports[i]
		if p.Netdev == "" {
			continue
		}
		f, err := readNetdevFacts(h.netDir, p.Netdev)
		h.noteNetdevErr(p.Netdev, err)
		p.Ifindex = f.ifindex
		if len(f.members) == 0 {
			continue
		}
		p.members = f.members
		p.LowerIfindex = make([]int, len(f.members))
		for j, m := range f.members {
			mf, err := readNetdevFacts(h.netDir, m)
			h.noteNetdevErr(m, err)
			p.LowerIfindex[j] = mf.ifindex
		}
		for _, m := range f.members {
			if mr, ok := memberReading(&rd.Ports[i], h.netDir, m); ok {
				mr.lagMember = true
				rd.Ports = append(rd.Ports, mr)
			}
		}
	}
}

func (h *HostSource) noteNetdevErr(netdev string, err error) {
	if err == nil {
		delete(h.netErr, netdev)
		return
	}
	if msg := err.Error(); h.netErr[netdev] != msg {
		h.logger.Warn("netdev facts unreadable", "netdev", netdev, "err", err)
		h.netErr[netdev] = msg
	}
}

// readEthtool fills each port's Ethtool. A netdev shared by several ports
// (a RoCE LAG bond) is read once per scrape; each port gets its own copy so
// that nobody downstream mutates another port's map.
//
// A LAG port gets the sum of its members' statistics but the physical-layer
// ones, each member sample that member's physical-layer ones (bond.go).
// When a member cannot be read the LAG's sum is unknown for the scrape
// (nil): a sum without it would fall and read as a restart.
func (h *HostSource) readEthtool(ports []PortReading) {
	seen := make(map[string]map[string]uint64)
	read := func(p *PortReading, netdev string) (map[string]uint64, bool) {
		if stats, ok := seen[netdev]; ok {
			return stats, stats != nil
		}
		stats, err := h.eth.Stats(netdev)
		if err != nil {
			stats = nil
			msg := err.Error()
			if h.ethErr[netdev] != msg {
				h.logger.Warn("ethtool statistics unreadable", "device", p.Device, "port", p.Port, "netdev", netdev, "err", err)
			} else {
				h.logger.Debug("ethtool statistics still unreadable", "device", p.Device, "port", p.Port, "netdev", netdev, "err", err)
			}
			h.ethErr[netdev] = msg
		} else if _, failed := h.ethErr[netdev]; failed {
			h.logger.Info("ethtool statistics readable again", "netdev", netdev)
			delete(h.ethErr, netdev)
		}
		seen[netdev] = stats
		return stats, stats != nil
	}
	for i := range ports {
		p := &ports[i]
		switch {
		case p.Netdev == "":
		case len(p.members) > 0:
			all := make(map[string]map[string]uint64, len(p.members))
			for _, m := range p.members {
				stats, ok := read(p, m)
				if !ok {
					all = nil
					break
				}
				all[m] = stats
			}
			if all != nil {
				p.Ethtool, _ = sumBondStats(p.members, all)
			}
		case p.lagMember:
			if stats, ok := read(p, p.Netdev); ok {
				_, phy := sumBondStats([]string{p.Netdev}, map[string]map[string]uint64{p.Netdev: stats})
				p.Ethtool = phy[p.Netdev]
			}
		default:
			if stats, ok := read(p, p.Netdev); ok {
				p.Ethtool = maps.Clone(stats)
			}
		}
	}
}

// Close releases the ethtool socket. Closing twice is harmless.
func (h *HostSource) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.eth == nil {
		return nil
	}
	err := h.eth.Close()
	h.eth = nil
	return err
}
