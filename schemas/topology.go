package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
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

	tier map[string]string
	// attach says what the other end of a host port's single cable is.
	attach map[PortID]Endpoint
	// onSwitch lists the host ports cabled to a switch, sorted.
	onSwitch map[string][]PortID
	// switchHops holds the shortest switch-to-switch distance in links,
	// through switches only: hosts do not forward fabric traffic.
	switchHops map[string]map[string]int
}

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

func (t *Topology) build() error {
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

	t.attach = make(map[PortID]Endpoint)
	t.onSwitch = make(map[string][]PortID)
	switchAdj := make(map[string]map[string]bool)
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
		}
		a, b := ends[0], ends[1]
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
			for _, p := range [][2]string{{a.Switch, b.Switch}, {b.Switch, a.Switch}} {
				if switchAdj[p[0]] == nil {
					switchAdj[p[0]] = make(map[string]bool)
				}
				switchAdj[p[0]][p[1]] = true
			}
		}
	}
	for sw := range t.onSwitch {
		sortPorts(t.onSwitch[sw])
	}

	// All-pairs BFS over switches: fabrics have hundreds of switches at most,
	// and hop queries then cost two map lookups.
	t.switchHops = make(map[string]map[string]int, len(t.tier))
	for src := range t.tier {
		dist := map[string]int{src: 0}
		queue := []string{src}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			for next := range switchAdj[cur] {
				if _, seen := dist[next]; !seen {
					dist[next] = dist[cur] + 1
					queue = append(queue, next)
				}
			}
		}
		t.switchHops[src] = dist
	}
	return nil
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
	d, ok := t.switchHops[ea.Switch][eb.Switch]
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
	switches := make([]string, 0, len(t.switchHops[ep.Switch]))
	for sw, d := range t.switchHops[ep.Switch] {
		if d+2 <= maxHops {
			switches = append(switches, sw)
		}
	}
	sort.Strings(switches)
	for _, sw := range switches {
		d := t.switchHops[ep.Switch][sw] + 2
		for _, q := range t.onSwitch[sw] {
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
	var out []string
	for other, d := range t.switchHops[sw] {
		if d == 1 {
			out = append(out, other)
		}
	}
	sort.Strings(out)
	return out
}
