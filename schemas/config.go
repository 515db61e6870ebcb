package schemas

import (
	"fmt"
	"slices"
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
}

// MaxPriority is the highest 802.1p priority.
const MaxPriority = 7

// Empty reports whether nothing is known.
func (c *PortConfig) Empty() bool {
	return c == nil || (c.MTU == nil && c.PFCEnabled == nil && c.ECNNPEnabled == nil && c.ECNRPEnabled == nil && c.Trust == "")
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
	return nil
}

// Equal reports whether two configs say the same (priority lists compared
// as sets).
func (c *PortConfig) Equal(o *PortConfig) bool {
	if c.Empty() || o.Empty() {
		return c.Empty() == o.Empty()
	}
	return eqIntPtr(c.MTU, o.MTU) && eqPrios(c.PFCEnabled, o.PFCEnabled) &&
		eqPrios(c.ECNNPEnabled, o.ECNNPEnabled) && eqPrios(c.ECNRPEnabled, o.ECNRPEnabled) && c.Trust == o.Trust
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
