// Package configmismatch is the config_mismatch detector (layer
// link_network): a RoCE port whose settings disagree with its link's other
// end or with the rest of its fabric, from the inventory's configuration
// (Detector). It registers itself with processor.Register;
// processor/detect/all links it in.
package configmismatch

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func init() {
	processor.Register(processor.TypeConfigMismatch, func() processor.Detector { return New() })
}

// Settings a config_mismatch names, as the trace's config keys.
const (
	settingMTU = "mtu"
	settingPFC = "pfc_enabled"
	// The settings that decide which priority RoCE traffic and its CNPs
	// travel on.
	settingTrust  = "trust"
	settingDSCP   = "dscp_prio"
	settingTClass = "traffic_class"
	// settingCNP names a CNP priority off the fabric's; the evidence says
	// which setting decides it (cnp_dscp under trust dscp, cnp_802p_prio
	// under trust pcp).
	settingCNP = "cnp_priority"
)

// Detector raises config_mismatch (layer link_network) when a RoCE
// port's settings disagree with its link's other end or with the rest of
// its fabric, from the configuration the inventory carries (ConfigView):
//
//   - MTU: the port's netdev MTU differs from the other end of its link (a
//     host port at the other end in the topology: frames one end sends,
//     the other drops), or from the MTU a clear majority of the fabric's
//     RoCE ports use.
//   - PFC: PFC is off on the fabric's lossless priority: the priority a
//     clear majority of the RoCE ports that report PFC have it on for.
//     Under congestion that port's traffic is dropped instead of paused.
//   - ECN: the notification point (CNPs for ECN marks) or the reaction point
//     (slowing down on CNPs) is off on that priority while a clear majority
//     of the ports have it on. Congestion control is then broken for the
//     port's flows, which cnp_ecn_imbalance sees in the counters; that
//     incident names this one as its cause (processor.Causes).
//   - Trust is compared but alone is no mismatch: under trust pcp a RoCE
//     packet's priority is its VLAN tag's, which no host counter or setting
//     shows, and fleets run both modes losslessly side by side. What decides
//     loss is the priority the traffic lands on, which the DSCP map (under
//     trust dscp) and the CNP priority below judge; a port whose trust
//     differs carries it in the evidence of those mismatches.
//   - DSCP map: under trust dscp, a DSCP that a clear majority of the
//     ports reporting a map put on the lossless priority (the DSCPs the
//     fabric's RoCE traffic uses), or the DSCP of the fabric's forced
//     traffic class, goes to another priority on this port.
//   - CNP priority: the priority the port's CNPs travel on (its map's
//     entry for cnp_dscp under trust dscp, cnp_802p_prio under trust pcp)
//     differs from the one a clear majority of the ports use: CNPs queued
//     behind data or dropped, and congestion control reacts late.
//   - Traffic class: the class forced on the port's RoCE QPs differs from
//     the one a clear majority forces.
//   - A RoCE LAG whose members disagree (their own port samples, devices
//     schemas.BondMemberDevice): the incident is the bond port's, naming
//     both members and the setting. Member samples are otherwise left out
//     of the comparison: the bond port stands for them, and counting them
//     too would count one host port two or three times.
//
// Unknown is never a mismatch: a setting the port or the fabric does not
// report is not compared, and a fabric with no clear majority has no
// norm to differ from. The subject is the port that differs: the minority.
// When the two ends of a link differ in MTU and the fabric has no majority
// to say which one is wrong, both ends get an incident, each naming the
// other (deterministic, and the engineer must look at both anyway).
//
// Configuration is a state, not a noisy figure: the first observation that
// shows a mismatch opens the incident (the watermark passing the data time
// of the reading, so within one tick of it) and the first that shows none
// resolves it. Its onset is when the port's configuration was read as it
// is. Only ports this processor reads get incidents; the comparison uses
// every node's configuration.
type Detector struct {
	// MajorityShare is the share of the fabric's RoCE ports reporting a
	// setting that must agree before it is the fabric's norm; default 2/3.
	// A fleet split more evenly runs two pools on purpose (storage and
	// compute, a migration under way) and says nothing about which side is
	// wrong.
	MajorityShare float64
	// MinPorts is the fewest RoCE ports reporting a setting for a
	// majority to mean anything; default 3 (with two, either could be the
	// odd one).
	MinPorts int
	// MinUpdateInterval bounds updates when only figures move; default
	// 10 min. Only a setting joining the mismatch is news (published at
	// once): the fabric's shares drift as nodes come and go.
	MinUpdateInterval time.Duration
	// SilentResolveAfter resolves the incident of a port that stopped
	// reporting; default 30 min.
	SilentResolveAfter time.Duration

	tracker *processor.Tracker
	fabric  processor.FabricView
}

