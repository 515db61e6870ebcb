package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"
)

// ErrInvalidHostOption is wrapped by every HostOption that rejects its value.
var ErrInvalidHostOption = errors.New("invalid host source option")

// HostOption configures a HostSource.
type HostOption func(*hostConfig) error

type hostConfig struct {
	ethtool     bool
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
	eth *EthtoolReader // nil when ethtool is off or after Close
	// ethErr is the last ethtool error per netdev, so a netdev that keeps
	// failing is logged at warn once and at debug after that.
	ethErr map[string]string
	// cfg reads the ports' configuration every configEvery (config.go).
	cfg    hostConfigState
	closed bool
}

var _ Source = (*HostSource)(nil)

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
		cfg:    hostConfigState{reader: NewConfigReader(cfg.root), every: cfg.configEvery, failed: make(map[string]string)},
	}
	if cfg.ethtool {
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
	if err != nil {
		return rd, err
	}
	if h.eth != nil {
		h.readEthtool(rd.Ports)
	}
	h.readConfig(ctx, rd)
	return rd, nil
}

// readEthtool fills each port's Ethtool. A netdev shared by several ports
// (a RoCE LAG bond) is read once per scrape; each port gets its own copy so
// that nobody downstream mutates another port's map.
func (h *HostSource) readEthtool(ports []PortReading) {
	seen := make(map[string]map[string]uint64)
	for i := range ports {
		p := &ports[i]
		if p.Netdev == "" {
			continue
		}
		if stats, ok := seen[p.Netdev]; ok {
			if stats != nil {
				p.Ethtool = maps.Clone(stats)
			}
			continue
		}
		stats, err := h.eth.Stats(p.Netdev)
		seen[p.Netdev] = stats
		if err != nil {
			msg := err.Error()
			if h.ethErr[p.Netdev] != msg {
				h.logger.Warn("ethtool statistics unreadable", "device", p.Device, "port", p.Port, "netdev", p.Netdev, "err", err)
			} else {
				h.logger.Debug("ethtool statistics still unreadable", "device", p.Device, "port", p.Port, "netdev", p.Netdev, "err", err)
			}
			h.ethErr[p.Netdev] = msg
			continue
		}
		if _, failed := h.ethErr[p.Netdev]; failed {
			h.logger.Info("ethtool statistics readable again", "netdev", p.Netdev)
			delete(h.ethErr, p.Netdev)
		}
		p.Ethtool = stats
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
