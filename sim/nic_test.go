package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Each NIC profile lists what its driver lists, and nothing of the others.
func TestNICProfileCounters(t *testing.T) {
	has := func(s *Sample, name string) bool { _, ok := s.Map(schemas.SourceEthtool)[name]; return ok }
	tests := []struct {
		name      string
		nic       NICProfile
		bonded    int
		want, not []string // ethtool names on an ordinary RoCE port (or a bond)
		wantPFC   *[]int   // the reported pfc_enabled
	}{
		{"full", NICFull, 0, []string{"rx_bits_phy", "tx_prio3_pause_duration", "rx_corrected_bits_phy"},
			[]string{"rx_symbol_err_phy", "tx_global_pause", schemas.GaugeLAGMembers}, &[]int{3}},
		{"upstream", NICUpstream, 0, []string{"rx_corrected_bits_phy", "rx_symbol_err_phy", "rx_crc_errors_phy", "rx_err_lane_3_phy", "rx_prio3_pause"},
			[]string{"rx_bits_phy", "tx_global_pause", schemas.GaugeLAGMembers}, &[]int{3}},
		{"global-pause", NICGlobalPause, 0, []string{"tx_global_pause", "tx_global_pause_duration", "rx_global_pause", "rx_global_pause_duration", rxPauseTransition, "tx_pause_storm_warning_events"},
			[]string{"rx_bits_phy", "tx_prio3_pause", "rx_prio3_pause_duration", schemas.GaugeLAGMembers}, &[]int{}},
		{"bond", NICUpstream, 1, []string{"tx_prio3_pause", "rx_discards_phy", schemas.GaugeLAGMembers},
			[]string{"rx_bits_phy", "rx_corrected_bits_phy", "link_down_events_phy", "rx_err_lane_0_phy"}, &[]int{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Hosts, c.HostsPerLeaf, c.Duration = 2, 2, time.Minute
			c.NIC, c.BondedHosts = tt.nic, tt.bonded
			c.Noise = Noise{}
			c.Faults = []Fault{ConfigReport{}}
			f, err := NewFleet(c)
			if err != nil {
				t.Fatal(err)
			}
			_, lines, _ := f.Step()
			var port, members []*Sample
			for i := range lines {
				if strings.Contains(lines[i].Device, ".") {
					members = append(members, &lines[i])
				} else if lines[i].Node == "gpu-001" {
					port = append(port, &lines[i])
				}
			}
			if len(port) == 0 {
				t.Fatal("no sample of gpu-001")
			}
			s := port[0]
			for _, n := range tt.want {
				if !has(s, n) {
					t.Errorf("%s %s lists no %s", s.Device, tt.name, n)
				}
			}
			for _, n := range tt.not {
				if has(s, n) {
					t.Errorf("%s %s lists %s", s.Device, tt.name, n)
				}
			}
			if s.Config == nil || s.Config.PFCEnabled == nil {
				// reportChange/partial/none by the seed: look at the base.
				pc := f.ports[0].conf.base
				if pc == nil || pc.PFCEnabled == nil || len(*pc.PFCEnabled) != len(*tt.wantPFC) {
					t.Errorf("config %+v, want pfc_enabled %v", pc, *tt.wantPFC)
				}
			} else if len(*s.Config.PFCEnabled) != len(*tt.wantPFC) {
				t.Errorf("pfc_enabled %v, want %v", *s.Config.PFCEnabled, *tt.wantPFC)
			}
			if tt.bonded == 0 {
				if len(members) > 0 {
					t.Errorf("%d member samples without a bond", len(members))
				}
				return
			}
			if s.Device != "mlx5_bond_0" || s.Netdev != "bond0" || s.Port != 1 {
				t.Errorf("bond sample %s/%d netdev %s, want mlx5_bond_0/1 bond0", s.Device, s.Port, s.Netdev)
			}
			if len(members) != 2 {
				t.Fatalf("%d member samples, want 2", len(members))
			}
			// The collector's member count: the links the pauses sum.
			if n := s.Map(schemas.SourceEthtool)[schemas.GaugeLAGMembers]; n != 2 {
				t.Errorf("bond %s = %d, want 2", schemas.GaugeLAGMembers, n)
			}
			for i, m := range members {
				want := []string{"mlx5_bond_0.ens1f0np0", "mlx5_bond_0.ens1f1np1"}[i]
				if m.Device != want || m.Netdev != want[len("mlx5_bond_0."):] || m.Counters != nil || m.HWCounters != nil {
					t.Errorf("member %d: %s netdev %s with %d counters, want %s, ethtool only", i, m.Device, m.Netdev, len(m.Counters), want)
				}
				for _, e := range m.Ethtool {
					if !schemas.BondMemberStat(e.Name) {
						t.Errorf("member %s lists %s, not a PHY statistic", m.Device, e.Name)
					}
				}
				if !has(m, "rx_corrected_bits_phy") || has(m, "rx_bits_phy") {
					t.Errorf("member %s: %v", m.Device, m.Ethtool)
				}
			}
		})
	}
}

