package configmismatch

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/detect/cnp"
	"github.com/rdmawatch/rdmawatch/processor/internal/detecttest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// configView is a FabricView with the fleet's configuration, as the engine
// gives it: tracked ports (the owned ones) and configs of every node.
type configView struct {
	ports   map[schemas.PortID]*processor.PortState
	configs map[schemas.PortID]*processor.KnownConfig
	topo    *schemas.Topology
	wm      schemas.Millis
}

func (v *configView) Topology() *schemas.Topology { return v.topo }
func (v *configView) Watermark() schemas.Millis   { return v.wm }
func (v *configView) Complete() bool              { return true }
func (v *configView) Port(id schemas.PortID) (*processor.PortState, bool) {
	p, ok := v.ports[id]
	return p, ok
}
func (v *configView) Ports(fn func(*processor.PortState) bool) {
	for _, id := range sortedIDs(v.ports) {
		if !fn(v.ports[id]) {
			return
		}
	}
}
func (v *configView) PortConfig(id schemas.PortID) (processor.KnownConfig, bool) {
	kc, ok := v.configs[id]
	if !ok {
		return processor.KnownConfig{}, false
	}
	return *kc, true
}
func (v *configView) Configs(fn func(*processor.KnownConfig) bool) {
	for _, id := range sortedIDs(v.configs) {
		if !fn(v.configs[id]) {
			return
		}
	}
}

func sortedIDs[V any](m map[schemas.PortID]V) []schemas.PortID {
	ids := make([]schemas.PortID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b schemas.PortID) int { return strings.Compare(a.String(), b.String()) })
	return ids
}

func host(i int) schemas.PortID {
	return schemas.PortID{Node: "gpu-0" + string(rune('0'+i/10)) + string(rune('0'+i%10)), Device: "mlx5_0", Port: 1}
}

// roce is the usual lossless RoCE config: MTU 4200, PFC, NP and RP on 3.
func roce() *schemas.PortConfig {
	mtu := 4200
	return &schemas.PortConfig{MTU: &mtu, PFCEnabled: &[]int{3}, ECNNPEnabled: &[]int{3}, ECNRPEnabled: &[]int{3}, Trust: "dscp"}
}

func cfgInt(v int) *int { return &v }

// qos is roce() with the settings that place RoCE traffic and CNPs: DSCP
// 26 on priority 3, CNPs on DSCP 48 (priority 6) and 802.1p 6, traffic
// class 106 (DSCP 26) forced.
func qos() *schemas.PortConfig {
	c := roce()
	m := make([]int, schemas.NumDSCP)
	m[26], m[48] = 3, 6
	c.DSCPPrio, c.CNPDSCP, c.CNP8021pPrio, c.TrafficClass = &m, cfgInt(48), cfgInt(6), cfgInt(106)
	return c
}

func pcp(c *schemas.PortConfig)   { c.Trust, c.DSCPPrio = "pcp", nil }
func tc104(c *schemas.PortConfig) { c.TrafficClass = cfgInt(104) }

func fleetQoS(n int, change map[int]func(*schemas.PortConfig)) []fleetPort {
	var out []fleetPort
	for i := range n {
		c := qos()
		if ch, ok := change[i]; ok {
			ch(c)
		}
		out = append(out, fleetPort{id: host(i), cfg: c})
	}
	return out
}

// lag is a fleet of n ports where gpu-003's is a RoCE LAG (mlx5_bond_0 over
// ens1f0np0 and ens1f1np1) with its first member's config, as the
// collector publishes it.
func lag(n int, m0, m1 *schemas.PortConfig) []fleetPort {
	out := fleetQoS(n, nil)
	bond := schemas.PortID{Node: host(3).Node, Device: "mlx5_bond_0", Port: 1}
	out[3] = fleetPort{id: bond, cfg: m0}
	return append(out,
		fleetPort{id: schemas.PortID{Node: bond.Node, Device: schemas.BondMemberDevice(bond.Device, "ens1f0np0"), Port: 1}, cfg: m0},
		fleetPort{id: schemas.PortID{Node: bond.Node, Device: schemas.BondMemberDevice(bond.Device, "ens1f1np1"), Port: 1}, cfg: m1})
}

