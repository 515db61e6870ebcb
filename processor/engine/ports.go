package engine

import (
	"fmt"
	"strconv"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Ports per node.
//
// Every port a counter batch names becomes a tracked port (its windows,
// its detectors' state), and one collector credential could name as many
// as it liked: 150 batches of 1024 new ports each grew a processor to
// 154 631 tracked ports and its RSS from 35 to 159 MB, and it would have
// gone on (the spoofed-node check keeps a credential to its own node, not
// to a plausible number of ports). So a node may have as many tracked
// ports as its inventory lists (the collector publishes the inventory of
// every port it reads, inventory.go), at most schemas.MaxBatchPorts; while
// no inventory of the node is known, Config.MaxPortsPerNode (default 256:
// a real host has a few dozen RDMA ports at most). A sample of a further
// new port is refused: counted (Stats.PortsPerNodeRefused, the metric
// rdmawatch_processor_samples_refused_total{reason="ports_per_node"}), and
// its message dead-lettered with the reason once per node, not for every
// batch while it lasts. The ports already tracked keep going; a port that
// falls silent is forgotten at PortTTL and makes room.
//
// Which inventory: the node's newest one read with a data time up to the
// sample's. A collector publishes a node's inventory before the counters
// of the reading that showed a new port, with the same data time, so a
// port hot-plugged (or a trace whose readings name a few ports each) is
// allowed by the inventory that lists it once the processor has read it;
// it reads the inventory stream every sync step (a quarter of an interval,
// inventory.go). A sample of the new port processed before that read is
// refused, and the port is tracked from its next interval. Unlike the
// configs, which are applied at the watermark so that a replay decides
// exactly as the live run did, this bound may therefore refuse a new
// port's first sample in one run and not in another: it is a guard
// against abuse, not a detector's input.

// DefaultMaxPortsPerNode is Config.MaxPortsPerNode's default.
const DefaultMaxPortsPerNode = 256

// ReasonPortsPerNode starts the dead letter's reason of a message whose
// new ports are beyond their node's bound.
const ReasonPortsPerNode = "ports per node"

// portLimit is how many tracked ports node may have at data time t, and
// whether its inventory says so.
func (p *Processor) portLimit(node string, t schemas.Millis) (int, bool) {
	if n, ok := p.fabric.configs.inventoryPorts(node, t); ok {
		return n, true
	}
	return p.cfg.MaxPortsPerNode, false
}

// tooManyPorts notes the samples of one message refused for their node's
// bound, for the dead letter's reason.
type tooManyPorts struct {
	n             int
	first         string
	tracked       int
	limit         int
	fromInventory bool
}

func (tm *tooManyPorts) add(device string, port, tracked, limit int, fromInventory bool) {
	tm.n++
	if tm.n == 1 {
		tm.first = device + "/" + strconv.Itoa(port)
		tm.tracked, tm.limit, tm.fromInventory = tracked, limit, fromInventory
	}
}

func (tm *tooManyPorts) reason(node string, total int) string {
	if tm.n == 0 {
		return ""
	}
	bound := "its inventory lists " + strconv.Itoa(tm.limit)
	if !tm.fromInventory {
		bound = fmt.Sprintf("no inventory of it is known, and the bound without one is %d (processor --max-ports-per-node)", tm.limit)
	}
	return fmt.Sprintf("%s: node %s has %d ports tracked and %s; %d of the message's %d samples refused, of new ports beyond that (first: port %s); the node's further refusals are counted (rdmawatch_processor_samples_refused_total{reason=\"ports_per_node\"}), not dead-lettered",
		ReasonPortsPerNode, node, tm.tracked, bound, tm.n, total, tm.first)
}

// refusedOnce reports whether node's refusal for reason is to be
// dead-lettered now: the first time only.
func (p *Processor) refusedOnce(node, reason string) bool {
	k := refusedKey{node: node, reason: reason}
	if _, done := p.refusedNodes[k]; done {
		return false
	}
	if p.refusedNodes == nil {
		p.refusedNodes = map[refusedKey]struct{}{}
	}
	p.refusedNodes[k] = struct{}{}
	return true
}

type refusedKey struct{ node, reason string }

// nodeInventory is what the latest inventory of a node says of its ports.
type nodeInventory struct {
	time  schemas.Millis
	boot  string
	ports map[portKey]struct{}
}

type portKey struct {
	device string
	port   int
}

type queuedInventory struct {
	time  schemas.Millis
	node  string
	boot  string
	ports []portKey
}

// queueInventoryPorts queues the ports an inventory message lists, to be
// counted at the watermark (applyInventoryPorts). An inventory too large
// for one message comes in parts with the same node, boot and time: they
// add up.
func (b *configBook) queueInventoryPorts(inv *schemas.Inventory) {
	q := queuedInventory{time: schemas.Millis(inv.TimeMs), node: inv.Node, boot: inv.BootID}
	for _, p := range inv.Ports {
		q.ports = append(q.ports, portKey{p.Device, p.Port})
	}
	i := len(b.invQueue)
	for i > 0 && b.invQueue[i-1].time > q.time {
		i--
	}
	b.invQueue = append(b.invQueue, queuedInventory{})
	copy(b.invQueue[i+1:], b.invQueue[i:])
	b.invQueue[i] = q
}

// applyInventoryPorts counts the ports of the inventories read at or before
// wm: a node's latest inventory (by data time) replaces an older one, its
// parts add up; the count stops at schemas.MaxBatchPorts, the most a
// collector reads of one host.
func (b *configBook) applyInventoryPorts(wm schemas.Millis) {
	n := 0
	for n < len(b.invQueue) && b.invQueue[n].time <= wm {
		n++
	}
	for i := range b.invQueue[:n] {
		q := &b.invQueue[i]
		cur := b.nodes[q.node]
		switch {
		case cur == nil || q.time > cur.time || (q.time == cur.time && q.boot != cur.boot):
			if b.nodes == nil {
				b.nodes = map[string]*nodeInventory{}
			}
			cur = &nodeInventory{time: q.time, boot: q.boot, ports: map[portKey]struct{}{}}
			b.nodes[q.node] = cur
		case q.time < cur.time:
			continue // an older reading than the one applied
		}
		for _, k := range q.ports {
			if len(cur.ports) >= schemas.MaxBatchPorts {
				break
			}
			cur.ports[k] = struct{}{}
		}
	}
	clear(b.invQueue[:n])
	b.invQueue = b.invQueue[n:]
}

// inventoryPorts is how many ports node's newest inventory read with a
// data time up to t lists: the one applied, or a later one still queued
// (its parts added up), at most schemas.MaxBatchPorts.
func (b *configBook) inventoryPorts(node string, t schemas.Millis) (int, bool) {
	cur, ok := b.nodes[node]
	var qt schemas.Millis
	var qboot string
	var queued map[portKey]struct{}
	for i := range b.invQueue {
		q := &b.invQueue[i]
		if q.time > t {
			break // sorted by time
		}
		if q.node != node || (ok && q.time < cur.time) {
			continue
		}
		if queued == nil || q.time > qt || q.boot != qboot {
			qt, qboot, queued = q.time, q.boot, map[portKey]struct{}{}
			if ok && q.time == cur.time && q.boot == cur.boot {
				// A later part of the inventory applied.
				for k := range cur.ports {
					queued[k] = struct{}{}
				}
			}
		}
		for _, k := range q.ports {
			if len(queued) >= schemas.MaxBatchPorts {
				break
			}
			queued[k] = struct{}{}
		}
	}
	switch {
	case queued != nil:
		return len(queued), true
	case ok:
		return len(cur.ports), true
	}
	return 0, false
}

// evictInventoryPorts forgets the port counts of nodes no inventory
// confirmed since before: the bound falls back to MaxPortsPerNode.
func (b *configBook) evictInventoryPorts(before schemas.Millis) {
	for node, cur := range b.nodes {
		if cur.time < before {
			delete(b.nodes, node)
		}
	}
}
