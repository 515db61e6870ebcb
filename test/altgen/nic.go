package altgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// NIC profiles: what the hosts' driver lists (Config.NIC). The physics is
// the same under every profile, drawn from the same random sources in the
// same order, so one seed gives the same faults at the same times whatever
// the profile; only what a reading shows differs:
//   - NICFull: the historical set, rx_bits_phy and per-priority pause
//     counters (priority 0 and the lossless one);
//   - NICUpstream: an mlx5 under an upstream kernel before 2026 (5.15,
//     6.5) or MLNX_OFED 5.x: no rx_bits_phy; rx_symbol_err_phy and
//     rx_crc_errors_phy listed;
//   - NICGlobalPause: NICUpstream on IEEE 802.3x link-level flow control:
//     tx/rx_global_pause, their durations (µs) and rx_global_pause_transition
//     instead of any per-priority pause counter; every host reports its
//     config with pfc_enabled [];
//   - NICBonded: NICUpstream with the RoCE hosts of every leaf but its last
//     on a RoCE LAG: the RDMA device mlx5_bond_<p> (port 1, netdev
//     bond<p>) carries the counters, hw_counters and the sum over its two
//     members of the non-PHY ethtool statistics; each member netdev
//     (enp<bus>s0f0np0, enp<bus>s0f1np1) is a sample of its own,
//     "mlx5_bond_<p>.<netdev>", with its PHY statistics only. Member 0's
//     PHY is the port's own physics (a drift is on member 0's cable, and
//     labelled on its sample); member 1 has a PHY of its own (its own BER
//     and random source). Pauses are per link: a stuck host pauses both
//     links, a leaf both links it receives from, so the bond's pause
//     counters read twice a single link's; the bond line's ethtool carries
//     the collector's "lag_members": 2, which says so.
const (
	NICFull        = "full"
	NICUpstream    = "mlx5-upstream"
	NICGlobalPause = "global-pause"
	NICBonded      = "bonded"
)

// NICs are the profiles in the order a sweep runs them.
var NICs = []string{NICFull, NICUpstream, NICGlobalPause, NICBonded}

// pauseEpisodeMicros is the mean received pause episode (XOFF to XON)
// rx_global_pause_transition counts once: a congested switch port toggles
// within tens of µs as its buffer crosses the thresholds.
const pauseEpisodeMicros = 50

// member1 is the second member link of a bond: its PHY alone.
type member1 struct {
	r       *rand.Rand
	baseBER float64
	wander  float64
	acc     map[string]float64
	prev    map[string]float64
}

var memberPHY = []string{"rx_bits_phy", "rx_corrected_bits_phy", "rx_pcs_symbol_err_phy", "rx_err_lane_0_phy",
	"rx_err_lane_1_phy", "rx_err_lane_2_phy", "rx_err_lane_3_phy", "link_down_events_phy"}

func phyStat(name string) bool {
	switch name {
	case "rx_bits_phy", "rx_corrected_bits_phy", "rx_pcs_symbol_err_phy", "rx_symbol_err_phy", "rx_crc_errors_phy", "link_down_events_phy":
		return true
	}
	return strings.HasPrefix(name, "rx_err_lane_")
}

// bondLinks is how many member links a bond has; its per-link statistics
// read bondLinks times one link's.
const bondLinks = 2

// lagMembers is the collector's gauge on a bond line (schemas.GaugeLAGMembers:
// altgen is independent of the code it tests, so the name is spelt out).
const lagMembers = "lag_members"

// perLink: a bond's sum counts these once per member link.
func perLink(name string) bool {
	return strings.Contains(name, "_pause") || strings.HasPrefix(name, "tx_pause_storm_")
}

func validNIC(s string) bool {
	for _, n := range append([]string{""}, NICs...) {
		if s == n {
			return true
		}
	}
	return false
}

func (g *gen) nicProfile() string {
	if g.cfg.NIC == "" {
		return NICFull
	}
	return g.cfg.NIC
}