// New returns the detector with its defaults.
func New() *Detector {
	return &Detector{MajorityShare: 2.0 / 3, MinPorts: 3, MinUpdateInterval: 10 * time.Minute, SilentResolveAfter: 30 * time.Minute}
}

// Name implements processor.Detector.
func (d *Detector) Name() string { return processor.TypeConfigMismatch }

// Init implements processor.Initializer.
func (d *Detector) Init(fabric processor.FabricView) error {
	d.fabric = fabric
	return nil
}

func (d *Detector) track() *processor.Tracker {
	if d.tracker == nil {
		d.tracker = processor.NewTracker(processor.TypeConfigMismatch, processor.Policy{MinUpdateInterval: d.MinUpdateInterval, SilentResolveAfter: d.SilentResolveAfter})
	}
	return d.tracker
}

// fabricNorm is what the fabric's RoCE ports agree on; a zero field is no
// norm.
type fabricNorm struct {
	ports int // RoCE ports with a config
	// mtu and its share of the ports reporting an MTU.
	mtu      int
	mtuShare float64
	mtuPorts int
	// prio is the lossless priority (-1: none); pfc/np/rp say whether a
	// clear majority has each on for it, with their shares.
	prio           int
	pfc, np, rp    bool
	pfcShare       float64
	npShare        float64
	rpShare        float64
	pfcN, npN, rpN int
	// trust ("" none), the CNP priority (-1 none) and the forced traffic
	// class (-1 none) a clear majority uses, with shares and counts.
	trust                 string
	trustShare            float64
	trustN                int
	cnpPrio, tclass       int
	cnpShare, tclassShare float64
	cnpN, tclassN         int
	// losslessDSCP are the DSCPs the fabric maps to its lossless priority
	// (see ConfigMismatch); mapN the ports under trust dscp with a map.
	losslessDSCP []int
	mapN         int
	// members are each LAG's member samples, by the bond's port.
	members map[schemas.PortID][]*processor.KnownConfig
}

// majority is the value a clear majority of total reports has.
func (d *Detector) majority(counts map[int]int, total int) (int, float64, bool) {
	if total < d.MinPorts {
		return 0, 0, false
	}
	best, count := 0, 0
	for v, c := range counts {
		if c > count || (c == count && v < best) {
			best, count = v, c
		}
	}
	share := float64(count) / float64(total)
	return best, share, count > 0 && share >= d.MajorityShare
}

// lagMember reports whether kc is the sample of a LAG member whose bond
// port the fabric knows, and that bond port.
func lagMember(fabric processor.FabricView, kc *processor.KnownConfig) (schemas.PortID, bool) {
	bond, _, ok := schemas.SplitBondMember(kc.ID.Device)
	if !ok {
		return schemas.PortID{}, false
	}
	id := schemas.PortID{Node: kc.ID.Node, Device: bond, Port: 1}
	_, known := processor.ConfigOf(fabric, id)
	return id, known
}

// prioCount counts, for one priority list setting, the ports reporting it
// and per priority those that have it on.
type prioCount struct {
	known int
	on    [schemas.MaxPriority + 1]int
}

func (c *prioCount) add(list *[]int) {
	if list == nil {
		return
	}
	c.known++
	var seen uint8
	for _, p := range *list {
		if p >= 0 && p <= schemas.MaxPriority && seen&(1<<p) == 0 {
			seen |= 1 << p
			c.on[p]++
		}
	}
}

// top is the priority most ports have on (the lowest on a tie) and its
// share.
func (c *prioCount) top() (int, float64) {
	best := 0
	for p := range c.on {
		if c.on[p] > c.on[best] {
			best = p
		}
	}
	if c.known == 0 || c.on[best] == 0 {
		return -1, 0
	}
	return best, float64(c.on[best]) / float64(c.known)
}

