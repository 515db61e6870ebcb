package sim

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// NICProfile is the set of counters a fleet's RoCE ports expose: what the
// hosts' driver lists, not what the hardware counts. The physics (traffic,
// pauses, bit errors) is the same under every profile; only the names a
// reading carries differ, as they do between real hosts (docs/formats.md,
// trace format v1).
type NICProfile string

const (
	// NICFull is the simulator's historical set: rx_bits_phy and the
	// per-priority (PFC) pause counters of priority 3. The zero value.
	NICFull NICProfile = ""
	// NICUpstream is an mlx5 port under an upstream kernel before 2026
	// (5.15, 6.5) or MLNX_OFED 5.x: no rx_bits_phy, and the PHY error
	// counters those list besides (rx_symbol_err_phy, rx_crc_errors_phy).
	NICUpstream NICProfile = "mlx5-upstream"
	// NICGlobalPause is NICUpstream on a fabric with IEEE 802.3x link-level
	// flow control instead of PFC: tx/rx_global_pause, their durations (µs)
	// and rx_global_pause_transition instead of the per-priority counters
	// (which exist only for priorities with PFC on: none here), and the
	// ports report pfc_enabled [] when the fleet reports its config.
	NICGlobalPause NICProfile = "global-pause"
)

// NICProfiles are the profiles by name ("full" for NICFull), for flags and
// sweeps.
var NICProfiles = map[string]NICProfile{"full": NICFull, string(NICUpstream): NICUpstream, string(NICGlobalPause): NICGlobalPause}

// ParseNICProfile reads a profile name ("full", "mlx5-upstream",
// "global-pause"; "" is full).
func ParseNICProfile(s string) (NICProfile, error) {
	if s == "" {
		return NICFull, nil
	}
	if p, ok := NICProfiles[s]; ok {
		return p, nil
	}
	names := make([]string, 0, len(NICProfiles))
	for n := range NICProfiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return NICFull, fmt.Errorf("NIC profile %q is not one of %s", s, strings.Join(names, ", "))
}

func (p NICProfile) valid() bool {
	_, ok := map[NICProfile]bool{NICFull: true, NICUpstream: true, NICGlobalPause: true}[p]
	return ok
}

// portRole is what a sample of the port is: an ordinary RoCE or IB port, a
// RoCE LAG's RDMA port (the bond), or one of the bond's member netdevs.
type portRole uint8

const (
	rolePort portRole = iota
	roleBond
	roleMember
)

// bondMembers is how many netdevs a simulated RoCE LAG bonds: the two
// ports of one ConnectX card (mlx5 bonds two PFs of one device).
const bondMembers = 2

// perLinkStat reports whether a bond's summed statistic counts per member
// link time or per link events that every member sees alike: the pause
// frames and durations (a host that stops draining pauses each of its
// links; a leaf whose buffer fills pauses each link it receives from) and
// the pause watchdog's events (one per member port). The bond's reading is
// the sum over the members, so such a delta is counted once per member.
func perLinkStat(name string) bool {
	return strings.Contains(name, "_pause") || strings.HasPrefix(name, "tx_pause_storm_")
}

// Global (IEEE 802.3x) pause counters of mlx5 and the per-priority names
// the faults and the traffic model count under (priority 3).
var globalPauseNames = map[string]string{
	"tx_prio3_pause":          "tx_global_pause",
	"tx_prio3_pause_duration": "tx_global_pause_duration",
	"rx_prio3_pause":          "rx_global_pause",
	"rx_prio3_pause_duration": "rx_global_pause_duration",
}

// rxPauseTransition is the counter of received pause episodes (XOFF to
// XON) on a global-pause port.
const rxPauseTransition = "rx_global_pause_transition"

// ethtoolNames is a RoCE port's ethtool list under a profile and role.
func ethtoolNames(profile NICProfile, role portRole) []string {
	var out []string
	for _, n := range ethernetNames[2] {
		if profile != NICFull && n == "rx_bits_phy" {
			continue
		}
		if g, ok := globalPauseNames[n]; ok && profile == NICGlobalPause {
			n = g
		}
		out = append(out, n)
		switch {
		case n == "rx_pcs_symbol_err_phy" && profile != NICFull:
			// Listed by these drivers, absent from the full set.
			out = append(out, "rx_symbol_err_phy", "rx_crc_errors_phy")
		case n == "rx_global_pause_duration":
			out = append(out, rxPauseTransition)
		}
	}
	switch role {
	case roleBond:
		// The collector's member count (a gauge, not a driver statistic)
		// follows the summed statistics, as it writes it.
		return append(filterNames(out, func(n string) bool { return !schemas.BondMemberStat(n) }), schemas.GaugeLAGMembers)
	case roleMember:
		return filterNames(out, schemas.BondMemberStat)
	}
	return out
}

