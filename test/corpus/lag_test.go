package corpus

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/collector"
	"github.com/rdmawatch/rdmawatch/collector/sysfstest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// memberEthtool answers `ethtool -S` for a LAG's member netdevs from a
// table: what the members of the captured bond would answer on a host
// this machine is not.
type memberEthtool struct {
	stats map[string]map[string]uint64
}

func (m *memberEthtool) Stats(netdev string) (map[string]uint64, error) {
	s, ok := m.stats[netdev]
	if !ok {
		return nil, fmt.Errorf("ethtool stats of netdev %s: no such device", netdev)
	}
	return maps.Clone(s), nil
}

func (m *memberEthtool) Close() error { return nil }

// TestCorpusLAGHostSource reads the real RoCE LAG capture
// cx4lx-bond-ofed5-hw_counters.txt (mlx5_bond_0, whole hw_counters, once)
// with the collector's own host source, the bond's two members answering
// ethtool with the real member capture cx4lx-bond-member-ofed5-ethtool.txt
// (eth01's `ethtool -S | grep -i rdma`, vport RDMA counters only).
//
// Real: every hw_counters value of mlx5_bond_0 and every member statistic
// of the first reading; the member names eth01 and eth02 (the notes: "eth01
// 和 eth02 是 RDMA RoceV2 bond 口的2个成员口", 2 x 25G). Written from the
// notes, not captured: the bond netdev bond0 (ibdev2netdev), the members'
// operstate up and speed 25000; made up: the ifindexes. Synthetic, stated
// per case: eth02's statistics (only eth01 was captured) and the second
// reading, 10 s later, with the increments of bondInc and memberInc.
//
// Checked: the bond's sample carries the captured RDMA counters;
// its ethtool is the members' sum of their non-PHY statistics (all of the
// member capture's are non-PHY), exactly, with the gauge lag_members = 2;
// each member has a reading mlx5_bond_0.<member> carrying only its PHY
// statistics, which the real member capture has none of, so the delta
// engine publishes no sample of it (a reading with nothing in it is no
// sample); with members listing a whole ethtool -S (the composite case)
// each member's sample carries its PHY statistics and nothing else; the
// second reading's deltas are exactly the increments; and
// np_ecn_marked_roce_packets, read at 21,278,189,006 (above 2^34), comes
// through as a 64-bit counter: its value exact, its delta unwrapped.
func TestCorpusLAGHostSource(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("skipped: the sysfs reader reads Linux's sysfs only")
	}
	const bond, dev = "bond0", "mlx5_bond_0"
	members := []string{"eth01", "eth02"}
	bondCap := load(t, fixtureByFile(t, "cx4lx-bond-ofed5-hw_counters.txt"))
	memberReal := onlyStats(t, "cx4lx-bond-member-ofed5-ethtool.txt")
	// A whole ethtool -S of a real mlx5 port with PHY statistics, for the
	// case below whose members list them.
	whole := onlyStats(t, "mlx5-100g-ofed-ethtool.txt")

	// Synthetic increments of the second reading, 10 s after the first:
	// different per counter and per member, so a swapped or dropped one
	// shows.
	bondInc := map[string]uint64{
		"np_ecn_marked_roce_packets": 1_500_000, "np_cnp_sent": 75_000, "out_of_sequence": 12,
		"rx_write_requests": 3_000_000, "resp_cqe_error": 2, "resp_cqe_flush_error": 2,
	}
	memberInc := map[string]map[string]uint64{
		"eth01": {"rx_vport_rdma_unicast_packets": 1_000_000, "rx_vport_rdma_unicast_bytes": 1_100_000_000,
			"tx_vport_rdma_unicast_packets": 700_000, "tx_vport_rdma_unicast_bytes": 500_000_000},
		"eth02": {"rx_vport_rdma_unicast_packets": 2_000_000, "rx_vport_rdma_unicast_bytes": 2_300_000_000,
			"tx_vport_rdma_unicast_packets": 900_000, "tx_vport_rdma_unicast_bytes": 600_000_000},
	}

	// wholeMember is a member that lists a whole ethtool -S: the real
	// 100 GbE mlx5 dump (another host, another card) with its vport RDMA
	// lines replaced by the bond member's real ones. A composite of two
	// real captures, to check the PHY split on every name a real mlx5
	// lists; its PHY statistics, picked by hand from that dump (bits,
	// symbols, CRC, lanes, link-down events, fragments, jabbers, module
	// events), are wantPHY.
	wholeMember := cloneMap(whole)
	maps.Copy(wholeMember, memberReal)
	wantPHY := map[string]bool{}
	for _, n := range []string{"rx_crc_errors_phy", "rx_symbol_err_phy", "rx_fragments_phy", "rx_jabbers_phy",
		"link_down_events_phy", "rx_pcs_symbol_err_phy", "rx_corrected_bits_phy", "rx_err_lane_0_phy", "rx_err_lane_1_phy",
		"rx_err_lane_2_phy", "rx_err_lane_3_phy", "module_unplug", "module_bus_stuck", "module_high_temp", "module_bad_shorted"} {
		if _, ok := whole[n]; !ok {
			t.Fatalf("%s is not in mlx5-100g-ofed-ethtool.txt", n)
		}
		wantPHY[n] = true
	}

	offset := map[string]uint64{"rx_vport_rdma_unicast_packets": 123_456, "rx_vport_rdma_unicast_bytes": 98_765_432,
		"tx_vport_rdma_unicast_packets": 65_432, "tx_vport_rdma_unicast_bytes": 12_345_678}
	plus := func(m, inc map[string]uint64) map[string]uint64 {
		out := cloneMap(m)
		for k, v := range inc {
			if _, ok := out[k]; !ok {
				t.Fatalf("increment of %s, which the statistics do not list", k)
			}
			out[k] += v
		}
		return out
	}
	tests := []struct {
		name  string
		first map[string]map[string]uint64 // the members' statistics at the first reading
	}{
		// eth02 is not captured: the members read alike.
		{"both members read the real member capture", map[string]map[string]uint64{"eth01": memberReal, "eth02": memberReal}},
		// eth02 is not captured: eth01's real values plus a stated offset
		// (offset), so the sum is not twice one member.
		{"eth02 reads the real values plus an offset", map[string]map[string]uint64{"eth01": memberReal, "eth02": plus(memberReal, offset)}},
		{"members list a whole ethtool -S (composite of two real captures)", map[string]map[string]uint64{"eth01": wholeMember, "eth02": plus(wholeMember, offset)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := bondCap.dumps[0].spec.Clone()
			d := spec.Device(dev)
			if d == nil || d.Port(1) == nil {
				t.Fatalf("the capture has no %s port 1", dev)
			}
			d.Port(1).Netdevs = []string{bond}
			spec.Netdevs = []sysfstest.Netdev{{Name: bond, Files: map[string]string{"ifindex": "30", "operstate": "up"}, Members: members}}
			for i, m := range members {
				spec.Netdevs = append(spec.Netdevs, sysfstest.Netdev{Name: m, Files: map[string]string{
					"ifindex": strconv.Itoa(4 + i), "operstate": "up", "speed": "25000"}})
			}
			root := t.TempDir()
			class := filepath.Join(root, "class")
			if err := sysfstest.Build(class, spec); err != nil {
				t.Fatal(err)
			}
			now := base
			eth := &memberEthtool{stats: map[string]map[string]uint64{}}
			for m, s := range tc.first {
				eth.stats[m] = cloneMap(s)
			}
			h, err := collector.NewHostSource("corpus", collector.WithSysfsRoot(root), collector.WithEthtoolStats(eth),
				collector.WithConfigInterval(0), collector.WithHostClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			e := collector.NewEngine(nil)

			// The first reading: the captured values.
			r1, err := h.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			checkLAGReading(t, r1, dev, members, bondCap, tc.first, wantPHY)
			b1 := e.Apply(r1)
			np := sampleOf(t, b1, dev, 1, bond)
			if cd, ok := np.Counter(schemas.SourceHWCounters, "np_ecn_marked_roce_packets"); !ok || cd.Value != 21278189006 || cd.Flags != schemas.FlagFirst {
				t.Errorf("baseline np_ecn_marked_roce_packets %+v (present %v), want the captured 21278189006 as a baseline", cd, ok)
			}

			// The second reading, 10 s later, with the stated increments.
			now = base.Add(10 * time.Second)
			for name, inc := range bondInc {
				v, _ := strconv.ParseUint(d.Port(1).HWCounters[name], 10, 64)
				if err := sysfstest.SetCounter(class, dev, 1, sysfstest.HWCounters, name, v+inc); err != nil {
					t.Fatal(err)
				}
			}
			second := map[string]map[string]uint64{}
			for _, m := range members {
				second[m] = plus(tc.first[m], memberInc[m])
				eth.stats[m] = cloneMap(second[m])
			}
			r2, err := h.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			b2 := e.Apply(r2)
			p := sampleOf(t, b2, dev, 1, bond)
			if p.IntervalMs != 10_000 {
				t.Errorf("bond interval %d ms, want 10000", p.IntervalMs)
			}
			if got := p.Gauges[schemas.GaugeLAGMembers]; got != 2 {
				t.Errorf("bond gauges %v, want %s 2", p.Gauges, schemas.GaugeLAGMembers)
			}
			if _, ok := p.Counter(schemas.SourceEthtool, schemas.GaugeLAGMembers); ok {
				t.Errorf("%s came out as a counter", schemas.GaugeLAGMembers)
			}
			if n := schemas.PauseLinks(p); n != 2 {
				t.Errorf("PauseLinks %d, want 2", n)
			}
			// hw_counters: every captured counter, delta the increment
			// (0 where none was made), no flag.
			for name := range d.Port(1).HWCounters {
				if schemas.KindOf(schemas.SourceHWCounters, name) == schemas.Gauge {
					continue // lifespan: a setting
				}
				cd, ok := p.Counter(schemas.SourceHWCounters, name)
				if !ok || cd.Delta != bondInc[name] || cd.Flags != 0 {
					t.Errorf("bond hw_counters %s: delta %d flags %05b (present %v), want %d", name, cd.Delta, cd.Flags, ok, bondInc[name])
				}
			}
			if k := schemas.KindOf(schemas.SourceHWCounters, "np_ecn_marked_roce_packets"); k != schemas.Counter64 {
				t.Errorf("np_ecn_marked_roce_packets is %s, want %s", k, schemas.Counter64)
			}
			if v := r2.Ports[slices.IndexFunc(r2.Ports, func(x collector.PortReading) bool { return x.Device == dev })].HWCounters["np_ecn_marked_roce_packets"]; v != 21278189006+bondInc["np_ecn_marked_roce_packets"] {
				t.Errorf("second np_ecn_marked_roce_packets read %d, want %d", v, 21278189006+bondInc["np_ecn_marked_roce_packets"])
			}
			if g, ok := p.Gauges["lifespan"]; !ok || g != 10 {
				t.Errorf("lifespan gauge %d (present %v), want the captured 10", g, ok)
			}
			// ethtool: the members' summed non-PHY statistics, delta the
			// summed increments.
			n := 0
			for name := range tc.first[members[0]] {
				if wantPHY[name] {
					if _, ok := p.Counter(schemas.SourceEthtool, name); ok {
						t.Errorf("bond sample carries the PHY statistic %s", name)
					}
					continue
				}
				n++
				cd, ok := p.Counter(schemas.SourceEthtool, name)
				want := memberInc["eth01"][name] + memberInc["eth02"][name]
				if !ok || cd.Delta != want || cd.Flags != 0 {
					t.Errorf("bond ethtool %s: delta %d flags %05b (present %v), want the members' %d", name, cd.Delta, cd.Flags, ok, want)
				}
			}
			if got := countSource(p, schemas.SourceEthtool); got != n {
				t.Errorf("bond sample has %d ethtool counters, want the %d non-PHY statistics", got, n)
			}
			for _, m := range members {
				want := 0
				for name := range tc.first[m] {
					if wantPHY[name] {
						want++
					}
				}
				if want == 0 {
					// The member capture lists no PHY statistic: the
					// member's reading has none (checkLAGReading), and a
					// reading with nothing in it is no sample (the delta
					// engine's "an unknown, not a sample").
					for _, bp := range b2.Ports {
						if bp.Device == schemas.BondMemberDevice(dev, m) {
							t.Errorf("member %s without PHY statistics gave a sample %+v", m, bp)
						}
					}
					continue
				}
				mp := sampleOf(t, b2, schemas.BondMemberDevice(dev, m), 1, m)
				if mp.IntervalMs != 10_000 || countSource(mp, schemas.SourceCounters)+countSource(mp, schemas.SourceHWCounters) != 0 {
					t.Errorf("member %s sample: interval %d, counters %v", m, mp.IntervalMs, mp.Counters)
				}
				if _, ok := mp.Gauges[schemas.GaugeLAGMembers]; ok {
					t.Errorf("member %s carries %s", m, schemas.GaugeLAGMembers)
				}
				if got := countSource(mp, schemas.SourceEthtool); got != want {
					t.Errorf("member %s has %d ethtool counters, want its %d PHY statistics", m, got, want)
				}
				for _, c := range mp.Counters {
					if !wantPHY[c.Name] {
						t.Errorf("member %s sample carries %s, not a PHY statistic", m, c.Name)
						continue
					}
					if c.Delta != 0 || c.Flags != 0 {
						t.Errorf("member %s %s: delta %d flags %05b, want 0 (no increment was made)", m, c.Name, c.Delta, c.Flags)
					}
				}
			}
		})
	}
}