func with(c *schemas.PortConfig, change func(c *schemas.PortConfig)) *schemas.PortConfig {
	change(c)
	return c
}

func mtuOf(v int) func(c *schemas.PortConfig) { return func(c *schemas.PortConfig) { c.MTU = &v } }

type fleetPort struct {
	id        schemas.PortID
	cfg       *schemas.PortConfig // nil: no config known
	linkLayer string              // default Ethernet
	notOwned  bool                // another instance reads it
}

// fleet makes n healthy RoCE ports; change edits some.
func fleet(n int, change map[int]*schemas.PortConfig) []fleetPort {
	var out []fleetPort
	for i := range n {
		c := roce()
		if ch, ok := change[i]; ok {
			c = ch
		}
		out = append(out, fleetPort{id: host(i), cfg: c})
	}
	return out
}

func newConfigView(ports []fleetPort, topo *schemas.Topology) *configView {
	v := &configView{ports: map[schemas.PortID]*processor.PortState{}, configs: map[schemas.PortID]*processor.KnownConfig{}, topo: topo}
	for _, p := range ports {
		if !p.notOwned {
			st := processor.NewPortState(p.id)
			st.LastTime, st.Samples = detecttest.At(0), 1
			v.ports[p.id] = st
		}
		if p.cfg != nil {
			ll := p.linkLayer
			if ll == "" {
				ll = "Ethernet"
			}
			v.configs[p.id] = &processor.KnownConfig{ID: p.id, LinkLayer: ll, Netdev: "ens1f0np0", Since: detecttest.At(0), Read: detecttest.At(0), Config: p.cfg}
		}
	}
	return v
}

type configEvents []*schemas.Event

func (e *configEvents) Emit(ev *schemas.Event) { *e = append(*e, ev) }

func (e configEvents) opened() map[string]*schemas.Event {
	out := map[string]*schemas.Event{}
	for _, ev := range e {
		if ev.State == schemas.StateOpen {
			out[ev.Subject.Node] = ev
		}
	}
	return out
}

