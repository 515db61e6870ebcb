package report_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/report"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// The config_history query and the postmortem: what gpu-017 mlx5_0/1 was
// configured with at a cnp_ecn_imbalance's onset, and that its ECN
// notification point was switched off during it; rows before the window
// find what was in force; refreshes fold into seen_until; gpu-020 (whose
// incident has no config) says nothing is recorded.
func TestConfigHistoryAndPostmortem(t *testing.T) {
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	conn := chtest.Open(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	cfgAt := func(node string, atS int64, mtu int, np []int) *schemas.Inventory {
		return &schemas.Inventory{Node: node, BootID: "b", TimeMs: t0 + atS*1000, Ports: []schemas.PortInventory{
			{Device: "mlx5_0", Port: 1, Netdev: "eth2", Config: &schemas.PortConfig{MTU: &mtu, PFCEnabled: &[]int{3}, ECNNPEnabled: &np, Trust: "dscp"}},
		}}
	}
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO port_config ("+strings.Join(sink.ConfigColumns, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range []*schemas.Inventory{
		cfgAt("gpu-017", -3600, 9000, []int{3}), // an hour before
		cfgAt("gpu-017", -300, 9000, []int{3}),  // refresh
		cfgAt("gpu-017", 120, 9000, []int{}),    // NP switched off during the incident
		cfgAt("gpu-017", 420, 9000, []int{}),    // refresh
		cfgAt("gpu-017", 900, 4200, []int{}),    // after the incident: not in its window
	} {
		for _, r := range sink.ConfigRows(inv) {
			if err := batch.Append(r.Values()...); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}

	res, err := report.Run(ctx, conn, "config_history", report.Params{
		From: time.UnixMilli(t0), To: time.UnixMilli(t0 + 600_000), Node: "gpu-017"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, row := range res.Rows {
		var cells []string
		for _, c := range []string{"since", "seen_until", "mtu", "pfc_enabled", "ecn_np_enabled", "ecn_rp_enabled", "trust", "change"} {
			v := row[res.Column(c)]
			if tm, ok := v.(time.Time); ok {
				cells = append(cells, tm.UTC().Format("15:04:05"))
				continue
			}
			cells = append(cells, v.(string))
		}
		got = append(got, strings.Join(cells, " "))
	}
	want := []string{
		"23:00:00 23:55:00 9000 [3] [3] unknown dscp in force at --from",
		"00:02:00 00:07:00 9000 [3] [] unknown dscp ecn_np [3] -> []",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("config_history\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The postmortem of an incident on that port shows it.
	imb := causeEvent(schemas.TypeCNPECNImbalance, "cnp_ecn_imbalance/gpu-017/mlx5_0/1/1767225660",
		schemas.Subject{Node: "gpu-017", Device: "mlx5_0", Port: 1}, 60, 1, nil)
	end := schemas.Millis(t0 + 500_000)
	imb.State, imb.End = schemas.StateResolved, &end
	other := causeEvent(schemas.TypeLinkFlap, "link_flap/gpu-020/mlx5_0/1/1767225610",
		schemas.Subject{Node: "gpu-020", Device: "mlx5_0", Port: 1}, 10, 1, nil)
	insertEvents(ctx, t, conn, imb, other)
	path, incs, err := report.Postmortem(ctx, conn, report.Params{From: time.UnixMilli(t0), To: time.UnixMilli(t0 + 600_000)}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, s := range []string{
		"Configuration of gpu-017/mlx5_0/1 (netdev eth2) at the onset, in force since 2025-12-31 23:00:00Z: mtu 9000, PFC on [3], ECN notification point on [3], reaction point on unknown, trust dscp.",
		"| 2026-01-01 00:02:00Z | ecn_np [3] -> [] | 9000 | [3] | [] | unknown | dscp |",
		"No configuration of gpu-020/mlx5_0/1 is recorded",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("report lacks %q:\n%s", s, md)
		}
	}
	for _, inc := range incs {
		if inc.Node == "gpu-017" && len(inc.Config) != 2 {
			t.Errorf("gpu-017 incident config rows %+v, want 2 (onset, one change)", inc.Config)
		}
	}
}
