package collector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/collector/sysfstest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// fakeEthtool answers ethtool -S from a table: what a LAG's members would
// say on a host this machine is not.
type fakeEthtool struct {
	stats map[string]map[string]uint64
	fail  map[string]bool
	asked []string
}

func (f *fakeEthtool) Stats(netdev string) (map[string]uint64, error) {
	f.asked = append(f.asked, netdev)
	if f.fail[netdev] {
		return nil, fmt.Errorf("ethtool stats of netdev %s: %w", netdev, errors.ErrUnsupported)
	}
	s, ok := f.stats[netdev]
	if !ok {
		return nil, fmt.Errorf("ethtool stats of netdev %s: operation not supported", netdev)
	}
	return maps.Clone(s), nil
}

func (f *fakeEthtool) Close() error { return nil }

// lagSpec is a RoCE LAG (mlx5_bond_0 port 1 over bond0 = ens1f0np0 +
// ens1f1np1) and an mlx4 device with device-wide hw_counters.
func lagSpec(cnpPrio1 string) sysfstest.Spec {
	spec := sysfstest.MLX5RoCE(1, 1)
	spec.Devices[0].Name = "mlx5_bond_0"
	spec.Devices[0].Ports[0].Netdevs = []string{"bond0", "bond0"}
	spec.Devices[0].TrafficClass = map[int]string{1: "Global tclass=106"}
	spec.Devices = append(spec.Devices, sysfstest.Device{
		Name:       "mlx4_0",
		Files:      map[string]string{"fw_ver": "2.42.5000", "hca_type": "MT4099"},
		HWCounters: map[string]string{"rq_num_oos": "7", "sq_num_wrfe": "3", "rq_num_rnr": "11"},
		Ports: []sysfstest.Port{
			{Num: 1, Files: map[string]string{"state": "4: ACTIVE", "rate": "40 Gb/sec (4X QDR)", "link_layer": "InfiniBand"},
				Counters: map[string]string{"port_rcv_data": "2221223609", "port_xmit_data": "4294967295", "symbol_error": "0"}},
			{Num: 2, Files: map[string]string{"state": "4: ACTIVE", "rate": "40 Gb/sec (4X QDR)", "link_layer": "InfiniBand"},
				Counters: map[string]string{"port_rcv_data": "2460436784"}, HWCounters: map[string]string{"rq_num_oos": "1"}},
		},
	})
	member := func(name string, ifindex int, cnpPrio string) sysfstest.Netdev {
		nd := sysfstest.RoCENetdev(name, 4200, []int{3}, []int{3})
		nd.Files["ifindex"] = strconv.Itoa(ifindex)
		nd.Files["operstate"] = "up"
		nd.Files["speed"] = "100000"
		nd.NPFiles = map[string]string{"cnp_dscp": "48", "cnp_802p_prio": cnpPrio}
		return nd
	}
	spec.Netdevs = []sysfstest.Netdev{
		{Name: "bond0", Files: map[string]string{"mtu": "4200", "ifindex": "30", "operstate": "up"}, Members: []string{"ens1f0np0", "ens1f1np1"}},
		member("ens1f0np0", 4, "6"),
		member("ens1f1np1", 5, cnpPrio1),
	}
	return spec
}

