package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Switch tiers of topology format v1.
const (
	TierLeaf  = "leaf"
	TierSpine = "spine"
	TierCore  = "core"
)

// ErrInvalidTopology is wrapped by every validation error of ParseTopology.
var ErrInvalidTopology = errors.New("invalid topology")

// PortID names a host port: node, RDMA device and port number (from 1). It is
// comparable, so it keys maps of per-port state.
type PortID struct {
	Node   string
	Device string
	Port   int
}

func (p PortID) String() string { return fmt.Sprintf("%s/%s/%d", p.Node, p.Device, p.Port) }

// Subject is the port-scope event subject of the port.
func (p PortID) Subject() Subject { return Subject{Node: p.Node, Device: p.Device, Port: p.Port} }

// TopologySwitch is a switch of topology format v1.
type TopologySwitch struct {
	Name string `json:"name"`
	Tier string `json:"tier"`
}

// TopologyLink is a cable of topology format v1: two endpoints, a host
// endpoint "node/device/port" or a switch endpoint "switch/port".
type TopologyLink struct {
	A string `json:"a"`
	B string `json:"b"`
}

// Endpoint is one parsed end of a link: a host port, or a switch port.
type Endpoint struct {
	Host       PortID // set for a host endpoint
	Switch     string // set for a switch endpoint
	SwitchPort string
}

// IsHost reports whether the endpoint is a host port.
func (e Endpoint) IsHost() bool { return e.Switch == "" }

func (e Endpoint) String() string {
	if e.IsHost() {
		return e.Host.String()
	}
	return e.Switch + "/" + e.SwitchPort
}

// Topology is a parsed and validated topology format v1 file with the graph
// built from it. It is read-only after parsing and safe for concurrent use.
type Topology struct {
	Fabric   string           `json:"fabric"`
	Switches []TopologySwitch `json:"switches"`
	Links    []TopologyLink   `json:"links"`
	// Racks is optional (added to v1 as an optional field): rack name ->
	// the nodes standing in it. It names nodes, not switches, because in a
	// rail-optimised fabric one host's ports reach several leaves while the
	// host still stands in one rack. Capacity queries group by it.
	Racks map[string][]string `json:"racks,omitempty"`

	tier map[string]string
	// rackOf is the rack of each node "racks" names.
	rackOf map[string]string
	// attach says what the other end of a host port's single cable is.
	attach map[PortID]Endpoint
	// onSwitch lists the host ports cabled to a switch, sorted.
	onSwitch map[string][]PortID
	// nodes holds every node a host endpoint names.
	nodes map[string]bool
	// The switch graph: switches by index, each with its neighbours sorted
	// by name. Memory is linear in switches and links; distances are
	// computed per source switch when asked (hopsFrom) and cached.
	swIndex map[string]int32
	swNames []string
	swAdj   [][]int32
	hops    *hopCache
}

// hopCache keeps the distances from the source switches last asked about.
// An all-pairs table grows with the square of the switch count (a
// 6000-switch ring took 1.77 GB); this one is bounded by hopCacheEntries.
type hopCache struct {
	mu      sync.Mutex
	bySrc   map[int32][]int32
	entries int
	limit   int // hopCacheEntries; tests make it small
}

// hopCacheEntries bounds the cached distances (int32 each, 16 MiB): every
// source of a 4000-switch fabric, or the few hundred a storm asks about in
// a larger one.
const hopCacheEntries = 1 << 22

// TopologyError says which link and which endpoint of a topology is wrong.
type TopologyError struct {
	Link     int    // index in "links", -1 when the error is not about a link
	Endpoint string // "a" or "b", empty when the error is about the whole link
	Value    string
	Reason   string
}

func (e *TopologyError) Error() string {
	switch {
	case e.Link < 0:
		return "topology: " + e.Reason
	case e.Endpoint == "":
		return fmt.Sprintf("topology: links[%d]: %s", e.Link, e.Reason)
	}
	return fmt.Sprintf("topology: links[%d].%s %q: %s", e.Link, e.Endpoint, e.Value, e.Reason)
}

func (e *TopologyError) Unwrap() error { return ErrInvalidTopology }