// A bond's pauses are the sum over its links: a storm from a bonded host
// pauses each member, so the bond's tx pause duration runs at about twice
// the interval; an unbonded origin's at about once.
func TestBondPauseSum(t *testing.T) {
	for _, tt := range []struct {
		bonded   int
		origin   PortRef
		min, max float64 // tx pause µs per interval µs
	}{
		{0, PortRef{"gpu-001", "mlx5_0", 1}, 0.9, 1.0},
		{1, BondRef("gpu-001", 0), 1.8, 2.0},
	} {
		c := DefaultConfig()
		c.Hosts, c.HostsPerLeaf, c.Duration = 2, 2, time.Minute
		c.NIC, c.BondedHosts, c.Noise = NICGlobalPause, tt.bonded, Noise{}
		c.Faults = []Fault{PFCStorm{Port: tt.origin, From: c.Start.Add(10 * time.Second)}}
		f, err := NewFleet(c)
		if err != nil {
			t.Fatal(err)
		}
		var first, last uint64
		var t0, t1 time.Time
		for {
			_, lines, ok := f.Step()
			if !ok {
				break
			}
			for i := range lines {
				s := &lines[i]
				if s.Device != tt.origin.Device || s.Node != tt.origin.Node {
					continue
				}
				v := s.Map(schemas.SourceEthtool)["tx_global_pause_duration"]
				if s.Time.Sub(c.Start) < 20*time.Second {
					first, t0 = v, s.Time
				}
				last, t1 = v, s.Time
			}
		}
		got := float64(last-first) / float64(t1.Sub(t0).Microseconds())
		if got < tt.min || got > tt.max {
			t.Errorf("bonded %d: tx pause %.3f of the time, want %.2f..%.2f", tt.bonded, got, tt.min, tt.max)
		}
	}
}

// A BER drift on one member's cable shows on that member alone.
func TestBondMemberDrift(t *testing.T) {
	c := DefaultConfig()
	c.Hosts, c.HostsPerLeaf, c.Duration, c.Interval = 2, 2, 20*time.Minute, 10*time.Second
	c.NIC, c.BondedHosts, c.Noise = NICUpstream, 2, Noise{}
	drifting := MemberRef("gpu-001", 0, 1)
	c.Faults = []Fault{BERDrift{Port: drifting, From: c.Start.Add(time.Minute), ToCritical: 10 * time.Minute}}
	f, err := NewFleet(c)
	if err != nil {
		t.Fatal(err)
	}
	firstV, lastV := map[string]uint64{}, map[string]uint64{}
	var last time.Time
	for {
		_, lines, ok := f.Step()
		if !ok {
			break
		}
		for i := range lines {
			s := &lines[i]
			if s.Node != "gpu-001" || !strings.Contains(s.Device, ".") {
				continue
			}
			v := s.Map(schemas.SourceEthtool)["rx_corrected_bits_phy"]
			if _, ok := firstV[s.Device]; !ok {
				firstV[s.Device] = v
			}
			lastV[s.Device], last = v, s.Time
		}
	}
	secs := last.Sub(c.Start).Seconds()
	bits := 200e9 * secs
	for dev := range firstV {
		ber := float64(lastV[dev]-firstV[dev]) / bits
		if dev == drifting.Device && ber < 1e-7 {
			t.Errorf("drifting member %s: mean BER %.2g, want the drift's (>1e-7)", dev, ber)
		}
		if dev != drifting.Device && ber > 2e-8 {
			t.Errorf("clean member %s: mean BER %.2g, want a healthy link's", dev, ber)
		}
	}
	if len(firstV) != 2 {
		t.Errorf("member samples of %d devices, want 2", len(firstV))
	}
}

func TestNICConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*Config)
	}{
		{"unknown profile", func(c *Config) { c.NIC = "mlx4" }},
		{"odd devices", func(c *Config) { c.BondedHosts, c.DevicesPerHost = 1, 1 }},
		{"dual port", func(c *Config) { c.BondedHosts, c.PortsPerDevice = 1, 2 }},
		{"more bonds than RoCE hosts", func(c *Config) { c.BondedHosts, c.IBHosts = 16, 2 }},
		{"storm on a member", func(c *Config) {
			c.BondedHosts = 1
			c.Faults = []Fault{PFCStorm{Port: MemberRef("gpu-001", 0, 0), From: c.Start}}
		}},
	} {
		c := DefaultConfig()
		tt.edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: valid", tt.name)
		}
	}
	if _, err := ParseNICProfile("global-pause"); err != nil {
		t.Error(err)
	}
	if _, err := ParseNICProfile("mlx4"); err == nil {
		t.Error("mlx4 parsed")
	}
}
