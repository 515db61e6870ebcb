package sink

import (
	"fmt"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestConfigRows(t *testing.T) {
	mtu := 9000
	bad := 1 << 40
	inv := &schemas.Inventory{Node: "gpu-017", BootID: "b1", TimeMs: 1767225600000, Ports: []schemas.PortInventory{
		{Device: "mlx5_0", Port: 1, Netdev: "eth2", Config: &schemas.PortConfig{MTU: &mtu, PFCEnabled: &[]int{4, 3, 3}, ECNNPEnabled: &[]int{}, Trust: "dscp"}},
		{Device: "mlx5_1", Port: 1}, // InfiniBand: nothing known, no row
		{Device: "mlx5_2", Port: 1, Config: &schemas.PortConfig{}},
		{Device: "mlx5_3", Port: 2, Config: &schemas.PortConfig{MTU: &bad}},
	}}
	rows := ConfigRows(inv)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2 (ports without any known setting write none): %+v", len(rows), rows)
	}
	r := rows[0]
	if r.Node != "gpu-017" || r.Device != "mlx5_0" || r.Port != 1 || r.Netdev != "eth2" || r.TimeMs != 1767225600000 || r.BootID != "b1" {
		t.Errorf("identity %+v", r)
	}
	if r.MTU == nil || *r.MTU != 9000 || !r.PFCKnown || fmt.Sprint(r.PFC) != "[3 4]" || !r.NPKnown || len(r.NP) != 0 || r.NP == nil || r.RPKnown || r.RP == nil || r.Trust != "dscp" {
		t.Errorf("settings %+v (mtu %v)", r, r.MTU)
	}
	if rows[1].MTU == nil || *rows[1].MTU != 1<<31 {
		t.Errorf("an absurd mtu is clamped, not wrapped: %v", rows[1].MTU)
	}
	vals := r.Values()
	if len(vals) != len(ConfigColumns) {
		t.Fatalf("%d values for %d columns", len(vals), len(ConfigColumns))
	}
	if vals[5] != time.Unix(1767225600, 0).UTC() {
		t.Errorf("ts %v", vals[5])
	}
}

func TestConfigHistoryFilter(t *testing.T) {
	const minute = int64(60_000)
	row := func(port uint16, atMin int64, mtu uint32) ConfigRow {
		return ConfigRow{Node: "n", Device: "mlx5_0", Port: port, TimeMs: atMin * minute, MTU: &mtu, PFC: []uint8{3}, PFCKnown: true}
	}
	steps := []struct {
		name  string
		row   ConfigRow
		write bool
	}{
		{"first of a port", row(1, 0, 9000), true},
		{"first of another port", row(2, 0, 9000), true},
		{"unchanged 1 min later", row(1, 1, 9000), false},
		{"changed", row(1, 2, 4200), true},
		{"unchanged 4 min after the last row", row(1, 6, 4200), false},
		{"refresh: 5 min after the last row", row(1, 7, 4200), true},
		{"redelivered older message", row(1, 2, 4200), true},
		{"the same message again", row(1, 7, 4200), true},
		{"unchanged after the redeliveries", row(1, 8, 4200), false},
		{"pfc known to unknown is a change", func() ConfigRow { r := row(1, 9, 4200); r.PFCKnown, r.PFC = false, []uint8{}; return r }(), true},
		{"trust appears", func() ConfigRow {
			r := row(1, 10, 4200)
			r.PFCKnown, r.PFC, r.Trust = false, []uint8{}, "pcp"
			return r
		}(), true},
		{"mtu unknown is a change", func() ConfigRow {
			r := row(2, 1, 0)
			r.MTU = nil
			return r
		}(), true},
	}
	h := &configHistory{last: map[configPortKey]ConfigRow{}}
	for _, s := range steps {
		got := h.filter([]ConfigRow{s.row})
		if (len(got) == 1) != s.write {
			t.Fatalf("%s: written %v, want %v", s.name, len(got) == 1, s.write)
		}
	}
}