func backToBack(t *testing.T, a, b schemas.PortID) *schemas.Topology {
	t.Helper()
	topo, err := schemas.ParseTopology(strings.NewReader(`{"fabric":"f","switches":[{"name":"leaf-01","tier":"leaf"}],"links":[{"a":"` + a.String() + `","b":"` + b.String() + `"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestConfigMismatch(t *testing.T) {
	noPFC := func(c *schemas.PortConfig) { c.PFCEnabled = &[]int{} }
	cases := []struct {
		name     string
		ports    []fleetPort
		topo     func(t *testing.T) *schemas.Topology
		want     map[string]string // node -> severity of the open incident
		settings []string          // of every incident
		checks   []string          // in every incident's next checks
		summary  string
	}{
		{name: "healthy fabric", ports: fleet(8, nil), want: map[string]string{}},
		{name: "MTU of one port differs from the fabric", ports: fleet(8, map[int]*schemas.PortConfig{5: with(roce(), mtuOf(1500))}),
			want: map[string]string{"gpu-005": "warning"}, settings: []string{settingMTU}, checks: []string{"ssh gpu-005 'ip link show ens1f0np0'"},
			summary: "gpu-005 mlx5_0/1 (ens1f0np0): configuration differs from the fabric's: MTU 1500 where 88% of the fabric's 8 RoCE ports reporting it use 4200"},
		{name: "PFC off on the lossless priority", ports: fleet(8, map[int]*schemas.PortConfig{2: with(roce(), noPFC)}),
			want: map[string]string{"gpu-002": "critical"}, settings: []string{settingPFC}, checks: []string{"ssh gpu-002 'mlnx_qos -i ens1f0np0'"}},
		{name: "PFC on another priority", ports: fleet(8, map[int]*schemas.PortConfig{2: with(roce(), func(c *schemas.PortConfig) { c.PFCEnabled = &[]int{4} })}),
			want: map[string]string{"gpu-002": "critical"}, settings: []string{settingPFC}},
		{name: "ECN notification point off", ports: fleet(8, map[int]*schemas.PortConfig{7: with(roce(), func(c *schemas.PortConfig) { c.ECNNPEnabled = &[]int{} })}),
			want: map[string]string{"gpu-007": "warning"}, settings: []string{processor.SettingECNNP}, checks: []string{"ssh gpu-007 'cat /sys/class/net/ens1f0np0/ecn/roce_np/enable/3'"},
			summary: "gpu-007 mlx5_0/1 (ens1f0np0): configuration differs from the fabric's: the ECN notification point off on priority 3, which 88% of the fabric's 8 RoCE ports reporting it have on"},
		{name: "ECN reaction point and MTU off together", ports: fleet(8, map[int]*schemas.PortConfig{1: with(roce(), func(c *schemas.PortConfig) { c.ECNRPEnabled = &[]int{0}; c.MTU = nil; *c = *with(c, mtuOf(9000)) })}),
			want: map[string]string{"gpu-001": "warning"}, settings: []string{settingMTU, processor.SettingECNRP}, checks: []string{"roce_rp/enable/3"}},
		{name: "unknown is never a mismatch", ports: fleet(8, map[int]*schemas.PortConfig{3: {Trust: "dscp"}, 4: {MTU: roce().MTU}}), want: map[string]string{}},
		// Under trust pcp the priority is the VLAN tag's, which no setting
		// shows: fleets run both modes losslessly, so trust alone is no
		// mismatch (both generators, sim and altgen, keep such ports as
		// healthy noise).
		{name: "trust alone differing from the fabric is not a mismatch", ports: fleet(8, map[int]*schemas.PortConfig{3: with(roce(), func(c *schemas.PortConfig) { c.Trust = "pcp" })}),
			want: map[string]string{}},
		// 802.3x global pause pauses every priority: which one a packet
		// lands on (the trust mode) decides nothing about loss there.
		{name: "trust differing on a global-pause fabric is not a mismatch", ports: func() []fleetPort {
			ports := fleet(8, nil)
			for i := range ports {
				ports[i].cfg = with(roce(), func(c *schemas.PortConfig) { c.PFCEnabled = &[]int{}; c.Trust = "dscp" })
			}
			ports[3].cfg.Trust = "pcp"
			return ports
		}(), want: map[string]string{}},
		{name: "QoS settings agree", ports: fleetQoS(8, nil), want: map[string]string{}},
		{name: "cnp_802p_prio off the fabric's under trust pcp", ports: fleetQoS(8, map[int]func(*schemas.PortConfig){
			0: pcp, 1: pcp, 2: pcp, 3: pcp, 4: pcp, 5: pcp, 6: pcp, 7: func(c *schemas.PortConfig) { pcp(c); c.CNP8021pPrio = cfgInt(3) }}),
			want: map[string]string{"gpu-007": "warning"}, settings: []string{settingCNP},
			checks:  []string{"ssh gpu-007 'cat /sys/class/net/ens1f0np0/ecn/roce_np/cnp_dscp /sys/class/net/ens1f0np0/ecn/roce_np/cnp_802p_prio'"},
			summary: "CNPs on priority 3 (by cnp_802p_prio) where 88% of the fabric's 8 RoCE ports reporting it send them on 6"},
		{name: "cnp_dscp on a DSCP the port maps elsewhere under trust dscp", ports: fleetQoS(8, map[int]func(*schemas.PortConfig){5: func(c *schemas.PortConfig) { c.CNPDSCP = cfgInt(26) }}),
			want: map[string]string{"gpu-005": "warning"}, settings: []string{settingCNP}, summary: "CNPs on priority 3 (by cnp_dscp)"},
		{name: "cnp_802p_prio differing under trust dscp is not compared", ports: fleetQoS(8, map[int]func(*schemas.PortConfig){5: func(c *schemas.PortConfig) { c.CNP8021pPrio = cfgInt(0) }}),
			want: map[string]string{}},
		{name: "the DSCP of the fabric's RoCE traffic mapped elsewhere", ports: fleetQoS(8, map[int]func(*schemas.PortConfig){2: func(c *schemas.PortConfig) { (*c.DSCPPrio)[26] = 0 }}),
			want: map[string]string{"gpu-002": "critical"}, settings: []string{settingDSCP}, checks: []string{"ssh gpu-002 'mlnx_qos -i ens1f0np0'"},
			summary: "DSCP 26 on priority 0, which the fabric's RoCE traffic uses on priority 3"},
		{name: "a map differing on a DSCP nobody uses is no mismatch", ports: fleetQoS(8, map[int]func(*schemas.PortConfig){2: func(c *schemas.PortConfig) { (*c.DSCPPrio)[10] = 5 }}),
			want: map[string]string{}},
		{name: "forced traffic class differs", ports: fleetQoS(8, map[int]func(*schemas.PortConfig){4: func(c *schemas.PortConfig) { c.TrafficClass = cfgInt(96) }}),
			want: map[string]string{"gpu-004": "warning"}, settings: []string{settingTClass}, checks: []string{"ssh gpu-004 'cat /sys/class/infiniband/mlx5_0/tc/1/traffic_class'"},
			summary: "traffic class 96 (DSCP 24) forced where 88% of the fabric's 8 RoCE ports reporting it force 106 (DSCP 26)"},
		{name: "a forced class whose DSCP the port maps elsewhere", ports: fleetQoS(8, map[int]func(*schemas.PortConfig){
			0: tc104, 1: tc104, 2: tc104, 3: tc104, 4: tc104, 5: tc104, 6: func(c *schemas.PortConfig) { tc104(c); (*c.DSCPPrio)[26] = 0 }, 7: tc104}),
			want: map[string]string{"gpu-006": "critical"}, settings: []string{settingDSCP}},
		{name: "LAG members agree: one port, no double count", ports: lag(8, qos(), qos()), want: map[string]string{}},
		{name: "LAG members disagree on cnp_802p_prio", ports: lag(8, qos(), with(qos(), func(c *schemas.PortConfig) { c.CNP8021pPrio = cfgInt(5) })),
			want: map[string]string{"gpu-003": "warning"}, settings: []string{"bond_cnp_802p_prio"},
			checks:  []string{"ssh gpu-003 'mlnx_qos -i ens1f0np0'", "ssh gpu-003 'mlnx_qos -i ens1f1np1'"},
			summary: "its LAG members ens1f0np0 and ens1f1np1 differ in cnp_802p_prio (6 and 5)"},
		{name: "LAG members disagree on PFC", ports: lag(8, qos(), with(qos(), func(c *schemas.PortConfig) { c.PFCEnabled = &[]int{3, 4} })),
			want: map[string]string{"gpu-003": "critical"}, settings: []string{"bond_pfc_enabled"}},
		{name: "a port without any config", ports: append(fleet(6, nil), fleetPort{id: host(9)}), want: map[string]string{}},
		{name: "the whole fabric without ECN is no mismatch", ports: fleet(6, map[int]*schemas.PortConfig{
			0: with(roce(), func(c *schemas.PortConfig) { c.ECNNPEnabled = &[]int{} }), 1: with(roce(), func(c *schemas.PortConfig) { c.ECNNPEnabled = &[]int{} }),
			2: with(roce(), func(c *schemas.PortConfig) { c.ECNNPEnabled = &[]int{} }), 3: with(roce(), func(c *schemas.PortConfig) { c.ECNNPEnabled = &[]int{} }),
			4: with(roce(), func(c *schemas.PortConfig) { c.ECNNPEnabled = &[]int{} }), 5: with(roce(), func(c *schemas.PortConfig) { c.ECNNPEnabled = &[]int{} })}),
			want: map[string]string{}},
		{name: "an even split has no norm", ports: fleet(6, map[int]*schemas.PortConfig{0: with(roce(), mtuOf(9000)), 1: with(roce(), mtuOf(9000)), 2: with(roce(), mtuOf(9000))}),
			want: map[string]string{}},
		{name: "two ports are too few for a norm", ports: fleet(2, map[int]*schemas.PortConfig{0: with(roce(), mtuOf(9000))}), want: map[string]string{}},
		{name: "InfiniBand ports are not RoCE ports", ports: append(fleet(4, nil),
			fleetPort{id: host(10), cfg: with(roce(), mtuOf(2048)), linkLayer: "InfiniBand"}), want: map[string]string{}},
		{name: "a port another instance reads", ports: append(fleet(6, nil), fleetPort{id: host(10), cfg: with(roce(), mtuOf(1500)), notOwned: true}),
			want: map[string]string{}},
		{name: "a link's two ends differ, no fabric: both ends", ports: fleet(2, map[int]*schemas.PortConfig{0: with(roce(), mtuOf(9000))}),
			topo: func(t *testing.T) *schemas.Topology { return backToBack(t, host(0), host(1)) },
			want: map[string]string{"gpu-000": "critical", "gpu-001": "critical"}, settings: []string{settingMTU}, checks: []string{"ip link show"}},
		{name: "a link's two ends differ in a fabric: the odd end", ports: fleet(6, map[int]*schemas.PortConfig{0: with(roce(), mtuOf(9000))}),
			topo: func(t *testing.T) *schemas.Topology { return backToBack(t, host(0), host(1)) },
			want: map[string]string{"gpu-000": "critical"}, settings: []string{settingMTU}, checks: []string{"ssh gpu-001 'ip link show ens1f0np0'"},
			summary: "MTU 9000 where 83% of the fabric's 6 RoCE ports reporting it use 4200 and the other end of its link, gpu-001 mlx5_0/1 (ens1f0np0), uses 4200"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var topo *schemas.Topology
			if c.topo != nil {
				topo = c.topo(t)
			}
			v := newConfigView(c.ports, topo)
			d := New()
			var evs configEvents
			v.wm = detecttest.At(1)
			d.OnWatermark(context.Background(), v, v.wm, &evs)
			v.wm = detecttest.At(2)
			d.OnWatermark(context.Background(), v, v.wm, &evs)
			opened := evs.opened()
			if len(evs) != len(opened) {
				t.Errorf("%d events for %d incidents: a config that holds still must not update", len(evs), len(opened))
			}
			if len(opened) != len(c.want) {
				t.Fatalf("incidents on %v, want %v", keys(opened), c.want)
			}
			for node, sev := range c.want {
				ev := opened[node]
				if ev == nil {
					t.Fatalf("no incident on %s; got %v", node, keys(opened))
				}
				if err := ev.Validate(); err != nil {
					t.Fatal(err)
				}
				if ev.Severity != sev || ev.Layer != schemas.LayerLinkNetwork || ev.Type != processor.TypeConfigMismatch || ev.DetectedAt != detecttest.At(1) || ev.Start != detecttest.At(0) {
					t.Errorf("%s: %+v", node, ev)
				}
				if got, _ := ev.Evidence["settings"].([]string); !slices.Equal(got, c.settings) {
					t.Errorf("%s: settings %v, want %v", node, got, c.settings)
				}
				for _, want := range c.checks {
					if !slices.ContainsFunc(ev.NextChecks, func(s string) bool { return strings.Contains(s, want) }) {
						t.Errorf("%s: next checks %q lack %q", node, ev.NextChecks, want)
					}
				}
				if c.summary != "" && !strings.Contains(ev.Summary, c.summary) {
					t.Errorf("%s: summary\n%s\nlacks\n%s", node, ev.Summary, c.summary)
				}
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestConfigMismatchResolvesWhenFixed: the port's config changes back, the
// incident resolves at once and says why; a port that goes silent resolves
// after SilentResolveAfter.
func TestConfigMismatchResolvesWhenFixed(t *testing.T) {
	ports := fleet(6, map[int]*schemas.PortConfig{4: with(roce(), mtuOf(1500)), 5: with(roce(), mtuOf(1500))})
	v := newConfigView(ports[:5], nil)
	v.ports[host(5)] = processor.NewPortState(host(5))
	v.ports[host(5)].LastTime, v.ports[host(5)].Samples = detecttest.At(0), 1
	v.configs[host(5)] = &processor.KnownConfig{ID: host(5), LinkLayer: "Ethernet", Since: detecttest.At(0), Read: detecttest.At(0), Config: ports[5].cfg}
	d := New()
	var evs configEvents
	for sec := 1.0; sec <= 60; sec++ {
		v.wm = detecttest.At(sec)
		if sec == 30 {
			v.configs[host(4)].Config, v.configs[host(4)].Since = roce(), detecttest.At(30)
		}
		v.ports[host(4)].LastTime = v.wm
		d.OnWatermark(context.Background(), v, v.wm, &evs)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Subject.Node+" "+ev.State)
		if ev.State == schemas.StateResolved && ev.Subject.Node == "gpu-004" {
			if ev.End == nil || *ev.End != detecttest.At(30) || !strings.Contains(ev.Summary, "resolved, the port's configuration agrees with the fabric's again") {
				t.Errorf("resolved: end %v, summary %q", ev.End, ev.Summary)
			}
		}
	}
	if want := []string{"gpu-004 open", "gpu-005 open", "gpu-004 resolved"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	// gpu-005 goes silent: resolved after SilentResolveAfter of data time.
	v.wm = detecttest.At(60) + millis(d.SilentResolveAfter)
	d.OnWatermark(context.Background(), v, v.wm, &evs)
	if last := evs[len(evs)-1]; last.Subject.Node != "gpu-005" || last.State != schemas.StateResolved {
		t.Fatalf("silent port: last event %s %s", last.Subject.Node, last.State)
	}
}

// TestConfigMismatchExplainsCNPImbalance runs the two detectors the way a
// processor does: a notification point off by configuration, whose ECN
// marks go unanswered, gives a cnp_ecn_imbalance that names the
// config_mismatch as its cause and says why.
func TestConfigMismatchExplainsCNPImbalance(t *testing.T) {
	dets := processor.Link([]processor.Detector{cnp.New(), New()})
	v := newConfigView(fleet(6, map[int]*schemas.PortConfig{0: with(roce(), func(c *schemas.PortConfig) { c.ECNNPEnabled = &[]int{} })}), nil)
	var evs configEvents
	var marked, sent uint64
	ctx := context.Background()
	for sec := 0.0; sec < 300; sec += 5 {
		for _, id := range sortedIDs(v.ports) {
			var dm, ds uint64 = 5000, 500
			if id == host(0) {
				ds = 0 // NP off: no CNPs for the marks
			}
			if sec > 0 {
				marked, sent = marked+dm, sent+ds
			}
			flags := schemas.Flag(0)
			if sec == 0 {
				flags = schemas.FlagFirst
			}
			s := detecttest.Sample(id, sec, "ACTIVE",
				schemas.CounterDelta{Name: "np_ecn_marked_roce_packets", Source: schemas.SourceHWCounters, Value: marked, Delta: dm, Flags: flags},
				schemas.CounterDelta{Name: "np_cnp_sent", Source: schemas.SourceHWCounters, Value: sent, Delta: ds, Flags: flags},
				schemas.CounterDelta{Name: "rp_cnp_handled", Source: schemas.SourceHWCounters, Value: sent, Delta: ds, Flags: flags},
				schemas.CounterDelta{Name: "rp_cnp_ignored", Source: schemas.SourceHWCounters, Value: 0, Delta: 0, Flags: flags})
			port := v.ports[id]
			for _, d := range dets {
				if pd, ok := d.(processor.PortDetector); ok {
					pd.OnSample(ctx, port, s, &evs)
				}
			}
			port.Observe(s)
		}
		v.wm = detecttest.At(sec)
		for _, d := range dets {
			if fd, ok := d.(processor.FabricDetector); ok {
				fd.OnWatermark(ctx, v, v.wm, &evs)
			}
		}
	}
	var cnp, cfg *schemas.Event
	for _, ev := range evs {
		switch {
		case ev.Type == processor.TypeConfigMismatch && cfg == nil:
			cfg = ev
		case ev.Type == schemas.TypeCNPECNImbalance && ev.Subject == host(0).Subject() && ev.Cause != nil && cnp == nil:
			cnp = ev
		}
	}
	if cfg == nil || cfg.Subject != host(0).Subject() {
		t.Fatalf("no config_mismatch on gpu-000: %v", evs)
	}
	if cnp == nil {
		t.Fatalf("no cnp_ecn_imbalance on gpu-000 naming a cause; events: %d", len(evs))
	}
	if cnp.Cause.ID != cfg.ID || cnp.Cause.Type != processor.TypeConfigMismatch {
		t.Errorf("cause %+v, want %s", cnp.Cause, cfg.ID)
	}
	if want := "because its ECN notification point is off on priority 3 by configuration"; !strings.Contains(cnp.Summary, want) {
		t.Errorf("summary %q lacks %q", cnp.Summary, want)
	}
}

func millis(d time.Duration) schemas.Millis { return schemas.Millis(d / time.Millisecond) }