// LoadTopology reads a topology file.
func LoadTopology(path string) (*Topology, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	defer f.Close()
	t, err := ParseTopology(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseTopology parses and validates topology format v1. Unknown fields are
// accepted: the format grows by new optional fields.
func ParseTopology(r io.Reader) (*Topology, error) {
	dec := json.NewDecoder(r)
	var t Topology
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("%w: topology: %v", ErrInvalidTopology, err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, &TopologyError{Link: -1, Reason: "data after the topology object"}
	}
	if err := t.build(); err != nil {
		return nil, err
	}
	return &t, nil
}

// ParseEndpoint parses one link endpoint. A name whose first element is a
// known switch is a switch endpoint (its port may contain '/', as in
// "Ethernet1/1"); anything else must be node/device/port.
func (t *Topology) ParseEndpoint(s string) (Endpoint, error) {
	if s == "" {
		return Endpoint{}, errors.New("empty endpoint")
	}
	first, rest, ok := strings.Cut(s, "/")
	if _, isSwitch := t.tier[first]; isSwitch {
		if !ok || rest == "" {
			return Endpoint{}, fmt.Errorf("switch endpoint needs switch/port")
		}
		return Endpoint{Switch: first, SwitchPort: rest}, nil
	}
	parts := strings.Split(s, "/")
	switch len(parts) {
	case 3:
	case 2:
		return Endpoint{}, fmt.Errorf("unknown switch %q", parts[0])
	default:
		return Endpoint{}, fmt.Errorf("want node/device/port or switch/port")
	}
	if parts[0] == "" || parts[1] == "" {
		return Endpoint{}, fmt.Errorf("empty node or device")
	}
	port, err := strconv.Atoi(parts[2])
	if err != nil || port < 1 {
		return Endpoint{}, fmt.Errorf("port %q is not a number from 1", parts[2])
	}
	return Endpoint{Host: PortID{Node: parts[0], Device: parts[1], Port: port}}, nil
}

// build checks the parsed topology and indexes it: switches first (their
// names decide which endpoints are switch ports), then the links.
func (t *Topology) build() error {
	if err := t.indexSwitches(); err != nil {
		return err
	}
	if err := t.indexLinks(); err != nil {
		return err
	}
	if len(t.nodes) == 0 {
		reason := "no link names a host port (node/device/port): there is nothing to watch"
		if len(t.Switches) == 0 && len(t.Links) == 0 {
			reason = "no switches and no links (a null or empty topology)"
		}
		return &TopologyError{Link: -1, Reason: reason}
	}
	if err := t.indexRacks(); err != nil {
		return err
	}
	for sw := range t.onSwitch {
		sortPorts(t.onSwitch[sw])
	}
	for i, adj := range t.swAdj {
		// Sorted by name, without the repeats of parallel cables.
		sort.Slice(adj, func(a, b int) bool { return t.swNames[adj[a]] < t.swNames[adj[b]] })
		t.swAdj[i] = slices.Compact(adj)
	}
	return nil
}

// indexRacks checks "racks": a rack needs a name, a node stands in one
// rack, and a node must be one a link names (a misspelt node would
// otherwise silently stay out of its rack).
func (t *Topology) indexRacks() error {
	t.rackOf = make(map[string]string)
	names := make([]string, 0, len(t.Racks))
	for r := range t.Racks {
		names = append(names, r)
	}
	sort.Strings(names) // errors name the same rack on every run
	for _, r := range names {
		if r == "" {
			return &TopologyError{Link: -1, Reason: "racks: a rack with an empty name"}
		}
		for i, n := range t.Racks[r] {
			switch prev, dup := t.rackOf[n]; {
			case dup:
				return &TopologyError{Link: -1, Reason: fmt.Sprintf("racks[%q][%d] %q: node already in rack %q", r, i, n, prev)}
			case !t.nodes[n]:
				return &TopologyError{Link: -1, Reason: fmt.Sprintf("racks[%q][%d] %q: no link names this node", r, i, n)}
			}
			t.rackOf[n] = r
		}
	}
	return nil
}

// indexSwitches checks every switch's name and tier and numbers the
// switches for the hop graph.
func (t *Topology) indexSwitches() error {
	t.tier = make(map[string]string, len(t.Switches))
	for i, sw := range t.Switches {
		switch {
		case sw.Name == "":
			return &TopologyError{Link: -1, Reason: fmt.Sprintf("switches[%d]: empty name", i)}
		case strings.Contains(sw.Name, "/"):
			return &TopologyError{Link: -1, Reason: fmt.Sprintf("switches[%d] %q: name contains '/'", i, sw.Name)}
		}
		switch sw.Tier {
		case TierLeaf, TierSpine, TierCore:
		default:
			return &TopologyError{Link: -1, Reason: fmt.Sprintf("switches[%d] %q: tier %q is not leaf, spine or core", i, sw.Name, sw.Tier)}
		}
		if _, dup := t.tier[sw.Name]; dup {
			return &TopologyError{Link: -1, Reason: fmt.Sprintf("switches[%d]: switch %q listed twice", i, sw.Name)}
		}
		t.tier[sw.Name] = sw.Tier
	}
	t.swNames = make([]string, 0, len(t.Switches))
	t.swIndex = make(map[string]int32, len(t.Switches))
	for _, sw := range t.Switches {
		t.swIndex[sw.Name] = int32(len(t.swNames))
		t.swNames = append(t.swNames, sw.Name)
	}
	t.swAdj = make([][]int32, len(t.swNames))
	t.hops = &hopCache{bySrc: make(map[int32][]int32), limit: hopCacheEntries}
	return nil
}

// indexLinks parses both ends of every link, refuses a port cabled twice
// and a link to itself, and records which host port attaches where and
// which switches are adjacent.
func (t *Topology) indexLinks() error {
	t.attach = make(map[PortID]Endpoint)
	t.onSwitch = make(map[string][]PortID)
	t.nodes = make(map[string]bool)
	used := make(map[string]int) // endpoint -> link index: a port takes one cable
	for i, l := range t.Links {
		var ends [2]Endpoint
		for j, raw := range [2]string{l.A, l.B} {
			name := [2]string{"a", "b"}[j]
			ep, err := t.ParseEndpoint(raw)
			if err != nil {
				return &TopologyError{Link: i, Endpoint: name, Value: raw, Reason: err.Error()}
			}
			key := ep.String()
			if prev, dup := used[key]; dup {
				return &TopologyError{Link: i, Endpoint: name, Value: raw, Reason: fmt.Sprintf("already cabled by links[%d]", prev)}
			}
			used[key] = i
			ends[j] = ep
			if ep.IsHost() {
				t.nodes[ep.Host.Node] = true
			}
		}
		if err := t.connect(i, ends[0], ends[1]); err != nil {
			return err
		}
	}
	return nil
}

// connect records link i between a and b.
func (t *Topology) connect(i int, a, b Endpoint) error {
	switch {
	case a.IsHost() && b.IsHost():
		if a.Host.Node == b.Host.Node {
			return &TopologyError{Link: i, Reason: "links a node to itself"}
		}
		t.attach[a.Host], t.attach[b.Host] = b, a
	case a.IsHost():
		t.attach[a.Host] = b
		t.onSwitch[b.Switch] = append(t.onSwitch[b.Switch], a.Host)
	case b.IsHost():
		t.attach[b.Host] = a
		t.onSwitch[a.Switch] = append(t.onSwitch[a.Switch], b.Host)
	default:
		if a.Switch == b.Switch {
			return &TopologyError{Link: i, Reason: fmt.Sprintf("links switch %q to itself", a.Switch)}
		}
		x, y := t.swIndex[a.Switch], t.swIndex[b.Switch]
		t.swAdj[x] = append(t.swAdj[x], y)
		t.swAdj[y] = append(t.swAdj[y], x)
	}
	return nil
}

// hopsFrom returns the distance in links from switch src to every switch,
// -1 where no path exists, through switches only: hosts do not forward
// fabric traffic. The slice is shared: callers only read it.
func (t *Topology) hopsFrom(src int32) []int32 {
	c := t.hops
	c.mu.Lock()
	dist, ok := c.bySrc[src]
	c.mu.Unlock()
	if ok {
		return dist
	}
	dist = make([]int32, len(t.swNames))
	for i := range dist {
		dist[i] = -1
	}
	dist[src] = 0
	queue := []int32{src}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, next := range t.swAdj[cur] {
			if dist[next] < 0 {
				dist[next] = dist[cur] + 1
				queue = append(queue, next)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, raced := c.bySrc[src]; !raced {
		for k, v := range c.bySrc { // evict arbitrary sources until it fits
			if c.entries+len(dist) <= c.limit {
				break
			}
			delete(c.bySrc, k)
			c.entries -= len(v)
		}
		if c.entries+len(dist) <= c.limit {
			c.bySrc[src] = dist
			c.entries += len(dist)
		}
	}
	return dist
}

// switchHops is the distance in links between two switches through
// switches only.
func (t *Topology) switchHops(a, b string) (int, bool) {
	x, okA := t.swIndex[a]
	y, okB := t.swIndex[b]
	if !okA || !okB {
		return 0, false
	}
	d := t.hopsFrom(x)[y]
	return int(d), d >= 0
}

// UnknownNodes returns the nodes (in their order, once each) that no host
// endpoint of the topology names: replay warns when a topology names none
// of a trace's nodes, since every topology-based decision would then be
// blind.
func (t *Topology) UnknownNodes(nodes []string) []string {
	var out []string
	seen := make(map[string]bool)
	for _, n := range nodes {
		if !t.nodes[n] && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func sortPorts(ps []PortID) {
	sort.Slice(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		if a.Device != b.Device {
			return a.Device < b.Device
		}
		return a.Port < b.Port
	})
}

// Rack returns the rack a node stands in, "" when "racks" names none.
func (t *Topology) Rack(node string) string { return t.rackOf[node] }

// Tier returns a switch's tier, "" for an unknown switch.
func (t *Topology) Tier(sw string) string { return t.tier[sw] }

// HasPort reports whether the host port is cabled in the topology.
func (t *Topology) HasPort(p PortID) bool {
	_, ok := t.attach[p]
	return ok
}

// AttachedSwitch returns the switch and switch port a host port is cabled
// to; ok is false for an unknown port or a back-to-back host cable.
func (t *Topology) AttachedSwitch(p PortID) (sw, swPort string, ok bool) {
	ep, found := t.attach[p]
	if !found || ep.IsHost() {
		return "", "", false
	}
	return ep.Switch, ep.SwitchPort, true
}

// Peer returns the other end of a host port's cable.
func (t *Topology) Peer(p PortID) (Endpoint, bool) {
	ep, ok := t.attach[p]
	return ep, ok
}

// HostPorts returns the host ports cabled to a switch, sorted.
func (t *Topology) HostPorts(sw string) []PortID {
	return append([]PortID(nil), t.onSwitch[sw]...)
}

// Hops is the number of links on the shortest path between two host ports:
// 0 for the same port, 1 for a back-to-back cable, 2 through one leaf, 4
// through leaf-spine-leaf. Only switches forward; ok is false when either
// port is unknown or no path exists.
func (t *Topology) Hops(a, b PortID) (hops int, ok bool) {
	ea, okA := t.attach[a]
	eb, okB := t.attach[b]
	if !okA || !okB {
		return 0, false
	}
	if a == b {
		return 0, true
	}
	if ea.IsHost() || eb.IsHost() {
		if ea.IsHost() && ea.Host == b {
			return 1, true
		}
		return 0, false
	}
	d, ok := t.switchHops(ea.Switch, eb.Switch)
	if !ok {
		return 0, false
	}
	return d + 2, true
}

// PortDistance is a host port and its distance in links from another.
type PortDistance struct {
	Port PortID
	Hops int
}

// Neighbours returns the other host ports within maxHops links of p, nearest
// first and by name within a distance: the ports a PFC storm from p reaches
// first. Neighbours(p, 2) is the ports on the same leaf.
func (t *Topology) Neighbours(p PortID, maxHops int) []PortDistance {
	ep, ok := t.attach[p]
	if !ok {
		return nil
	}
	var out []PortDistance
	if ep.IsHost() {
		if maxHops >= 1 {
			out = append(out, PortDistance{Port: ep.Host, Hops: 1})
		}
		return out
	}
	dist := t.hopsFrom(t.swIndex[ep.Switch])
	var switches []int32
	for sw, d := range dist {
		if d >= 0 && int(d)+2 <= maxHops {
			switches = append(switches, int32(sw))
		}
	}
	sort.Slice(switches, func(i, j int) bool { return t.swNames[switches[i]] < t.swNames[switches[j]] })
	for _, sw := range switches {
		d := int(dist[sw]) + 2
		for _, q := range t.onSwitch[t.swNames[sw]] {
			if q != p {
				out = append(out, PortDistance{Port: q, Hops: d})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Hops < out[j].Hops })
	return out
}

// SwitchNeighbours returns the switches cabled to sw, sorted.
func (t *Topology) SwitchNeighbours(sw string) []string {
	i, ok := t.swIndex[sw]
	if !ok || len(t.swAdj[i]) == 0 {
		return nil
	}
	out := make([]string, 0, len(t.swAdj[i]))
	for _, j := range t.swAdj[i] {
		out = append(out, t.swNames[j])
	}
	return out
}
