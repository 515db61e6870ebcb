package schemas

import (
	"fmt"
	"slices"
	"strings"
)

// PortConfig is what a port was configured with when it was read: the
// settings that decide whether RoCE traffic is lossless (DESIGN: the trace's
// `config` object; the inventory's `cfg`). Every field is optional: nil (or
// an empty Trust) means the host did not expose it, never "off". A present
// but empty priority list means "on for no priority".
type PortConfig struct {
	// MTU is the netdev MTU in bytes (/sys/class/net/<netdev>/mtu).
	MTU *int `msgpack:"mtu,omitempty" json:"mtu,omitempty"`
	// PFCEnabled lists the priorities (0-7) with PFC on.
	PFCEnabled *[]int `msgpack:"pfc,omitempty" json:"pfc_enabled,omitempty"`
	// ECNNPEnabled / ECNRPEnabled list the priorities whose ECN notification
	// point (the receiver sending CNPs) / reaction point (the sender slowing
	// down on CNPs) is on.
	ECNNPEnabled *[]int `msgpack:"np,omitempty" json:"ecn_np_enabled,omitempty"`
	ECNRPEnabled *[]int `msgpack:"rp,omitempty" json:"ecn_rp_enabled,omitempty"`
	// Trust is "pcp" or "dscp"; "" is unknown.
	Trust string `msgpack:"trust,omitempty" json:"trust,omitempty"`
	// DSCPPrio is the DSCP-to-priority map the port classifies received
	// packets with under trust dscp: DSCPPrio[d] is the priority of DSCP d,
	// NumDSCP entries. Known only when the host lists every DSCP (mlx5
	// does while trust is dscp); a partial table would leave the missing
	// code points to a driver default nobody can read.
	DSCPPrio *[]int `msgpack:"dscp,omitempty" json:"dscp_prio,omitempty"`
	// CNPDSCP and CNP8021pPrio are the DSCP and the 802.1p priority the
	// port's notification point marks its CNPs with (MLNX_OFED's
	// ecn/roce_np/cnp_dscp and cnp_802p_prio). Which one decides the CNP's
	// priority depends on the trust mode of the ports it crosses: see
	// CNPPriority.
	CNPDSCP      *int `msgpack:"cdscp,omitempty" json:"cnp_dscp,omitempty"`
	CNP8021pPrio *int `msgpack:"cprio,omitempty" json:"cnp_802p_prio,omitempty"`
	// TrafficClass is the IP traffic class (DSCP << 2 | ECN) the RDMA
	// device forces on every RoCE QP of the port (MLNX_OFED's
	// /sys/class/infiniband/<dev>/tc/<port>/traffic_class, "Global
	// tclass="); nil when none is forced or the host does not say.
	TrafficClass *int `msgpack:"tclass,omitempty" json:"traffic_class,omitempty"`
}

// NumDSCP is the number of DSCP code points (6 bits).
const NumDSCP = 64

// MaxTrafficClass is the largest IP traffic class (8 bits).
const MaxTrafficClass = 255

// MaxPriority is the highest 802.1p priority.
const MaxPriority = 7

// Empty reports whether nothing is known.
func (c *PortConfig) Empty() bool {
	return c == nil || (c.MTU == nil && c.PFCEnabled == nil && c.ECNNPEnabled == nil && c.ECNRPEnabled == nil && c.Trust == "" &&
		c.DSCPPrio == nil && c.CNPDSCP == nil && c.CNP8021pPrio == nil && c.TrafficClass == nil)
}

