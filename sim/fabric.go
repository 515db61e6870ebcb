package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// PortRef names a host port as labels and topology do.
type PortRef struct {
	Node   string
	Device string
	Port   int
}

func (r PortRef) String() string { return fmt.Sprintf("%s/%s/%d", r.Node, r.Device, r.Port) }

// PortInfo is a host port of the simulated fabric.
type PortInfo struct {
	PortRef
	Netdev    string // empty on InfiniBand
	LinkLayer string
	RateGbps  int
	// Leaf and SwitchPort are the far end of the port's cable.
	Leaf       string
	SwitchPort string
	// NIC is the counter set the port's driver lists (Config.NIC; RoCE only).
	NIC NICProfile
	// MemberOf is, on a bond member's sample, the bond's RDMA device; such
	// a port is a netdev with PHY statistics only, not an RDMA port.
	MemberOf string
	role     portRole
}

// RDMA reports whether the port is an RDMA port (not a bond member's
// netdev): what faults on traffic, pauses and queues act on.
func (p PortInfo) RDMA() bool { return p.role != roleMember }

// Rate is the sysfs rate text.
func (p PortInfo) Rate() string { return rateText[p.RateGbps] }

// Layout is the simulated fabric: what faults may look at when they start
// (a PFC storm needs the ports that share a leaf).
type Layout struct {
	Fabric   string
	Nodes    []string
	Ports    []PortInfo // by node, device, port
	Leaves   []string
	Spines   []string
	Start    time.Time
	End      time.Time
	Interval time.Duration
	// nodePorts[i] are the indexes into Ports of Nodes[i].
	nodePorts [][]int
	byRef     map[PortRef]int
}

// Port finds a port.
func (l *Layout) Port(ref PortRef) (PortInfo, bool) {
	i, ok := l.byRef[ref]
	if !ok {
		return PortInfo{}, false
	}
	return l.Ports[i], true
}

// OnLeaf lists the ports cabled to a leaf.
func (l *Layout) OnLeaf(leaf string) []PortInfo {
	var out []PortInfo
	for _, p := range l.Ports {
		if p.Leaf == leaf && p.RDMA() {
			out = append(out, p)
		}
	}
	return out
}

// newLayout builds the fat tree. Hosts fill leaves in order; InfiniBand
// hosts (the last IBHosts) start a leaf of their own, as an IB fabric never
// shares a switch with Ethernet.
func newLayout(c *Config) *Layout {
	rng := rand.New(rand.NewPCG(c.Seed, 0xfab1c))
	l := &Layout{
		Fabric: c.Fabric, Start: c.Start.UTC().Truncate(time.Millisecond), Interval: c.Interval,
		byRef: map[PortRef]int{},
	}
	l.End = l.Start.Add(time.Duration(c.Ticks()) * c.Interval)
	for s := range c.Spines {
		l.Spines = append(l.Spines, fmt.Sprintf("spine-%02d", s+1))
	}
	leafHosts, leafPorts := 0, 0
	prevLayer := ""
	for h := range c.Hosts {
		node := fmt.Sprintf("%s%03d", c.HostPrefix, h+1)
		layer := LinkLayerEthernet
		if h >= c.Hosts-c.IBHosts {
			layer = LinkLayerInfiniBand
		}
		if len(l.Leaves) == 0 || leafHosts == c.HostsPerLeaf || layer != prevLayer {
			l.Leaves = append(l.Leaves, fmt.Sprintf("leaf-%02d", len(l.Leaves)+1))
			leafHosts, leafPorts = 0, 0
		}
		prevLayer = layer
		leafHosts++
		rate := c.RatesGbps[rng.IntN(len(c.RatesGbps))]
		l.Nodes = append(l.Nodes, node)
		var idx []int
		add := func(info PortInfo) {
			l.byRef[info.PortRef] = len(l.Ports)
			idx = append(idx, len(l.Ports))
			l.Ports = append(l.Ports, info)
		}
		if layer == LinkLayerEthernet && h < c.BondedHosts {
			// A RoCE LAG per pair of devices: the bond's RDMA port on the
			// leaf's port-channel, each member on a switch port of its own.
			for b := range c.DevicesPerHost / bondMembers {
				device, netdev, members := bondNames(b)
				leaf := l.Leaves[len(l.Leaves)-1]
				add(PortInfo{PortRef: PortRef{Node: node, Device: device, Port: 1}, Netdev: netdev, LinkLayer: layer,
					RateGbps: rate, Leaf: leaf, SwitchPort: fmt.Sprintf("bond%d", leafPorts+1), NIC: c.NIC, role: roleBond})
				for _, m := range members {
					leafPorts++
					add(PortInfo{PortRef: PortRef{Node: node, Device: device + "." + m, Port: 1}, Netdev: m, LinkLayer: layer,
						RateGbps: rate, Leaf: leaf, SwitchPort: fmt.Sprintf("swp%d", leafPorts), NIC: c.NIC, MemberOf: device, role: roleMember})
				}
			}
			l.nodePorts = append(l.nodePorts, idx)
			continue
		}
		for d := range c.DevicesPerHost {
			for p := 1; p <= c.PortsPerDevice; p++ {
				leafPorts++
				info := PortInfo{
					PortRef:    PortRef{Node: node, Device: fmt.Sprintf("mlx5_%d", d*c.PortsPerDevice+p-1), Port: 1},
					LinkLayer:  layer,
					RateGbps:   rate,
					Leaf:       l.Leaves[len(l.Leaves)-1],
					SwitchPort: fmt.Sprintf("swp%d", leafPorts),
				}
				if c.PortsPerDevice > 1 {
					// A dual-port device (VPI, mlx4-style) keeps both ports under one name.
					info.Device = fmt.Sprintf("mlx5_%d", d)
					info.Port = p
				}
				if layer == LinkLayerEthernet {
					info.Netdev = fmt.Sprintf("ens%df%dnp%d", d+1, p-1, p-1)
					info.NIC = c.NIC
				}
				add(info)
			}
		}
		l.nodePorts = append(l.nodePorts, idx)
	}
	return l
}

