package schemas

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func cfgInt(v int) *int        { return &v }
func cfgPrios(p ...int) *[]int { return &p }

// dscpMap is mlx5's default map (DSCP d on priority d>>3) with DSCP d
// moved to priority p.
func dscpMap(p, d int) *[]int {
	m := make([]int, NumDSCP)
	for i := range m {
		m[i] = i >> 3
	}
	m[d] = p
	return &m
}

func TestPortConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		c       *PortConfig
		wantErr string
	}{
		{"nil", nil, ""},
		{"empty", &PortConfig{}, ""},
		{"full", &PortConfig{MTU: cfgInt(9000), PFCEnabled: cfgPrios(3), ECNNPEnabled: cfgPrios(3, 4), ECNRPEnabled: cfgPrios(), Trust: "dscp"}, ""},
		{"smallest mtu", &PortConfig{MTU: cfgInt(68)}, ""},
		{"largest mtu", &PortConfig{MTU: cfgInt(65536)}, ""},
		{"mtu too small", &PortConfig{MTU: cfgInt(67)}, "mtu 67"},
		{"mtu too large", &PortConfig{MTU: cfgInt(65537)}, "mtu 65537"},
		{"negative mtu", &PortConfig{MTU: cfgInt(-1)}, "mtu -1"},
		{"priority 8", &PortConfig{PFCEnabled: cfgPrios(8)}, "pfc_enabled: priority 8"},
		{"negative priority", &PortConfig{ECNNPEnabled: cfgPrios(-1)}, "ecn_np_enabled: priority -1"},
		{"nine priorities", &PortConfig{ECNRPEnabled: cfgPrios(0, 1, 2, 3, 4, 5, 6, 7, 7)}, "ecn_rp_enabled: 9 priorities"},
		{"trust pcp", &PortConfig{Trust: "pcp"}, ""},
		{"trust other", &PortConfig{Trust: "DSCP"}, `trust "DSCP"`},
		{"dscp map", &PortConfig{DSCPPrio: dscpMap(3, 26)}, ""},
		{"dscp map short", &PortConfig{DSCPPrio: cfgPrios(0, 1, 2)}, "dscp_prio: 3 entries"},
		{"dscp map priority 8", &PortConfig{DSCPPrio: func() *[]int { m := dscpMap(0, 0); (*m)[46] = 8; return m }()}, "DSCP 46 maps to priority 8"},
		{"cnp dscp", &PortConfig{CNPDSCP: cfgInt(48), CNP8021pPrio: cfgInt(6), TrafficClass: cfgInt(106)}, ""},
		{"cnp dscp bounds", &PortConfig{CNPDSCP: cfgInt(0), CNP8021pPrio: cfgInt(0), TrafficClass: cfgInt(255)}, ""},
		{"cnp dscp 64", &PortConfig{CNPDSCP: cfgInt(64)}, "cnp_dscp 64: outside 0..63"},
		{"cnp dscp negative", &PortConfig{CNPDSCP: cfgInt(-1)}, "cnp_dscp -1"},
		{"cnp prio 8", &PortConfig{CNP8021pPrio: cfgInt(8)}, "cnp_802p_prio 8: outside 0..7"},
		{"traffic class 256", &PortConfig{TrafficClass: cfgInt(256)}, "traffic_class 256: outside 0..255"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

func TestPortConfigEqualMergeEmpty(t *testing.T) {
	full := &PortConfig{MTU: cfgInt(9000), PFCEnabled: cfgPrios(3), ECNNPEnabled: cfgPrios(3), ECNRPEnabled: cfgPrios(3), Trust: "dscp"}
	equal := []struct {
		name string
		a, b *PortConfig
		want bool
	}{
		{"nil and empty", nil, &PortConfig{}, true},
		{"nil and known", nil, full, false},
		{"same", full, &PortConfig{MTU: cfgInt(9000), PFCEnabled: cfgPrios(3), ECNNPEnabled: cfgPrios(3), ECNRPEnabled: cfgPrios(3), Trust: "dscp"}, true},
		{"priorities as sets", &PortConfig{PFCEnabled: cfgPrios(4, 3, 3)}, &PortConfig{PFCEnabled: cfgPrios(3, 4)}, true},
		{"unknown is not empty", &PortConfig{MTU: cfgInt(1500), PFCEnabled: cfgPrios()}, &PortConfig{MTU: cfgInt(1500)}, false},
		{"mtu differs", &PortConfig{MTU: cfgInt(1500)}, &PortConfig{MTU: cfgInt(9000)}, false},
		{"mtu unknown on one side", &PortConfig{MTU: cfgInt(1500), Trust: "pcp"}, &PortConfig{Trust: "pcp"}, false},
		{"trust differs", &PortConfig{Trust: "pcp"}, &PortConfig{Trust: "dscp"}, false},
		{"dscp map same", &PortConfig{DSCPPrio: dscpMap(3, 26)}, &PortConfig{DSCPPrio: dscpMap(3, 26)}, true},
		{"dscp map differs", &PortConfig{DSCPPrio: dscpMap(3, 26)}, &PortConfig{DSCPPrio: dscpMap(4, 26)}, false},
		{"dscp map unknown on one side", &PortConfig{DSCPPrio: dscpMap(3, 26), Trust: "dscp"}, &PortConfig{Trust: "dscp"}, false},
		{"cnp dscp differs", &PortConfig{CNPDSCP: cfgInt(48)}, &PortConfig{CNPDSCP: cfgInt(46)}, false},
		{"cnp prio differs", &PortConfig{CNP8021pPrio: cfgInt(6)}, &PortConfig{CNP8021pPrio: cfgInt(7)}, false},
		{"traffic class differs", &PortConfig{TrafficClass: cfgInt(106)}, &PortConfig{TrafficClass: cfgInt(104)}, false},
		{"traffic class same", &PortConfig{TrafficClass: cfgInt(106)}, &PortConfig{TrafficClass: cfgInt(106)}, true},
	}
	for _, tc := range equal {
		if got := tc.a.Equal(tc.b); got != tc.want {
			t.Errorf("%s: Equal = %v, want %v", tc.name, got, tc.want)
		}
		if got := tc.b.Equal(tc.a); got != tc.want {
			t.Errorf("%s: Equal is not symmetric", tc.name)
		}
	}

	// Merge: what the newer reading knows wins, what it does not know keeps
	// the older value; neither side is changed.
	older := &PortConfig{MTU: cfgInt(9000), PFCEnabled: cfgPrios(3), Trust: "dscp"}
	newer := &PortConfig{MTU: cfgInt(4200), ECNNPEnabled: cfgPrios()}
	m := older.Merge(newer)
	if want := (&PortConfig{MTU: cfgInt(4200), PFCEnabled: cfgPrios(3), ECNNPEnabled: cfgPrios(), Trust: "dscp"}); !m.Equal(want) {
		t.Errorf("Merge = %+v", m)
	}
	if *older.MTU != 9000 || older.ECNNPEnabled != nil {
		t.Errorf("Merge changed its receiver: %+v", older)
	}
	if got := (*PortConfig)(nil).Merge(newer); !got.Equal(newer) {
		t.Errorf("nil.Merge = %+v", got)
	}
	if got := older.Merge(nil); !got.Equal(older) || got == older {
		t.Errorf("Merge(nil) = %+v (a copy of the receiver wanted)", got)
	}

	m = older.Merge(&PortConfig{DSCPPrio: dscpMap(3, 26), CNPDSCP: cfgInt(48), CNP8021pPrio: cfgInt(6), TrafficClass: cfgInt(106)})
	if want := (&PortConfig{MTU: cfgInt(9000), PFCEnabled: cfgPrios(3), Trust: "dscp", DSCPPrio: dscpMap(3, 26), CNPDSCP: cfgInt(48), CNP8021pPrio: cfgInt(6), TrafficClass: cfgInt(106)}); !m.Equal(want) {
		t.Errorf("Merge of the CNP and DSCP settings = %+v", m)
	}
	for _, c := range []*PortConfig{{DSCPPrio: dscpMap(0, 0)}, {CNPDSCP: cfgInt(0)}, {CNP8021pPrio: cfgInt(0)}, {TrafficClass: cfgInt(0)}} {
		if c.Empty() {
			t.Errorf("Empty(%+v): a known 0 is something known", c)
		}
	}
	if !(*PortConfig)(nil).Empty() || !(&PortConfig{}).Empty() || (&PortConfig{PFCEnabled: cfgPrios()}).Empty() {
		t.Error("Empty: a known empty list is not nothing known")
	}
	for _, tc := range []struct {
		list      *[]int
		p         int
		on, known bool
	}{{nil, 3, false, false}, {cfgPrios(), 3, false, true}, {cfgPrios(3), 3, true, true}, {cfgPrios(3), 4, false, true}} {
		if on, known := PriorityOn(tc.list, tc.p); on != tc.on || known != tc.known {
			t.Errorf("PriorityOn(%v, %d) = %v, %v", tc.list, tc.p, on, known)
		}
	}
}

// FuzzPortConfig decodes a config as the inventory's `cfg` field does and
// checks what the collector and the sink rely on: a config that validates
// equals itself, merging it into anything gives it back where it knows,
// and its msgpack form round-trips.
func FuzzPortConfig(f *testing.F) {
	for _, c := range []*PortConfig{
		{},
		{MTU: cfgInt(9000), PFCEnabled: cfgPrios(3), ECNNPEnabled: cfgPrios(3), ECNRPEnabled: cfgPrios(), Trust: "dscp"},
		{PFCEnabled: cfgPrios(9)},
		{Trust: "pcp"},
		{Trust: "dscp", DSCPPrio: dscpMap(3, 26), CNPDSCP: cfgInt(48), CNP8021pPrio: cfgInt(6), TrafficClass: cfgInt(106)},
		{CNPDSCP: cfgInt(64), TrafficClass: cfgInt(-1)},
	} {
		b, err := msgpack.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A config only travels inside an inventory, whose decoder walks
		// the bytes with checkWire before msgpack.Unmarshal: msgpack v5.4.1
		// sizes a slice by the count the message claims whatever its
		// alloc-limit flag says (decode_slice.go tests the flag against 1),
		// so an unguarded Unmarshal of "pfc: array32(4e9)" takes 32 GB and
		// the fuzz worker with it.
		if checkWire(data, NumDSCP) != nil {
			return
		}
		var c PortConfig
		if err := msgpack.Unmarshal(data, &c); err != nil {
			return
		}
		if c.Validate() != nil {
			return
		}
		if !c.Equal(&c) {
			t.Fatalf("%+v does not equal itself", c)
		}
		base := &PortConfig{MTU: cfgInt(1500), PFCEnabled: cfgPrios(0), ECNNPEnabled: cfgPrios(1), ECNRPEnabled: cfgPrios(2), Trust: "pcp"}
		m := base.Merge(&c)
		if m.Validate() != nil || (c.MTU != nil && *m.MTU != *c.MTU) || (c.Trust != "" && m.Trust != c.Trust) || m.Empty() {
			t.Fatalf("merge of %+v into %+v gave %+v", c, base, m)
		}
		if !c.Merge(nil).Equal(&c) {
			t.Fatalf("%+v merged with nothing changed", c)
		}
		b, err := msgpack.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		var back PortConfig
		if err := msgpack.Unmarshal(b, &back); err != nil || !back.Equal(&c) {
			t.Fatalf("round trip of %+v: %+v, %v", c, back, err)
		}
	})
}

func TestPortConfigCNPPriority(t *testing.T) {
	tests := []struct {
		name    string
		c       *PortConfig
		prio    int
		setting string
		known   bool
	}{
		{"nil", nil, 0, "", false},
		{"trust unknown", &PortConfig{CNPDSCP: cfgInt(48), CNP8021pPrio: cfgInt(6), DSCPPrio: dscpMap(3, 26)}, 0, "", false},
		{"dscp through the map", &PortConfig{Trust: "dscp", CNPDSCP: cfgInt(48), CNP8021pPrio: cfgInt(3), DSCPPrio: dscpMap(3, 26)}, 6, "cnp_dscp", true},
		{"dscp moved in the map", &PortConfig{Trust: "dscp", CNPDSCP: cfgInt(26), DSCPPrio: dscpMap(3, 26)}, 3, "cnp_dscp", true},
		{"dscp without a map", &PortConfig{Trust: "dscp", CNPDSCP: cfgInt(48), CNP8021pPrio: cfgInt(6)}, 0, "", false},
		{"pcp", &PortConfig{Trust: "pcp", CNPDSCP: cfgInt(48), CNP8021pPrio: cfgInt(6), DSCPPrio: dscpMap(3, 26)}, 6, "cnp_802p_prio", true},
		{"pcp without cnp_802p_prio", &PortConfig{Trust: "pcp", CNPDSCP: cfgInt(48)}, 0, "", false},
	}
	for _, tc := range tests {
		prio, setting, known := tc.c.CNPPriority()
		if prio != tc.prio || setting != tc.setting || known != tc.known {
			t.Errorf("%s: CNPPriority = %d, %q, %v; want %d, %q, %v", tc.name, prio, setting, known, tc.prio, tc.setting, tc.known)
		}
	}
}

// TestPortConfigWire: the new settings travel in the inventory (msgpack,
// short keys) and in the trace's config object (JSON, the documented keys),
// and come back equal.
func TestPortConfigWire(t *testing.T) {
	cfg := &PortConfig{MTU: cfgInt(4200), PFCEnabled: cfgPrios(3), Trust: "dscp", DSCPPrio: dscpMap(3, 26), CNPDSCP: cfgInt(48), CNP8021pPrio: cfgInt(6), TrafficClass: cfgInt(106)}
	inv := &Inventory{Node: "gpu-017", BootID: "b", TimeMs: MinDataTimeMs, Ports: []PortInventory{
		{Device: "mlx5_bond_0", Port: 1, Netdev: "bond0", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)", Config: cfg},
		{Device: BondMemberDevice("mlx5_bond_0", "ens1f0np0"), Port: 1, Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "100 Gb/sec", Config: cfg},
	}}
	data, err := EncodeInventory(inv)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"dscp", "cdscp", "cprio", "tclass"} {
		if !strings.Contains(string(data), key) {
			t.Errorf("encoded inventory lacks the key %q", key)
		}
	}
	back, err := DecodeInventory(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range inv.Ports {
		if !back.Ports[i].Config.Equal(cfg) || back.Ports[i].Device != inv.Ports[i].Device {
			t.Errorf("port %d came back as %+v (config %+v)", i, back.Ports[i], back.Ports[i].Config)
		}
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"dscp_prio":[0,0,0,0,0,0,0,0,1,`, `"cnp_dscp":48`, `"cnp_802p_prio":6`, `"traffic_class":106`} {
		if !strings.Contains(string(js), key) {
			t.Errorf("JSON %s lacks %s", js, key)
		}
	}
	var fromJSON PortConfig
	if err := json.Unmarshal(js, &fromJSON); err != nil || !fromJSON.Equal(cfg) {
		t.Errorf("JSON round trip: %+v, %v", fromJSON, err)
	}
}

// TestBondMemberDevice: a member's device name splits back, and every
// decoder that carries a device accepts it.
func TestBondMemberDevice(t *testing.T) {
	dev := BondMemberDevice("mlx5_bond_0", "ens1f0np0")
	if dev != "mlx5_bond_0.ens1f0np0" {
		t.Fatalf("BondMemberDevice = %q", dev)
	}
	for _, tc := range []struct {
		device, bond, member string
		ok                   bool
	}{
		{dev, "mlx5_bond_0", "ens1f0np0", true},
		{"mlx5_bond_0.eth0.100", "mlx5_bond_0", "eth0.100", true},
		{"mlx5_0", "mlx5_0", "", false},
		{".ens1f0np0", "", "ens1f0np0", false},
		{"mlx5_bond_0.", "mlx5_bond_0", "", false},
	} {
		bond, member, ok := SplitBondMember(tc.device)
		if ok != tc.ok || (ok && (bond != tc.bond || member != tc.member)) {
			t.Errorf("SplitBondMember(%q) = %q, %q, %v", tc.device, bond, member, ok)
		}
	}
	b := &CounterBatch{Node: "gpu-017", BootID: "b", Seq: 1, TimeMs: MinDataTimeMs, Ports: []PortSample{{
		Device: dev, Port: 1, Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE", Rate: "100 Gb/sec", TimeMs: MinDataTimeMs, IntervalMs: 1000,
		Counters: []CounterDelta{{Name: "rx_bits_phy", Source: SourceEthtool, Value: 10, Delta: 5}},
	}}}
	data, err := EncodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeBatch(data)
	if err != nil || back.Ports[0].Device != dev {
		t.Fatalf("batch round trip: %v, %+v", err, back)
	}
	topo, err := ParseTopology(strings.NewReader(`{"fabric":"f","switches":[{"name":"leaf-01","tier":"leaf"}],"links":[{"a":"gpu-017/` + dev + `/1","b":"leaf-01/swp1"}]}`))
	if err != nil {
		t.Fatalf("topology with a member endpoint: %v", err)
	}
	if _, ok := topo.Peer(PortID{Node: "gpu-017", Device: dev, Port: 1}); !ok {
		t.Errorf("topology does not find the member's link")
	}
}