func filterNames(names []string, keep func(string) bool) []string {
	var out []string
	for _, n := range names {
		if keep(n) {
			out = append(out, n)
		}
	}
	return out
}

type setKey struct {
	profile NICProfile
	role    portRole
}

// ethernetSets are the RoCE counter sets by profile and role; the full
// profile's ordinary port is ethernetSet, so older traces keep their bytes.
var ethernetSets = func() map[setKey]*counterSet {
	m := map[setKey]*counterSet{}
	for _, p := range []NICProfile{NICFull, NICUpstream, NICGlobalPause} {
		for _, r := range []portRole{rolePort, roleBond, roleMember} {
			k := setKey{p, r}
			if k == (setKey{NICFull, rolePort}) {
				m[k] = ethernetSet
				continue
			}
			names := [3][]string{ethernetNames[0], ethernetNames[1], ethtoolNames(p, r)}
			if r == roleMember {
				names[0], names[1] = nil, nil
			}
			var alias map[string]string
			if p == NICGlobalPause {
				// The faults and the traffic model count pauses under the
				// priority-3 names; this port counts them as global pause.
				alias = globalPauseNames
			}
			cs := newCounterSet(names, alias)
			if r == roleBond {
				for i := range cs.defs {
					cs.defs[i].perLink = cs.defs[i].src == schemas.SourceEthtool && perLinkStat(cs.defs[i].name)
				}
			}
			m[k] = cs
		}
	}
	return m
}()

// counterSetOf is the set a port exposes.
func counterSetOf(info PortInfo) *counterSet {
	if info.LinkLayer == LinkLayerInfiniBand {
		return infinibandSet
	}
	return ethernetSets[setKey{info.NIC, info.role}]
}

// pauseEpisodeMicros is the mean length of a received pause episode (from
// XOFF to XON) that rx_global_pause_transition counts once: a congested
// switch port toggles its pause within tens of µs as its buffer crosses the
// thresholds; a port paused for long is refreshed, not toggled, which the
// count of episodes by paused time over-counts a little (documented, not
// detected on).
const pauseEpisodeMicros = 50

// lagMembersGauge is the value a port's schemas.GaugeLAGMembers reads
// (newPortState sets it): the member links its summed statistics add up.
func lagMembersGauge(p *PortState) (i int, v uint64) {
	return p.set.lookup(schemas.SourceEthtool, schemas.GaugeLAGMembers), p.links
}

// Bond (RoCE LAG) layout: BondedHosts hosts bond their devices in pairs.
// The RDMA device is mlx5_bond_<n> (port 1, netdev bond<n>); its members
// are ens<n+1>f0np0 and ens<n+1>f1np1, each cabled to its own leaf port
// (swp), the bond to the leaf's port-channel (bond<n>). Member samples are
// named "<bond device>.<member netdev>", as the collector publishes them.
func bondNames(bond int) (device, netdev string, members [bondMembers]string) {
	device, netdev = fmt.Sprintf("mlx5_bond_%d", bond), fmt.Sprintf("bond%d", bond)
	for i := range members {
		members[i] = fmt.Sprintf("ens%df%dnp%d", bond+1, i, i)
	}
	return device, netdev, members
}

// MemberRef names a bond member's sample, for faults on one member's cable
// (a BERDrift): node, bond device "mlx5_bond_<bond>" and member index.
func MemberRef(node string, bond, member int) PortRef {
	device, _, members := bondNames(bond)
	return PortRef{Node: node, Device: device + "." + members[member], Port: 1}
}

// BondRef names a bonded host's RDMA port.
func BondRef(node string, bond int) PortRef {
	device, _, _ := bondNames(bond)
	return PortRef{Node: node, Device: device, Port: 1}
}
