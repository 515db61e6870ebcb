package sink

import (
	"slices"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// port_config is written from the inventory stream by a pipeline of its own
// (its own durable consumer, so a refusal or a retry of one table never
// holds back the other): one row per port whose config is known, when it
// differs from the last row this sink wrote for the port or when
// ConfigRefresh has passed since that row (the collector re-sends an
// unchanged inventory every collector.InventoryRefresh), so the table holds
// the history without a row per inventory message of a busy node.

// ConfigRefresh is how much data time may pass before an unchanged config is
// written again: the collector's inventory refresh, so each refresh writes
// a row and "when was this last confirmed" is known to within it.
const ConfigRefresh = 5 * time.Minute

// configConsumerSuffix names the port_config pipeline's durable consumer.
const configConsumerSuffix = "-config"

// ConfigRow is one row of port_config.
type ConfigRow struct {
	Node, Device string
	Port         uint16
	Netdev       string
	TimeMs       int64
	MTU          *uint32 // nil: unknown (NULL)
	PFC          []uint8
	NP, RP       []uint8
	// Known flags of the lists: an empty list that is known means "on for
	// no priority"; one that is not known is NULL's equivalent.
	PFCKnown, NPKnown, RPKnown bool
	Trust                      string
	BootID                     string
	// Which priority CNPs and RoCE traffic travel on (migration 0015):
	// DSCPPrio is empty when the map is unknown; nil pointers are NULL.
	DSCPPrio                 []uint8
	CNPDSCP, CNPPrio, TClass *uint8
}

// ConfigColumns is the port_config column list, in Values order.
var ConfigColumns = []string{"node", "device", "port", "netdev", "time_ms", "ts", "mtu",
	"pfc_known", "pfc_enabled", "ecn_np_known", "ecn_np_enabled", "ecn_rp_known", "ecn_rp_enabled", "trust", "boot_id",
	"dscp_prio", "cnp_dscp", "cnp_802p_prio", "traffic_class"}

// Values returns the row in ConfigColumns order.
func (r *ConfigRow) Values() []any {
	return []any{r.Node, r.Device, r.Port, r.Netdev, r.TimeMs, dateTime(r.TimeMs), r.MTU,
		u8(r.PFCKnown), r.PFC, u8(r.NPKnown), r.NP, u8(r.RPKnown), r.RP, r.Trust, r.BootID,
		r.DSCPPrio, r.CNPDSCP, r.CNPPrio, r.TClass}
}

// ConfigRows converts a node's inventory: one row per port whose config is
// at least partly known. Priority lists are written sorted and without
// duplicates, so equal configs give equal rows.
func ConfigRows(inv *schemas.Inventory) []ConfigRow {
	var rows []ConfigRow
	for _, p := range inv.Ports {
		c := p.Config
		if c.Empty() {
			continue
		}
		r := ConfigRow{
			Node: inv.Node, Device: p.Device, Port: clampU16(p.Port), Netdev: p.Netdev,
			TimeMs: inv.TimeMs, Trust: c.Trust, BootID: inv.BootID,
		}
		if c.MTU != nil {
			v := uint32(min(max(*c.MTU, 0), 1<<31))
			r.MTU = &v
		}
		r.PFC, r.PFCKnown = priorityColumn(c.PFCEnabled)
		r.NP, r.NPKnown = priorityColumn(c.ECNNPEnabled)
		r.RP, r.RPKnown = priorityColumn(c.ECNRPEnabled)
		r.DSCPPrio = []uint8{}
		if c.DSCPPrio != nil {
			for _, p := range *c.DSCPPrio {
				r.DSCPPrio = append(r.DSCPPrio, uint8(p&7))
			}
		}
		r.CNPDSCP, r.CNPPrio, r.TClass = optU8(c.CNPDSCP), optU8(c.CNP8021pPrio), optU8(c.TrafficClass)
		rows = append(rows, r)
	}
	return rows
}

// priorityColumn is a priority list as Array(UInt8) and its known flag.
// The decoder validated the range (0-7).
func priorityColumn(list *[]int) ([]uint8, bool) {
	out := []uint8{}
	if list == nil {
		return out, false
	}
	for _, p := range *list {
		out = append(out, uint8(p&7))
	}
	slices.Sort(out)
	return slices.Compact(out), true
}

// optU8 is an optional setting the decoder validated (0-255) as a column.
func optU8(v *int) *uint8 {
	if v == nil {
		return nil
	}
	u := uint8(min(max(*v, 0), 255))
	return &u
}

func sameU8(a, b *uint8) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }

// sameConfig compares two rows' settings (not their time or netdev).
func sameConfig(a, b *ConfigRow) bool {
	return sameU8(a.CNPDSCP, b.CNPDSCP) && sameU8(a.CNPPrio, b.CNPPrio) && sameU8(a.TClass, b.TClass) &&
		slices.Equal(a.DSCPPrio, b.DSCPPrio) &&
		((a.MTU == nil && b.MTU == nil) || (a.MTU != nil && b.MTU != nil && *a.MTU == *b.MTU)) &&
		a.PFCKnown == b.PFCKnown && slices.Equal(a.PFC, b.PFC) &&
		a.NPKnown == b.NPKnown && slices.Equal(a.NP, b.NP) &&
		a.RPKnown == b.RPKnown && slices.Equal(a.RP, b.RP) && a.Trust == b.Trust
}

type configPortKey struct {
	node, device string
	port         uint16
}

// configHistory remembers the last row written per port. Only the
// pipeline's goroutine uses it. A sink that starts again has forgotten, and
// writes each port's config once more: a row more, never one less.
type configHistory struct {
	last map[configPortKey]ConfigRow
}

// filter keeps the rows to write: a port's first, a changed config, an
// unchanged one ConfigRefresh after the last row, and anything not newer
// than the last row (a redelivery or a message from before it: writing its
// key again is harmless, skipping it could lose a row never written).
func (h *configHistory) filter(rows []ConfigRow) []ConfigRow {
	out := rows[:0]
	for _, r := range rows {
		k := configPortKey{r.Node, r.Device, r.Port}
		last, ok := h.last[k]
		switch {
		case !ok, r.TimeMs <= last.TimeMs, !sameConfig(&r, &last),
			r.TimeMs-last.TimeMs >= ConfigRefresh.Milliseconds():
		default:
			continue
		}
		if !ok || r.TimeMs > last.TimeMs {
			h.last[k] = r
		}
		out = append(out, r)
	}
	return out
}

// configPipeline writes port_config from the inventory stream.
func (s *Sink) configPipeline() (*table[ConfigRow], error) {
	hist := &configHistory{last: make(map[configPortKey]ConfigRow)}
	return newTable(s, source[ConfigRow]{
		stream: schemas.StreamInventory, consumer: s.cfg.ConsumerPrefix + configConsumerSuffix,
		decode: func(subject string, data []byte) ([]ConfigRow, error) {
			// A message the inventory pipeline cannot use it dead-letters
			// (with the reason); here it is only acked, so the dead-letter
			// stream gets one copy, not two.
			inv, err := schemas.DecodeInventory(data)
			if err != nil || schemas.CheckInventorySubject(subject, inv) != nil {
				return nil, nil
			}
			return hist.filter(ConfigRows(inv)), nil
		},
	}, tableSpec[ConfigRow]{name: "port_config", columns: ConfigColumns, values: (*ConfigRow).Values})
}