// checkLAGReading checks the host source's first reading of the bond:
// the bond port with the captured hw_counters and the members' summed
// non-PHY statistics, one reading per member with its PHY statistics.
func checkLAGReading(t *testing.T, r *collector.Reading, dev string, members []string, bondCap *capture, first map[string]map[string]uint64, phy map[string]bool) {
	t.Helper()
	if len(r.Ports) != 1+len(members) {
		t.Errorf("%d port readings, want the bond and its %d members", len(r.Ports), len(members))
	}
	bp := findReading(t, r.Ports, dev, 1)
	captured := bondCap.dumps[0].spec.Device(dev).Port(1).HWCounters
	if len(bp.HWCounters) != len(captured) {
		t.Errorf("bond has %d hw_counters, the capture %d", len(bp.HWCounters), len(captured))
	}
	for name, s := range captured {
		if v, ok := bp.HWCounters[name]; !ok || strconv.FormatUint(v, 10) != s {
			t.Errorf("bond hw_counters %s read %d (present %v), want the captured %s", name, v, ok, s)
		}
	}
	if bp.HWCounters["np_ecn_marked_roce_packets"] != 21278189006 {
		t.Errorf("np_ecn_marked_roce_packets read %d", bp.HWCounters["np_ecn_marked_roce_packets"])
	}
	if bp.Netdev != "bond0" || bp.LinkLayer != "Ethernet" || bp.State != "ACTIVE" {
		t.Errorf("bond reading netdev %q link %q state %q", bp.Netdev, bp.LinkLayer, bp.State)
	}
	want := map[string]uint64{schemas.GaugeLAGMembers: uint64(len(members))}
	for _, m := range members {
		for name, v := range first[m] {
			if !phy[name] {
				want[name] += v
			}
		}
	}
	if !maps.Equal(bp.Ethtool, want) {
		t.Errorf("bond ethtool %v\nwant the members' sums %v", bp.Ethtool, want)
	}
	for _, m := range members {
		mr := findReading(t, r.Ports, schemas.BondMemberDevice(dev, m), 1)
		wantM := map[string]uint64{}
		for name, v := range first[m] {
			if phy[name] {
				wantM[name] = v
			}
		}
		if mr.Netdev != m || mr.State != "ACTIVE" || mr.Rate != "25 Gb/sec" || len(mr.Counters)+len(mr.HWCounters) != 0 {
			t.Errorf("member %s reading netdev %q state %q rate %q counters %v %v", m, mr.Netdev, mr.State, mr.Rate, mr.Counters, mr.HWCounters)
		}
		if !maps.Equal(mr.Ethtool, wantM) {
			t.Errorf("member %s ethtool %v, want its PHY statistics %v", m, mr.Ethtool, wantM)
		}
	}
}

func countSource(p *schemas.PortSample, src schemas.Source) int {
	n := 0
	for _, c := range p.Counters {
		if c.Source == src {
			n++
		}
	}
	return n
}