func (c *prioCount) share(p int) float64 {
	if c.known == 0 || p < 0 {
		return 0
	}
	return float64(c.on[p]) / float64(c.known)
}

func isRoCE(kc *processor.KnownConfig) bool { return kc.LinkLayer == "Ethernet" }

// norm computes what the fabric's RoCE ports agree on.
func (d *Detector) norm(fabric processor.FabricView) fabricNorm {
	var n fabricNorm
	tally := newConfigTally()
	n.members = map[schemas.PortID][]*processor.KnownConfig{}
	processor.EachConfig(fabric, func(kc *processor.KnownConfig) bool {
		if !isRoCE(kc) {
			return true
		}
		if bond, ok := lagMember(fabric, kc); ok {
			n.members[bond] = append(n.members[bond], kc)
			return true
		}
		tally.add(&n, kc)
		return true
	})
	d.settingMajorities(&n, tally)
	// The lossless priority is PFC's; without PFC reports, the one the
	// ECN settings agree on.
	n.prio = -1
	for _, c := range []*prioCount{&tally.pfc, &tally.np, &tally.rp} {
		if p, share := c.top(); c.known >= d.MinPorts && share >= d.MajorityShare {
			n.prio = p
			break
		}
	}
	if n.prio < 0 {
		return n
	}
	d.losslessAgreement(&n, tally)
	return n
}

// configTally counts the settings the fabric's RoCE ports (LAG members
// aside) report: the votes norm turns into the fabric's majorities.
type configTally struct {
	mtus, trusts, cnps, tclasses map[int]int
	pfc, np, rp                  prioCount
	// maps are the DSCP-to-priority maps of the ports under trust dscp.
	maps [][]int
}

func newConfigTally() *configTally {
	return &configTally{mtus: map[int]int{}, trusts: map[int]int{}, cnps: map[int]int{}, tclasses: map[int]int{}}
}

// add counts one port's settings, and in n the port and how many ports
// reported each setting.
func (c *configTally) add(n *fabricNorm, kc *processor.KnownConfig) {
	n.ports++
	switch kc.Config.Trust {
	case "pcp":
		c.trusts[0]++
		n.trustN++
	case "dscp":
		c.trusts[1]++
		n.trustN++
		if m := kc.Config.DSCPPrio; m != nil && len(*m) == schemas.NumDSCP {
			c.maps = append(c.maps, *m)
		}
	}
	if p, _, ok := kc.Config.CNPPriority(); ok {
		c.cnps[p]++
		n.cnpN++
	}
	if tc := kc.Config.TrafficClass; tc != nil {
		c.tclasses[*tc]++
		n.tclassN++
	}
	if kc.Config.MTU != nil {
		c.mtus[*kc.Config.MTU]++
		n.mtuPorts++
	}
	c.pfc.add(kc.Config.PFCEnabled)
	c.np.add(kc.Config.ECNNPEnabled)
	c.rp.add(kc.Config.ECNRPEnabled)
}

// settingMajorities sets the MTU, trust, CNP priority and forced traffic
// class a clear majority of the ports reporting each has.
func (d *Detector) settingMajorities(n *fabricNorm, tally *configTally) {
	if n.mtuPorts >= d.MinPorts {
		best, count := 0, 0
		for v, c := range tally.mtus {
			if c > count || (c == count && v < best) {
				best, count = v, c
			}
		}
		if share := float64(count) / float64(n.mtuPorts); share >= d.MajorityShare {
			n.mtu, n.mtuShare = best, share
		}
	}
	if v, share, ok := d.majority(tally.trusts, n.trustN); ok {
		n.trust, n.trustShare = map[int]string{0: "pcp", 1: "dscp"}[v], share
	}
	n.cnpPrio, n.tclass = -1, -1
	if v, share, ok := d.majority(tally.cnps, n.cnpN); ok {
		n.cnpPrio, n.cnpShare = v, share
	}
	if v, share, ok := d.majority(tally.tclasses, n.tclassN); ok {
		n.tclass, n.tclassShare = v, share
	}
}