// Validate checks the ranges a real port can have; where names the
// config's origin in the error (e.g. "trace line 12").
func (c *PortConfig) Validate() error {
	if c == nil {
		return nil
	}
	if c.MTU != nil && (*c.MTU < 68 || *c.MTU > 65536) {
		return fmt.Errorf("config mtu %d: outside 68..65536", *c.MTU)
	}
	for _, f := range []struct {
		name string
		v    *[]int
	}{{"pfc_enabled", c.PFCEnabled}, {"ecn_np_enabled", c.ECNNPEnabled}, {"ecn_rp_enabled", c.ECNRPEnabled}} {
		if f.v == nil {
			continue
		}
		if len(*f.v) > MaxPriority+1 {
			return fmt.Errorf("config %s: %d priorities, at most %d", f.name, len(*f.v), MaxPriority+1)
		}
		for _, p := range *f.v {
			if p < 0 || p > MaxPriority {
				return fmt.Errorf("config %s: priority %d outside 0..%d", f.name, p, MaxPriority)
			}
		}
	}
	switch c.Trust {
	case "", "pcp", "dscp":
	default:
		return fmt.Errorf("config trust %q: want pcp or dscp", c.Trust)
	}
	if c.DSCPPrio != nil {
		if len(*c.DSCPPrio) != NumDSCP {
			return fmt.Errorf("config dscp_prio: %d entries, want one per DSCP (%d)", len(*c.DSCPPrio), NumDSCP)
		}
		for d, p := range *c.DSCPPrio {
			if p < 0 || p > MaxPriority {
				return fmt.Errorf("config dscp_prio: DSCP %d maps to priority %d, outside 0..%d", d, p, MaxPriority)
			}
		}
	}
	for _, f := range []struct {
		name string
		v    *int
		max  int
	}{{"cnp_dscp", c.CNPDSCP, NumDSCP - 1}, {"cnp_802p_prio", c.CNP8021pPrio, MaxPriority}, {"traffic_class", c.TrafficClass, MaxTrafficClass}} {
		if f.v != nil && (*f.v < 0 || *f.v > f.max) {
			return fmt.Errorf("config %s %d: outside 0..%d", f.name, *f.v, f.max)
		}
	}
	return nil
}

// CNPPriority is the priority the port's CNPs travel on, and the setting
// that decides it: under trust dscp the fabric classifies a CNP by its
// DSCP, so the port's own map of cnp_dscp (the switches are configured
// like the fabric's hosts, which config_mismatch checks separately); under
// trust pcp by the 802.1p field, cnp_802p_prio. known is false when the
// settings that decide it are not all known.
func (c *PortConfig) CNPPriority() (prio int, setting string, known bool) {
	if c == nil {
		return 0, "", false
	}
	switch c.Trust {
	case "dscp":
		if c.CNPDSCP != nil && c.DSCPPrio != nil && len(*c.DSCPPrio) == NumDSCP && *c.CNPDSCP >= 0 && *c.CNPDSCP < NumDSCP {
			return (*c.DSCPPrio)[*c.CNPDSCP], "cnp_dscp", true
		}
	case "pcp":
		if c.CNP8021pPrio != nil {
			return *c.CNP8021pPrio, "cnp_802p_prio", true
		}
	}
	return 0, "", false
}

// Equal reports whether two configs say the same (priority lists compared
// as sets).
func (c *PortConfig) Equal(o *PortConfig) bool {
	if c.Empty() || o.Empty() {
		return c.Empty() == o.Empty()
	}
	return eqIntPtr(c.MTU, o.MTU) && eqPrios(c.PFCEnabled, o.PFCEnabled) &&
		eqPrios(c.ECNNPEnabled, o.ECNNPEnabled) && eqPrios(c.ECNRPEnabled, o.ECNRPEnabled) && c.Trust == o.Trust &&
		eqIntList(c.DSCPPrio, o.DSCPPrio) && eqIntPtr(c.CNPDSCP, o.CNPDSCP) && eqIntPtr(c.CNP8021pPrio, o.CNP8021pPrio) &&
		eqIntPtr(c.TrafficClass, o.TrafficClass)
}

