package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Collector reads a source, runs the delta engine and publishes one batch per
// node per reading, plus the node's inventory whenever it changes.
type Collector struct {
	src      Source
	engine   *Engine
	pub      *Publisher
	interval time.Duration
	flushFor time.Duration
	log      *slog.Logger
	onScrape func(Scrape)

	inventory     map[string]map[portKey]schemas.PortInventory // node -> ports as last sent
	inventorySent map[string]time.Time                         // node -> data time of the last inventory
	noDevices     bool
}

// Config configures a Collector.
type Config struct {
	// Interval paces a live source; 0 reads as fast as the source yields
	// (a trace).
	Interval time.Duration
	Log      *slog.Logger
	// FlushTimeout is how long a stopping collector waits for the acks of
	// what is in flight before it spools (or counts as lost) the rest;
	// 0 means 10 s.
	FlushTimeout time.Duration
	// OnScrape, when set, is called after every reading from the
	// collector's own goroutine: what self-monitoring exports.
	OnScrape func(Scrape)
}

// Scrape is one reading as self-monitoring sees it.
type Scrape struct {
	Duration time.Duration // reading the source
	Err      error         // the source's error, nil when it read
	Ports    int           // ports in the reading
	// Devices are the RDMA devices the reading found: 0 on a host without
	// any (Err wraps ErrNoDevices then), which is a fact about the host,
	// not a failed scrape.
	Devices int
	// Skipped counts, by reason, the ports and files left out since the
	// start, for a source that says (HostSource.Skipped).
	Skipped map[string]uint64
	// Totals since the collector started.
	Batches, Samples uint64
	Dropped          DropCount
	// ConfigErrors counts the port configuration reads that failed, for a
	// source that reads configuration (HostSource.ConfigErrors).
	ConfigErrors uint64
}

// New returns a collector.
func New(src Source, engine *Engine, pub *Publisher, cfg Config) *Collector {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	flushFor := cfg.FlushTimeout
	if flushFor <= 0 {
		flushFor = 10 * time.Second
	}
	return &Collector{src: src, engine: engine, pub: pub, interval: cfg.Interval, flushFor: flushFor, log: log, onScrape: cfg.OnScrape, inventory: map[string]map[portKey]schemas.PortInventory{}, inventorySent: map[string]time.Time{}}
}

// Run reads until the source ends (io.EOF: returns nil after flushing) or
// ctx is cancelled.
func (c *Collector) Run(ctx context.Context) error {
	var tick <-chan time.Time
	if c.interval > 0 {
		t := time.NewTicker(c.interval)
		defer t.Stop()
		tick = t.C
	}
	for first := true; ; first = false {
		if tick != nil && !first {
			select {
			case <-ctx.Done():
				return c.flush()
			case <-tick:
			}
		}
		began := time.Now()
		r, err := c.src.Next(ctx)
		if c.onScrape != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
			sc := Scrape{Duration: time.Since(began), Err: err, Batches: c.pub.Published(), Samples: c.engine.Stats().Samples, Dropped: c.pub.Dropped()}
			if r != nil {
				sc.Ports = len(r.Ports)
				sc.Devices = readingDevices(r)
			}
			if sk, ok := c.src.(interface{ Skipped() map[string]uint64 }); ok {
				sc.Skipped = sk.Skipped()
			}
			if ce, ok := c.src.(interface{ ConfigErrors() uint64 }); ok {
				sc.ConfigErrors = ce.ConfigErrors()
			}
			c.onScrape(sc)
		}
		switch {
		case errors.Is(err, io.EOF):
			return c.flush()
		case ctx.Err() != nil:
			return c.flush()
		case errors.Is(err, ErrNoDevices):
			// Devices can appear later (driver load, hot plug): say so once
			// and keep looking.
			if !c.noDevices {
				c.log.Warn("no RDMA devices on this host; the collector keeps running and will pick them up when they appear", "err", err)
				c.noDevices = true
			}
			continue
		case err != nil:
			// What was read before the error is still sent (a malformed
			// trace line stops the reading, not what it accepted).
			return errors.Join(err, c.flush())
		}
		if c.noDevices && len(r.Ports) > 0 {
			c.log.Info("RDMA devices found", "ports", len(r.Ports))
			c.noDevices = false
		}
		if err := c.publish(ctx, r); err != nil {
			if ctx.Err() != nil {
				// Stopped while waiting for NATS: what is in flight is
				// spooled or counted, never dropped silently.
				return c.flush()
			}
			return err
		}
	}
}

// readingDevices counts the RDMA devices of a reading: those the host
// source listed, or for a source that lists none (trace, simulation) those
// its ports name.
func readingDevices(r *Reading) int {
	if len(r.Devices) > 0 {
		return len(r.Devices)
	}
	seen := map[string]bool{}
	for _, p := range r.Ports {
		seen[p.Device] = true
	}
	return len(seen)
}

