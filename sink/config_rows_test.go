package sink_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// configInventory is gpu-017's inventory at minute atMin: mlx5_0/1 with
// the given MTU and PFC on 3, mlx5_1/1 (InfiniBand, nothing known) and
// mlx5_2/1 with only PFC known (on for no priority).
func configInventory(atMin int64, mtu int) *schemas.Inventory {
	// mlx5_0/1 classifies DSCP d to priority d/8 (26 -> 3), marks CNPs
	// with DSCP 48 and 802.1p priority 6 and forces traffic class 106
	// (DSCP 26, ECT(0)).
	dscp := make([]int, schemas.NumDSCP)
	for d := range dscp {
		dscp[d] = d / 8
	}
	cnpDSCP, cnpPrio, tclass := 48, 6, 106
	return &schemas.Inventory{
		Version: schemas.Version, Node: "gpu-017", BootID: "boot-a", TimeMs: 1767225600000 + atMin*60_000,
		Ports: []schemas.PortInventory{
			{Device: "mlx5_0", Port: 1, Netdev: "eth2", LinkLayer: "Ethernet", State: "ACTIVE",
				Config: &schemas.PortConfig{MTU: &mtu, PFCEnabled: &[]int{3}, ECNNPEnabled: &[]int{3}, ECNRPEnabled: &[]int{3}, Trust: "dscp",
					DSCPPrio: &dscp, CNPDSCP: &cnpDSCP, CNP8021pPrio: &cnpPrio, TrafficClass: &tclass}},
			{Device: "mlx5_1", Port: 1, LinkLayer: "InfiniBand", State: "ACTIVE"},
			{Device: "mlx5_2", Port: 1, Netdev: "eth3", LinkLayer: "Ethernet", State: "ACTIVE",
				Config: &schemas.PortConfig{PFCEnabled: &[]int{}}},
		},
	}
}

// The inventory stream lands in port_config with its history: a row per
// change and per refresh, none for an unchanged config in between, none
// for a port with nothing known; unknown is NULL / *_known 0; a
// redelivered inventory is harmless; a poison inventory is dead-lettered
// once (by the inventory pipeline), not once per table.
func TestSinkWritesPortConfigHistory(t *testing.T) {
	t.Parallel()
	conn, dsn := migrated(t, chtest.DSN(t))
	js := startNATS(t)
	s, _ := runSink(t, js, conn, fastConfig(dsn))

	for _, inv := range []*schemas.Inventory{
		configInventory(0, 9000),
		configInventory(1, 9000), // unchanged: no rows
		configInventory(2, 4200), // mlx5_0/1 changed; mlx5_2/1 unchanged
		configInventory(7, 4200), // refresh: both
		// Redelivered (older than the last row): written as it is, so
		// mlx5_0/1 +2min collapses, and mlx5_2/1 gains a row at +2min that
		// says what it said then: an extra row, never a lost one.
		configInventory(2, 4200),
	} {
		publishInventory(t, js, inv)
	}
	publish(t, js, schemas.InventorySubject("gpu-017"), []byte("not msgpack"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitDrained(ctx); err != nil {
		t.Fatal(err)
	}

	// The table's columns are exactly what the sink writes.
	cols := chtest.Strings(t, conn, "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = 'port_config' ORDER BY name")
	if want := slices.Sorted(slices.Values(sink.ConfigColumns)); !reflect.DeepEqual(cols, want) {
		t.Fatalf("port_config columns\n%v\nsink writes\n%v", cols, want)
	}

	rows, err := conn.Query(ctx, `SELECT device, port, netdev, time_ms, mtu, pfc_known, pfc_enabled, ecn_np_known, ecn_np_enabled,
		ecn_rp_known, ecn_rp_enabled, trust, boot_id FROM port_config FINAL WHERE node = 'gpu-017' ORDER BY device, port, time_ms`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var (
			device, netdev, trust, boot string
			port                        uint16
			timeMs                      int64
			mtu                         *uint32
			pfcK, npK, rpK              uint8
			pfc, np, rp                 []uint8
		)
		if err := rows.Scan(&device, &port, &netdev, &timeMs, &mtu, &pfcK, &pfc, &npK, &np, &rpK, &rp, &trust, &boot); err != nil {
			t.Fatal(err)
		}
		m := "NULL"
		if mtu != nil {
			m = fmt.Sprint(*mtu)
		}
		got = append(got, fmt.Sprintf("%s/%d %s +%dmin mtu=%s pfc=%d%v np=%d%v rp=%d%v trust=%q %s",
			device, port, netdev, (timeMs-1767225600000)/60_000, m, pfcK, pfc, npK, np, rpK, rp, trust, boot))
	}
	rows.Close()
	want := []string{
		`mlx5_0/1 eth2 +0min mtu=9000 pfc=1[3] np=1[3] rp=1[3] trust="dscp" boot-a`,
		`mlx5_0/1 eth2 +2min mtu=4200 pfc=1[3] np=1[3] rp=1[3] trust="dscp" boot-a`,
		`mlx5_0/1 eth2 +7min mtu=4200 pfc=1[3] np=1[3] rp=1[3] trust="dscp" boot-a`,
		`mlx5_2/1 eth3 +0min mtu=NULL pfc=1[] np=0[] rp=0[] trust="" boot-a`,
		`mlx5_2/1 eth3 +2min mtu=NULL pfc=1[] np=0[] rp=0[] trust="" boot-a`,
		`mlx5_2/1 eth3 +7min mtu=NULL pfc=1[] np=0[] rp=0[] trust="" boot-a`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("port_config FINAL\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The settings that decide the CNPs' priority (migration 0015): known
	// on mlx5_0/1, NULL and an empty map on mlx5_2/1.
	cnp := chtest.Strings(t, conn, `SELECT concat(device, ' ', toString(length(dscp_prio)), ' ', toString(dscp_prio[27]), ' ',
		ifNull(toString(cnp_dscp), 'NULL'), ' ', ifNull(toString(cnp_802p_prio), 'NULL'), ' ', ifNull(toString(traffic_class), 'NULL')) FROM port_config FINAL
		WHERE node = 'gpu-017' AND time_ms = 1767225600000 ORDER BY device`)
	if want := []string{"mlx5_0 64 3 48 6 106", "mlx5_2 0 0 NULL NULL NULL"}; !slices.Equal(cnp, want) {
		t.Errorf("port_config CNP settings %q, want %q", cnp, want)
	}
	dl := deadLetters(t, js, 1)
	if d, ok := dl[schemas.InventorySubject("gpu-017")]; !ok || !strings.Contains(d.reason, "undecodable") {
		t.Fatalf("dead letters %+v: want the poison inventory once, with its reason", dl)
	}
	if st := s.Stats()["port_config"]; st.Rows < 6 || st.DeadLettered != 0 {
		t.Fatalf("port_config stats %+v: want >= 6 rows and no dead letters of its own", st)
	}
}