// losslessAgreement sets, for the lossless priority n.prio, whether a clear
// majority has PFC, ECN NP and ECN RP on for it (with shares and counts),
// and the DSCPs the fabric's RoCE traffic uses.
func (d *Detector) losslessAgreement(n *fabricNorm, tally *configTally) {
	pfc, np, rp := &tally.pfc, &tally.np, &tally.rp
	n.pfcShare, n.npShare, n.rpShare = pfc.share(n.prio), np.share(n.prio), rp.share(n.prio)
	n.pfcN, n.npN, n.rpN = pfc.known, np.known, rp.known
	n.pfc = pfc.known >= d.MinPorts && n.pfcShare >= d.MajorityShare
	n.np = np.known >= d.MinPorts && n.npShare >= d.MajorityShare
	n.rp = rp.known >= d.MinPorts && n.rpShare >= d.MajorityShare
	// The DSCPs the fabric's RoCE traffic uses: those a clear majority of
	// the maps put on the lossless priority, and the forced class's.
	n.mapN = len(tally.maps)
	if n.mapN >= d.MinPorts {
		for dscp := range schemas.NumDSCP {
			on := 0
			for _, m := range tally.maps {
				if m[dscp] == n.prio {
					on++
				}
			}
			if float64(on)/float64(n.mapN) >= d.MajorityShare || (n.tclass >= 0 && dscp == n.tclass>>2) {
				n.losslessDSCP = append(n.losslessDSCP, dscp)
			}
		}
	}
}

// OnWatermark implements processor.FabricDetector.
func (d *Detector) OnWatermark(_ context.Context, fabric processor.FabricView, wm schemas.Millis, em processor.Emitter) {
	t := d.track()
	n := d.norm(fabric)
	if n.ports == 0 && t.Active() == 0 {
		return
	}
	processor.EachConfig(fabric, func(kc *processor.KnownConfig) bool {
		port, owned := fabric.Port(kc.ID)
		if _, member := lagMember(fabric, kc); member {
			return true // judged through its bond port
		}
		if !owned || !isRoCE(kc) || (d.SilentResolveAfter > 0 && port.SilentFor(wm) >= d.SilentResolveAfter) {
			// A silent port's incident is left to Sweep: it can neither
			// confirm nor clear its configuration.
			return true
		}
		subject := kc.ID.Subject()
		if f, ok := d.finding(fabric, &n, kc, port); ok {
			t.Hold(wm, f, em)
		} else {
			t.Clear(wm, subject, "the port's configuration agrees with the fabric's again", nil, em)
		}
		return true
	})
	t.Sweep(wm, func(s schemas.Subject) (schemas.Millis, bool) {
		p, ok := fabric.Port(schemas.PortID{Node: s.Node, Device: s.Device, Port: s.Port})
		if !ok {
			return 0, false
		}
		return p.LastTime, true
	}, em)
}

// mismatch is one setting that differs, in words and figures.
type mismatch struct {
	setting  string
	words    string
	critical bool
	peer     *processor.KnownConfig // the link's other end, when its MTU differs
}

// finding says whether kc's port differs from its fabric or its link's
// other end, and how.
func (d *Detector) finding(fabric processor.FabricView, n *fabricNorm, kc *processor.KnownConfig, port *processor.PortState) (processor.Finding, bool) {
	c := kc.Config
	ev := map[string]any{"fabric_ports": n.ports, "config_since": kc.Since.String()}
	var ms []mismatch
	if c.MTU != nil {
		if m, ok := d.mtuMismatch(fabric, n, kc, ev); ok {
			ms = append(ms, m)
		}
	}
	for _, s := range []struct {
		setting string
		list    *[]int
		norm    bool
		share   float64
		known   int
		what    string
	}{
		{settingPFC, c.PFCEnabled, n.pfc, n.pfcShare, n.pfcN, "PFC"},
		{processor.SettingECNNP, c.ECNNPEnabled, n.np, n.npShare, n.npN, "the ECN notification point"},
		{processor.SettingECNRP, c.ECNRPEnabled, n.rp, n.rpShare, n.rpN, "the ECN reaction point"},
	} {
		on, known := schemas.PriorityOn(s.list, n.prio)
		if !known || !s.norm || on {
			continue
		}
		ev[s.setting] = slices.Clone(*s.list)
		ev["fabric_"+s.setting+"_share"] = round3(s.share)
		ms = append(ms, mismatch{setting: s.setting, critical: s.setting == settingPFC,
			words: fmt.Sprintf("%s off on priority %d, which %s of the fabric's %d RoCE ports reporting it have on", s.what, n.prio, percent(s.share), s.known)})
	}
	ms = append(ms, d.qosMismatches(n, kc, ev)...)
	ms = append(ms, bondMismatches(n.members[kc.ID], ev)...)
	if len(ms) == 0 {
		return processor.Finding{}, false
	}
	netdev := kc.Netdev
	if netdev == "" {
		netdev = port.Netdev
	}
	settings := make([]string, len(ms))
	words := make([]string, len(ms))
	severity := schemas.SeverityWarning
	for i, m := range ms {
		settings[i], words[i] = m.setting, m.words
		if m.critical {
			severity = schemas.SeverityCritical
		}
	}
	ev["settings"] = settings
	if n.prio >= 0 {
		ev["priority"] = n.prio
	}
	return processor.Finding{
		Subject:  kc.ID.Subject(),
		Onset:    kc.Since,
		Severity: severity,
		Layer:    schemas.LayerLinkNetwork,
		Summary:  fmt.Sprintf("%s: configuration differs from the fabric's: %s", processor.PortName(kc.ID, netdev), strings.Join(words, "; ")),
		Evidence: ev,
		Checks:   d.checks(fabric, kc.ID, netdev, n.prio, ms, ev),
		Keys:     settings,
	}, true
}

