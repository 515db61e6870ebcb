package engine

import (
	"sort"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// fabric holds the processor's port states and implements
// processor.FabricView. Only the processing goroutine touches it.
type fabric struct {
	topo     *schemas.Topology
	complete bool
	wm       schemas.Millis
	ports    map[schemas.PortID]*processor.PortState
	// byNode lists each node's ports, the same states as ports. A counter
	// batch is one node's, so process looks its node up once and each port
	// in a short slice: a lookup per port in ports (tens of thousands of
	// entries, string keys) missed the cache on most samples and took 7-8.5 %
	// of the processor's CPU at 30 000 ports, 2.4 % with the index
	// (processor-node-index).
	byNode map[string][]nodePort
	// order keeps the ids sorted so that Ports iterates the same way on
	// every run; new ports are rare after the first interval.
	order []schemas.PortID
	// configs is the fleet's port configuration (inventory.go).
	configs *configBook
}

func newFabric(topo *schemas.Topology, complete bool) *fabric {
	return &fabric{topo: topo, complete: complete, ports: make(map[schemas.PortID]*processor.PortState),
		byNode: make(map[string][]nodePort), configs: newConfigBook()}
}

// nodePort is one entry of fabric.byNode: the port's key within its node
// next to its state, so a scan reads one short array.
type nodePort struct {
	device string
	port   int
	state  *processor.PortState
}

// find returns the state of (device, port) among a node's ports, nil when
// the node has no such port.
func find(ports []nodePort, device string, port int) *processor.PortState {
	for i := range ports {
		if ports[i].port == port && ports[i].device == device {
			return ports[i].state
		}
	}
	return nil
}

func portLess(a, b schemas.PortID) bool {
	if a.Node != b.Node {
		return a.Node < b.Node
	}
	if a.Device != b.Device {
		return a.Device < b.Device
	}
	return a.Port < b.Port
}

func (f *fabric) get(id schemas.PortID) *processor.PortState {
	if p, ok := f.ports[id]; ok {
		return p
	}
	p := processor.NewPortState(id)
	f.ports[id] = p
	f.byNode[id.Node] = append(f.byNode[id.Node], nodePort{device: id.Device, port: id.Port, state: p})
	i := sort.Search(len(f.order), func(i int) bool { return !portLess(f.order[i], id) })
	f.order = append(f.order, schemas.PortID{})
	copy(f.order[i+1:], f.order[i:])
	f.order[i] = id
	return p
}

// evict forgets ports whose last sample is older than before.
func (f *fabric) evict(before schemas.Millis) int {
	var n int
	stale := func(p *processor.PortState) bool { return p.LastTime < before }
	f.order, n = evictOrdered(f.order, f.ports, stale)
	if n == 0 {
		return 0
	}
	for node, ports := range f.byNode {
		kept := ports[:0]
		for _, np := range ports {
			if !stale(np.state) {
				kept = append(kept, np)
			}
		}
		clear(ports[len(kept):])
		if len(kept) == 0 {
			delete(f.byNode, node)
		} else {
			f.byNode[node] = kept
		}
	}
	return n
}

// evictOrdered deletes from m, and from its sorted key list order, every
// entry stale reports; it returns the shortened list (same backing array)
// and how many went.
func evictOrdered[V any](order []schemas.PortID, m map[schemas.PortID]V, stale func(V) bool) ([]schemas.PortID, int) {
	kept := order[:0]
	n := 0
	for _, id := range order {
		if stale(m[id]) {
			delete(m, id)
			n++
			continue
		}
		kept = append(kept, id)
	}
	clear(order[len(kept):])
	return kept, n
}

func (f *fabric) Topology() *schemas.Topology { return f.topo }
func (f *fabric) Watermark() schemas.Millis   { return f.wm }
func (f *fabric) Complete() bool              { return f.complete }

func (f *fabric) Port(id schemas.PortID) (*processor.PortState, bool) {
	p, ok := f.ports[id]
	return p, ok
}

func (f *fabric) Ports(fn func(*processor.PortState) bool) {
	for _, id := range f.order {
		if !fn(f.ports[id]) {
			return
		}
	}
}