func TestHostSourceLAG(t *testing.T) {
	tests := []struct {
		name         string
		cnpPrio1     string
		fail         map[string]bool
		wantBondEth  map[string]uint64 // nil: unknown
		wantCNPPrio1 int
	}{
		{"members agree", "6", nil, map[string]uint64{"rx_prio3_pause": 30, "tx_prio3_pause_duration": 700, "rx_discards_phy": 9, "rx_packets_phy": 3000, "rx_out_of_buffer": 4, schemas.GaugeLAGMembers: 2}, 6},
		{"members disagree on cnp_802p_prio", "5", nil, map[string]uint64{"rx_prio3_pause": 30, "tx_prio3_pause_duration": 700, "rx_discards_phy": 9, "rx_packets_phy": 3000, "rx_out_of_buffer": 4, schemas.GaugeLAGMembers: 2}, 5},
		{"a member unreadable: the sum is unknown", "6", map[string]bool{"ens1f1np1": true}, nil, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := sysfstest.Build(filepath.Join(root, "class"), lagSpec(tc.cnpPrio1)); err != nil {
				t.Fatal(err)
			}
			now := time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)
			h, err := NewHostSource("gpu-017", WithSysfsRoot(root), WithEthtool(false), WithHostClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			eth := &fakeEthtool{fail: tc.fail, stats: map[string]map[string]uint64{
				"ens1f0np0": {"rx_prio3_pause": 10, "tx_prio3_pause_duration": 300, "rx_discards_phy": 4, "rx_packets_phy": 1000, "rx_out_of_buffer": 1,
					"rx_bits_phy": 1e12, "rx_corrected_bits_phy": 50, "rx_err_lane_0_phy": 2, "link_down_events_phy": 1},
				"ens1f1np1": {"rx_prio3_pause": 20, "tx_prio3_pause_duration": 400, "rx_discards_phy": 5, "rx_packets_phy": 2000, "rx_out_of_buffer": 3,
					"rx_bits_phy": 2e12, "rx_corrected_bits_phy": 9000, "rx_err_lane_0_phy": 0, "link_down_events_phy": 4},
			}}
			h.eth = eth
			dscp := make([]int, 64)
			dscp[26], dscp[48] = 3, 6
			h.cfg.reader.dcb = func(_ context.Context, netdev string) (dcbConfig, error) {
				if netdev == "bond0" {
					return dcbConfig{}, fmt.Errorf("%w: bond", errDCBNotExposed)
				}
				pfc := []int{3}
				m := append([]int(nil), dscp...)
				return dcbConfig{pfc: &pfc, trust: "dscp", dscpPrio: &m}, nil
			}
			rd, err := h.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			ports := map[string]*PortReading{}
			for i := range rd.Ports {
				p := &rd.Ports[i]
				ports[fmt.Sprintf("%s/%d", p.Device, p.Port)] = p
			}
			bond := ports["mlx5_bond_0/1"]
			m0, m1 := ports["mlx5_bond_0.ens1f0np0/1"], ports["mlx5_bond_0.ens1f1np1/1"]
			if bond == nil || m0 == nil || m1 == nil {
				t.Fatalf("ports %v: want the bond and one sample per member", keys(ports))
			}
			if bond.Ifindex != 30 || fmt.Sprint(bond.LowerIfindex) != "[4 5]" {
				t.Errorf("bond ifindex %d lower %v", bond.Ifindex, bond.LowerIfindex)
			}
			if !maps.Equal(bond.Ethtool, tc.wantBondEth) || (tc.wantBondEth == nil) != (bond.Ethtool == nil) {
				t.Errorf("bond ethtool %v, want %v", bond.Ethtool, tc.wantBondEth)
			}
			if len(bond.Counters) == 0 {
				t.Errorf("bond lost its RDMA counters")
			}
			if m0.Netdev != "ens1f0np0" || m0.LinkLayer != "Ethernet" || m0.State != "ACTIVE" || m0.Rate != "100 Gb/sec" || m0.Ifindex != 4 || len(m0.Counters) != 0 {
				t.Errorf("member sample %+v", m0)
			}
			if g, err := schemas.ParseRateGbps(m0.Rate); err != nil || g != 100 {
				t.Errorf("member rate %q reads as %v, %v", m0.Rate, g, err)
			}
			wantPHY := map[string]uint64{"rx_bits_phy": 2e12, "rx_corrected_bits_phy": 9000, "rx_err_lane_0_phy": 0, "link_down_events_phy": 4}
			if !tc.fail["ens1f1np1"] && !maps.Equal(m1.Ethtool, wantPHY) {
				t.Errorf("member 1 ethtool %v, want its PHY statistics %v", m1.Ethtool, wantPHY)
			}
			if tc.fail["ens1f1np1"] && m1.Ethtool != nil {
				t.Errorf("unreadable member has ethtool %v", m1.Ethtool)
			}
			if _, ok := m0.Ethtool["rx_prio3_pause"]; ok {
				t.Errorf("a member sample carries summed statistics: %v", m0.Ethtool)
			}
			if _, ok := m0.Ethtool[schemas.GaugeLAGMembers]; ok {
				t.Errorf("a member sample carries the member count: %v", m0.Ethtool)
			}
			// The member count reaches the wire as a gauge, never as a
			// counter with a delta; the pause figures read it per link
			// (700 µs summed over 2 links in 1 s: 350 µs each).
			e := NewEngine(nil)
			e.Apply(rd)
			for i := range rd.Ports {
				rd.Ports[i].Time = rd.Ports[i].Time.Add(time.Second)
			}
			rd.Time = rd.Time.Add(time.Second)
			if bond.Ethtool != nil {
				bond.Ethtool["tx_prio3_pause_duration"] += 700
			}
			b := e.Apply(rd)
			for i := range b.Ports {
				p := &b.Ports[i]
				if p.Device != "mlx5_bond_0" {
					if _, ok := p.Gauges[schemas.GaugeLAGMembers]; ok {
						t.Errorf("%s has the member gauge: %v", p.Device, p.Gauges)
					}
					continue
				}
				if _, ok := p.Counter(schemas.SourceEthtool, schemas.GaugeLAGMembers); ok {
					t.Errorf("the member count became a counter")
				}
				want := uint64(2)
				if tc.wantBondEth == nil {
					want = 0 // no sum, no count
				}
				if got := p.Gauges[schemas.GaugeLAGMembers]; got != want {
					t.Errorf("bond gauges %v, want %s %d", p.Gauges, schemas.GaugeLAGMembers, want)
				}
				if f := schemas.PortFigures(p); want == 2 && math.Abs(f.TxPauseFraction-0.00035) > 1e-12 {
					t.Errorf("bond tx pause fraction %v, want one link's 0.00035", f.TxPauseFraction)
				}
			}
			// Configuration: the bond's is its first member's over its own,
			// with the RDMA port's traffic class; each member has its own.
			bc := bond.Config
			if bc == nil || bc.MTU == nil || *bc.MTU != 4200 || bc.Trust != "dscp" || bc.CNP8021pPrio == nil || *bc.CNP8021pPrio != 6 ||
				bc.CNPDSCP == nil || *bc.CNPDSCP != 48 || bc.TrafficClass == nil || *bc.TrafficClass != 106 || bc.DSCPPrio == nil || (*bc.DSCPPrio)[26] != 3 {
				t.Errorf("bond config %s", fmtConfig(bc))
			}
			if m1.Config == nil || m1.Config.CNP8021pPrio == nil || *m1.Config.CNP8021pPrio != tc.wantCNPPrio1 || m1.Config.TrafficClass != nil {
				t.Errorf("member 1 config %s", fmtConfig(m1.Config))
			}
			// mlx4: device-wide hw_counters on the lowest port only, the
			// port's own name winning.
			p1, p2 := ports["mlx4_0/1"], ports["mlx4_0/2"]
			if p1 == nil || p2 == nil {
				t.Fatalf("mlx4 ports missing: %v", keys(ports))
			}
			if want := map[string]uint64{"rq_num_oos": 7, "sq_num_wrfe": 3, "rq_num_rnr": 11}; !maps.Equal(p1.HWCounters, want) {
				t.Errorf("mlx4 port 1 hw_counters %v, want %v", p1.HWCounters, want)
			}
			if want := map[string]uint64{"rq_num_oos": 1}; !maps.Equal(p2.HWCounters, want) {
				t.Errorf("mlx4 port 2 hw_counters %v, want only its own %v", p2.HWCounters, want)
			}
		})
	}
}

func keys(m map[string]*PortReading) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