func (c *Collector) flush() error {
	// The caller's ctx may be done; give in-flight acks a moment of their own.
	ctx, cancel := context.WithTimeout(context.Background(), c.flushFor)
	defer cancel()
	return c.pub.Flush(ctx)
}

func (c *Collector) publish(ctx context.Context, r *Reading) error {
	if len(r.Ports) > maxBatchPorts {
		// No host has this many RDMA ports: a broken or hostile source.
		// The first ports go on; the rest are refused, loudly, before the
		// inventory too is built from them.
		c.log.Error("reading has more ports than one node may publish; the rest are refused", "node", r.Node, "ports", len(r.Ports), "max", maxBatchPorts, "refused", len(r.Ports)-maxBatchPorts)
		r.Ports = r.Ports[:maxBatchPorts]
	}
	if inv := c.inventoryChange(r); inv != nil {
		if err := c.pub.PublishInventory(ctx, inv); err != nil {
			return err
		}
	}
	b := c.engine.Apply(r)
	if b == nil {
		return nil
	}
	data, fits, err := c.pub.encodeBatch(b)
	if err != nil {
		return err
	}
	if fits {
		if err := c.pub.send(ctx, schemas.CountersSubject(b.Node), b.MsgID(), data, len(b.Ports)); err != nil {
			return fmt.Errorf("publish %s: %w", b.MsgID(), err)
		}
		return nil
	}
	parts := c.engine.Split(b, func(part *schemas.CounterBatch) bool {
		_, ok, _ := c.pub.encodeBatch(part)
		return ok
	})
	c.log.Info("batch larger than one message, sent in parts", "node", b.Node, "ports", len(b.Ports), "bytes", len(data), "parts", len(parts))
	for _, part := range parts {
		err := c.pub.PublishBatch(ctx, part)
		if errors.Is(err, ErrMessageTooLarge) {
			c.pub.dropped.Messages++
			c.pub.dropped.Samples += uint64(len(part.Ports))
			c.log.Error("port sample larger than one message, dropped", "node", part.Node, "device", part.Ports[0].Device, "port", part.Ports[0].Port, "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("publish %s: %w", part.MsgID(), err)
		}
	}
	return nil
}

// samePortInventory compares two inventory entries, the config by value.
func samePortInventory(a, b schemas.PortInventory) bool {
	ac, bc := a.Config, b.Config
	a.Config, b.Config = nil, nil
	return a == b && ac.Equal(bc)
}

// InventoryRefresh is how often (data time) a node's unchanged inventory is
// published again.
const InventoryRefresh = 5 * time.Minute

// inventoryChange returns the node's whole inventory when a port appeared or
// changed since it was last sent, or InventoryRefresh has passed. A reading may hold only some of the node's
// ports (a trace line group), so ports are merged, never dropped.
func (c *Collector) inventoryChange(r *Reading) *schemas.Inventory {
	if len(r.Ports) == 0 {
		return nil // a restart marker or a host without devices: nothing to describe
	}
	known := c.inventory[r.Node]
	if known == nil {
		known = map[portKey]schemas.PortInventory{}
		c.inventory[r.Node] = known
	}
	changed := false
	for _, p := range r.Ports {
		d := r.Devices[p.Device]
		pi := schemas.PortInventory{
			Device: p.Device, Port: p.Port, Netdev: p.Netdev, LinkLayer: p.LinkLayer, State: p.State, Rate: p.Rate,
			FWVersion: d.FWVersion, BoardID: d.BoardID, HCAType: d.HCAType, NodeGUID: d.NodeGUID,
		}
		k := portKey{p.Device, p.Port}
		old, ok := known[k]
		pi.Config = old.Config
		if p.Config != nil {
			pi.Config = old.Config.Merge(p.Config)
		}
		if !ok || !samePortInventory(old, pi) {
			known[k] = pi
			changed = true
		}
	}
	// Unchanged ports are re-sent now and then so the inventory's last_seen
	// tells a live port from one that vanished.
	if !changed && r.Time.Sub(c.inventorySent[r.Node]) < InventoryRefresh {
		return nil
	}
	c.inventorySent[r.Node] = r.Time
	ports := make([]schemas.PortInventory, 0, len(known))
	for _, p := range known {
		ports = append(ports, p)
	}
	sort.Slice(ports, func(i, j int) bool {
		if ports[i].Device != ports[j].Device {
			return ports[i].Device < ports[j].Device
		}
		return ports[i].Port < ports[j].Port
	})
	return &schemas.Inventory{Node: r.Node, TimeMs: r.Time.UnixMilli(), Ports: ports}
}