// mtuMismatch compares the port's MTU with its link's other end and the
// fabric's.
func (d *Detector) mtuMismatch(fabric processor.FabricView, n *fabricNorm, kc *processor.KnownConfig, ev map[string]any) (mismatch, bool) {
	mtu := *kc.Config.MTU
	var peer *processor.KnownConfig
	if topo := fabric.Topology(); topo != nil {
		if e, ok := topo.Peer(kc.ID); ok && e.IsHost() {
			if pc, ok := processor.ConfigOf(fabric, e.Host); ok && pc.Config.MTU != nil && *pc.Config.MTU != mtu {
				peer = &pc
			}
		}
	}
	offFabric := n.mtu != 0 && mtu != n.mtu
	// With a fabric norm, only the end that differs from it is the
	// mismatch; without one, both ends of a disagreeing link are.
	offPeer := peer != nil && (n.mtu == 0 || offFabric)
	if !offFabric && !offPeer {
		return mismatch{}, false
	}
	ev[settingMTU] = mtu
	var words []string
	if offFabric {
		ev["fabric_mtu"], ev["fabric_mtu_share"] = n.mtu, round3(n.mtuShare)
		words = append(words, fmt.Sprintf("%s of the fabric's %d RoCE ports reporting it use %d", percent(n.mtuShare), n.mtuPorts, n.mtu))
	}
	if offPeer {
		ev["peer"], ev["peer_mtu"] = peer.ID.String(), *peer.Config.MTU
		words = append(words, fmt.Sprintf("the other end of its link, %s, uses %d", processor.PortName(peer.ID, peer.Netdev), *peer.Config.MTU))
	}
	m := mismatch{setting: settingMTU, critical: offPeer,
		words: fmt.Sprintf("MTU %d where %s", mtu, strings.Join(words, " and "))}
	if offPeer {
		m.peer = peer
	}
	return m, true
}

func percent(share float64) string { return strconv.Itoa(int(share*100+0.5)) + "%" }