// Merge returns c with every field o knows replacing c's: a trace may carry
// only what changed.
func (c *PortConfig) Merge(o *PortConfig) *PortConfig {
	var out PortConfig
	if c != nil {
		out = *c
	}
	if o == nil {
		return &out
	}
	if o.MTU != nil {
		out.MTU = o.MTU
	}
	if o.PFCEnabled != nil {
		out.PFCEnabled = o.PFCEnabled
	}
	if o.ECNNPEnabled != nil {
		out.ECNNPEnabled = o.ECNNPEnabled
	}
	if o.ECNRPEnabled != nil {
		out.ECNRPEnabled = o.ECNRPEnabled
	}
	if o.Trust != "" {
		out.Trust = o.Trust
	}
	if o.DSCPPrio != nil {
		out.DSCPPrio = o.DSCPPrio
	}
	if o.CNPDSCP != nil {
		out.CNPDSCP = o.CNPDSCP
	}
	if o.CNP8021pPrio != nil {
		out.CNP8021pPrio = o.CNP8021pPrio
	}
	if o.TrafficClass != nil {
		out.TrafficClass = o.TrafficClass
	}
	return &out
}

// PriorityOn reports whether priority p is in the list; known is false when
// the list itself is unknown.
func PriorityOn(list *[]int, p int) (on, known bool) {
	if list == nil {
		return false, false
	}
	return slices.Contains(*list, p), true
}

func eqIntPtr(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// eqIntList compares two lists element by element (the DSCP map is
// ordered: its index is the DSCP).
func eqIntList(a, b *[]int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(*a, *b)
}

func eqPrios(a, b *[]int) bool {
	if a == nil || b == nil {
		return a == b
	}
	var ma, mb uint8
	for _, p := range *a {
		ma |= 1 << (uint(p) & 7)
	}
	for _, p := range *b {
		mb |= 1 << (uint(p) & 7)
	}
	return ma == mb
}

// A RoCE LAG (mlx5_bond_0 over bond0) is one RDMA port whose physical
// layer is its member netdevs: each cable has its own BER, FEC and link
// flaps. The collector publishes each member as a port sample of its own,
// port 1 of the device "<bond device>.<member netdev>" (mlx5_bond_0.ens1f0np0):
// RDMA device names have no '.', so the first '.' splits the name again,
// and nothing that carries a device (the wire, the trace, subjects, whose
// tokens are node names, topology endpoints split on '/') refuses one.
const bondMemberSep = "."

// BondMemberDevice is the device name of a LAG member's port sample.
func BondMemberDevice(bondDevice, member string) string {
	return bondDevice + bondMemberSep + member
}

// SplitBondMember splits a device name made by BondMemberDevice; ok is
// false for any other device. Whether the bond device exists on the node
// is for the caller to check.
func SplitBondMember(device string) (bondDevice, member string, ok bool) {
	bondDevice, member, ok = strings.Cut(device, bondMemberSep)
	return bondDevice, member, ok && bondDevice != "" && member != ""
}

// BondMemberStat reports whether an ethtool statistic belongs to one cable's
// physical layer, so a LAG's member sample carries it instead of the bond's
// sum (the collector's rule, which the simulator follows).
// The rule, by name, on mlx5's counter groups (PPCNT's physical layer and
// statistical groups, and the module events): a "_phy" statistic whose
// name says bits, symbols, FEC, CRC, per-lane errors, link-down events or
// malformed frames (fragments, jabbers); and the module_* events of the
// cable's transceiver. Other "_phy" statistics count traffic
// (rx_packets_phy, rx_discards_phy, tx_pause_ctrl_phy, rx_prio3_bytes...)
// and are summed like the rest.
func BondMemberStat(name string) bool {
	if strings.HasPrefix(name, "module_") {
		return true
	}
	stem, ok := strings.CutSuffix(name, "_phy")
	if !ok {
		return false
	}
	for _, w := range [...]string{"bits", "symbol_err", "fec", "crc_err", "err_lane", "link_down", "fragments", "jabbers"} {
		if strings.Contains(stem, w) {
			return true
		}
	}
	return false
}