// TopologyFile is topology format v1 (docs/formats.md); its switch and link
// types are the schemas package's, the one definition of the format.
type TopologyFile struct {
	Fabric   string                   `json:"fabric"`
	Switches []schemas.TopologySwitch `json:"switches"`
	Links    []schemas.TopologyLink   `json:"links"`
}

// Topology returns the fabric the config simulates.
func Topology(cfg Config) (*TopologyFile, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newLayout(&cfg).topology(), nil
}

func (l *Layout) topology() *TopologyFile {
	t := &TopologyFile{Fabric: l.Fabric}
	for _, n := range l.Leaves {
		t.Switches = append(t.Switches, schemas.TopologySwitch{Name: n, Tier: schemas.TierLeaf})
	}
	for _, n := range l.Spines {
		t.Switches = append(t.Switches, schemas.TopologySwitch{Name: n, Tier: schemas.TierSpine})
	}
	for _, p := range l.Ports {
		t.Links = append(t.Links, schemas.TopologyLink{A: p.PortRef.String(), B: p.Leaf + "/" + p.SwitchPort})
	}
	// Uplinks sit above every host-facing port, as swp49+ do on a 48-port leaf.
	perLeaf := map[string]int{}
	for _, p := range l.Ports {
		perLeaf[p.Leaf]++
	}
	up := 49
	for _, n := range perLeaf {
		up = max(up, n+1)
	}
	for li, leaf := range l.Leaves {
		for si, spine := range l.Spines {
			t.Links = append(t.Links, schemas.TopologyLink{
				A: fmt.Sprintf("%s/swp%d", leaf, up+si),
				B: fmt.Sprintf("%s/swp%d", spine, li+1),
			})
		}
	}
	return t
}

// WriteTopology writes the config's topology: one switch list, one link a
// line, as in docs/formats.md.
func WriteTopology(cfg Config, w io.Writer) error {
	t, err := Topology(cfg)
	if err != nil {
		return err
	}
	return t.Write(w)
}

// Write writes the topology as JSON with one link a line.
func (t *TopologyFile) Write(w io.Writer) error {
	var b bytes.Buffer
	fabric, _ := json.Marshal(t.Fabric)
	switches, _ := json.Marshal(t.Switches)
	fmt.Fprintf(&b, "{\"fabric\": %s,\n \"switches\": %s,\n \"links\": [", fabric, switches)
	for i, l := range t.Links {
		link, _ := json.Marshal(l)
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  ")
		b.Write(link)
	}
	b.WriteString("]}\n")
	_, err := w.Write(b.Bytes())
	return err
}