// checks names the commands that show each setting on the host.
func (d *Detector) checks(fabric processor.FabricView, id schemas.PortID, netdev string, prio int, ms []mismatch, ev map[string]any) []schemas.Check {
	nd := processor.NetdevOf(id, netdev)
	var out []schemas.Check
	for _, m := range ms {
		switch m.setting {
		case settingMTU:
			note := fmt.Sprintf("mtu: %v here", ev[settingMTU])
			if v, ok := ev["fabric_mtu"]; ok {
				note += fmt.Sprintf(", %v on the rest of the fabric", v)
			}
			out = append(out, processor.OnHost(id.Node, "ip link show "+nd, note))
			if m.peer != nil {
				out = append(out, processor.OnHost(m.peer.ID.Node, "ip link show "+processor.NetdevOf(m.peer.ID, m.peer.Netdev),
					fmt.Sprintf("mtu at the link's other end: %d", *m.peer.Config.MTU)))
			}
		case settingPFC:
			out = append(out, processor.OnHost(id.Node, "mlnx_qos -i "+nd, fmt.Sprintf("PFC enabled on priority %d, as on the rest of the fabric; trust mode", prio)))
		case processor.SettingECNNP:
			out = append(out, processor.OnHost(id.Node, fmt.Sprintf("cat /sys/class/net/%s/ecn/roce_np/enable/%d", nd, prio), "1: the notification point answers ECN marks with CNPs"))
		case processor.SettingECNRP:
			out = append(out, processor.OnHost(id.Node, fmt.Sprintf("cat /sys/class/net/%s/ecn/roce_rp/enable/%d", nd, prio), "1: the reaction point slows down on CNPs"))
		case settingTrust, settingDSCP:
			out = append(out, processor.OnHost(id.Node, "mlnx_qos -i "+nd, fmt.Sprintf("trust mode and dscp2prio mapping, as on the rest of the fabric (%v)", ev["fabric_"+m.setting])))
		case settingCNP:
			out = append(out, processor.OnHost(id.Node, fmt.Sprintf("cat /sys/class/net/%s/ecn/roce_np/cnp_dscp /sys/class/net/%s/ecn/roce_np/cnp_802p_prio", nd, nd),
				fmt.Sprintf("CNPs on priority %v here, %v on the rest of the fabric", ev[settingCNP], ev["fabric_"+settingCNP])),
				processor.OnHost(id.Node, "mlnx_qos -i "+nd, "the dscp2prio entry of cnp_dscp under trust dscp"))
		case settingTClass:
			out = append(out, processor.OnHost(id.Node, fmt.Sprintf("cat /sys/class/infiniband/%s/tc/%d/traffic_class", id.Device, id.Port),
				fmt.Sprintf("Global tclass=%v on the rest of the fabric", ev["fabric_"+settingTClass])))
		default:
			if members, ok := ev["bond_members"].([]string); ok && strings.HasPrefix(m.setting, "bond_") {
				for _, mb := range members {
					out = append(out, processor.OnHost(id.Node, "mlnx_qos -i "+mb, "the member's "+strings.TrimPrefix(m.setting, "bond_")+"; a LAG's members must agree"))
				}
			}
		}
	}
	return append(out, processor.OnSwitch(fabric, id, "PFC and ECN settings of the switch port"))
}

// qosMismatches compares the settings that place RoCE traffic and CNPs on
// a priority with the fabric's norm.
func (d *Detector) qosMismatches(n *fabricNorm, kc *processor.KnownConfig, ev map[string]any) []mismatch {
	c := kc.Config
	var ms []mismatch
	// Trust alone is evidence, not a mismatch (see ConfigMismatch): the
	// priority a packet lands on under trust pcp is its VLAN tag's, which
	// nothing here shows.
	if n.trust != "" && c.Trust != "" && c.Trust != n.trust {
		ev[settingTrust], ev["fabric_"+settingTrust], ev["fabric_trust_share"] = c.Trust, n.trust, round3(n.trustShare)
	}
	if c.Trust == "dscp" && c.DSCPPrio != nil && len(*c.DSCPPrio) == schemas.NumDSCP && n.prio >= 0 {
		var off []string
		for _, dscp := range n.losslessDSCP {
			if p := (*c.DSCPPrio)[dscp]; p != n.prio {
				off = append(off, fmt.Sprintf("DSCP %d on priority %d", dscp, p))
			}
		}
		if len(off) > 0 {
			ev[settingDSCP], ev["fabric_"+settingDSCP] = off, fmt.Sprintf("DSCP %v on priority %d", n.losslessDSCP, n.prio)
			ms = append(ms, mismatch{setting: settingDSCP, critical: true,
				words: fmt.Sprintf("%s, which the fabric's RoCE traffic uses on priority %d (%d ports reporting a map)", strings.Join(off, ", "), n.prio, n.mapN)})
		}
	}
	if p, by, ok := c.CNPPriority(); ok && n.cnpPrio >= 0 && p != n.cnpPrio {
		ev[settingCNP], ev["fabric_"+settingCNP], ev["fabric_cnp_priority_share"], ev["cnp_setting"] = p, n.cnpPrio, round3(n.cnpShare), by
		if c.CNPDSCP != nil {
			ev["cnp_dscp"] = *c.CNPDSCP
		}
		if c.CNP8021pPrio != nil {
			ev["cnp_802p_prio"] = *c.CNP8021pPrio
		}
		ms = append(ms, mismatch{setting: settingCNP,
			words: fmt.Sprintf("CNPs on priority %d (by %s) where %s of the fabric's %d RoCE ports reporting it send them on %d", p, by, percent(n.cnpShare), n.cnpN, n.cnpPrio)})
	}
	if tc := c.TrafficClass; tc != nil && n.tclass >= 0 && *tc != n.tclass {
		ev[settingTClass], ev["fabric_"+settingTClass], ev["fabric_traffic_class_share"] = *tc, n.tclass, round3(n.tclassShare)
		ms = append(ms, mismatch{setting: settingTClass,
			words: fmt.Sprintf("traffic class %d (DSCP %d) forced where %s of the fabric's %d RoCE ports reporting it force %d (DSCP %d)", *tc, *tc>>2, percent(n.tclassShare), n.tclassN, n.tclass, n.tclass>>2)})
	}
	return ms
}