// bondPort sets p up as a RoCE LAG when the profile bonds its host. It
// draws from its own random source only.
func (g *gen) bondPort(p *port, ports int) {
	if g.nicProfile() != NICBonded || p.ib || !p.ethOK || p.host == g.cfg.HostsPerLeaf-1 {
		return
	}
	idx := p.devIdx
	bus := 65 + 32*idx
	p.bond = [2]string{fmt.Sprintf("enp%ds0f0np0", bus), fmt.Sprintf("enp%ds0f1np1", bus)}
	p.dev, p.netdev = fmt.Sprintf("mlx5_bond_%d", idx), fmt.Sprintf("bond%d", idx)
	r := rand.New(rand.NewPCG(g.cfg.Seed^0xb0d, uint64(len(g.ports))<<8|uint64(ports)))
	m := &member1{r: r, acc: map[string]float64{}, prev: map[string]float64{}}
	m.baseBER = math.Exp(math.Log(3e-9) + r.NormFloat64()*1.3)
	if g.drawn() {
		lo, hi := g.ph.EthBERLo, g.ph.EthBERHi
		m.baseBER = math.Exp(math.Log(lo) + r.Float64()*math.Log(hi/lo))
	}
	m.acc["rx_bits_phy"] = math.Floor(r.Float64() * 1e17)
	m.acc["link_down_events_phy"] = float64(r.IntN(3))
	p.m1 = m
}

// has reports whether member 1's PHY keeps the statistic.
func (m *member1) has(name string) bool {
	for _, n := range memberPHY {
		if n == name {
			return true
		}
	}
	return false
}

// stepMember1 advances member 1's PHY by one second.
func (g *gen) stepMember1(p *port) {
	m := p.m1
	for k, v := range m.acc {
		m.prev[k] = v
	}
	if p.down {
		return
	}
	r := m.r
	bits := p.rateGbps * 1e9
	m.acc["rx_bits_phy"] += bits
	m.wander = 0.997*m.wander + 0.02*r.NormFloat64()
	ber := math.Exp(math.Log(m.baseBER) + m.wander)
	errBits := math.Round(poisson(r, ber*bits/2.2) * 2.2)
	m.acc["rx_corrected_bits_phy"] += errBits
	lane := r.IntN(4)
	m.acc[fmt.Sprintf("rx_err_lane_%d_phy", lane)] += math.Round(errBits * 0.7)
	m.acc[fmt.Sprintf("rx_err_lane_%d_phy", (lane+1)%4)] += math.Round(errBits * 0.3)
}

// outName is what the profile calls an ethtool statistic of the model, ""
// when the port does not list it.
func (g *gen) outName(name string) string {
	prof := g.nicProfile()
	if name == "rx_bits_phy" && prof != NICFull {
		return ""
	}
	if prof == NICGlobalPause && (strings.HasPrefix(name, "tx_prio") || strings.HasPrefix(name, "rx_prio")) {
		if !strings.HasPrefix(name[2:], fmt.Sprintf("_prio%d_", g.prio)) {
			return "" // no PFC on any priority: no per-priority counters
		}
		return name[:2] + "_global" + name[len("tx_prio0"):]
	}
	return name
}

// derivedStats are the statistics the profile lists that the model does not
// keep apart, from the readings written so far (name -> value): the
// uncorrected symbols and the frames they spoil, the received pause
// episodes; and on a LAG's bond line (phy false: the only line without PHY
// statistics) the collector's member count, lag_members, the links its
// summed statistics add up (docs/formats.md, "Bonded RoCE ports").
func (g *gen) derivedStats(vals map[string]uint64, phy bool) []string {
	prof := g.nicProfile()
	var out []string
	if !phy && prof == NICBonded {
		out = append(out, fmt.Sprintf(`%q:%d`, lagMembers, bondLinks))
	}
	if phy && prof != NICFull {
		if v, ok := vals["rx_pcs_symbol_err_phy"]; ok {
			out = append(out, fmt.Sprintf(`"rx_symbol_err_phy":%d`, v), fmt.Sprintf(`"rx_crc_errors_phy":%d`, v/2))
		}
	}
	if prof == NICGlobalPause {
		if v, ok := vals["rx_global_pause_duration"]; ok {
			out = append(out, fmt.Sprintf(`"rx_global_pause_transition":%d`, v/pauseEpisodeMicros))
		}
	}
	return out
}