// bondSettings are the settings a LAG's members must agree on, with how
// each is shown.
var bondSettings = []struct {
	key string
	get func(c *schemas.PortConfig) (string, bool)
}{
	{settingMTU, func(c *schemas.PortConfig) (string, bool) { return intText(c.MTU) }},
	{settingPFC, func(c *schemas.PortConfig) (string, bool) { return prioText(c.PFCEnabled) }},
	{processor.SettingECNNP, func(c *schemas.PortConfig) (string, bool) { return prioText(c.ECNNPEnabled) }},
	{processor.SettingECNRP, func(c *schemas.PortConfig) (string, bool) { return prioText(c.ECNRPEnabled) }},
	{settingTrust, func(c *schemas.PortConfig) (string, bool) { return c.Trust, c.Trust != "" }},
	{settingDSCP, func(c *schemas.PortConfig) (string, bool) {
		if c.DSCPPrio == nil {
			return "", false
		}
		return fmt.Sprint(*c.DSCPPrio), true
	}},
	{"cnp_dscp", func(c *schemas.PortConfig) (string, bool) { return intText(c.CNPDSCP) }},
	{"cnp_802p_prio", func(c *schemas.PortConfig) (string, bool) { return intText(c.CNP8021pPrio) }},
}

func intText(v *int) (string, bool) {
	if v == nil {
		return "", false
	}
	return strconv.Itoa(*v), true
}

func prioText(l *[]int) (string, bool) {
	if l == nil {
		return "", false
	}
	s := slices.Clone(*l)
	slices.Sort(s)
	return fmt.Sprint(slices.Compact(s)), true
}

// bondMismatches compares a LAG's members with its first (by device name,
// so the same pair is named on every run): a LAG hashes flows over both
// cables, so a setting that differs treats half the flows differently.
func bondMismatches(members []*processor.KnownConfig, ev map[string]any) []mismatch {
	if len(members) < 2 {
		return nil
	}
	members = slices.Clone(members)
	slices.SortFunc(members, func(a, b *processor.KnownConfig) int { return strings.Compare(a.ID.Device, b.ID.Device) })
	name := func(kc *processor.KnownConfig) string {
		if _, m, ok := schemas.SplitBondMember(kc.ID.Device); ok {
			return m
		}
		return kc.Netdev
	}
	var ms []mismatch
	var names []string
	for _, s := range bondSettings {
		a, aok := s.get(members[0].Config)
		if !aok {
			continue
		}
		for _, other := range members[1:] {
			b, bok := s.get(other.Config)
			if !bok || a == b {
				continue
			}
			names = []string{name(members[0]), name(other)}
			ev["bond_members"] = names
			ev["bond_"+s.key] = map[string]string{names[0]: a, names[1]: b}
			ms = append(ms, mismatch{setting: "bond_" + s.key, critical: s.key == settingPFC || s.key == settingTrust,
				words: fmt.Sprintf("its LAG members %s and %s differ in %s (%s and %s)", names[0], names[1], s.key, a, b)})
			break
		}
	}
	return ms
}

func round3(v float64) float64 { return processor.RoundTo(v, 3) }
