package collector

import (
	"fmt"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// issueReload builds issue 25's two real readings 10 s apart across a
// driver reload: 52 counters, 11 fall (q-counters and IB error counters
// back near zero), 41 grow past their old value, rx_discards_phy by
// 382,471,778,169. fallKind picks which counters fall.
func issueReload(fallEthtool bool) (before, after PortReading) {
	before = PortReading{Device: "mlx5_0", Port: 1, Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE",
		Counters: map[string]uint64{}, HWCounters: map[string]uint64{}, Ethtool: map[string]uint64{}}
	after = PortReading{Device: "mlx5_0", Port: 1, Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE",
		Counters: map[string]uint64{}, HWCounters: map[string]uint64{}, Ethtool: map[string]uint64{}}
	fallen := 0
	fall := func(m, n map[string]uint64, name string, was, is uint64) {
		m[name], n[name] = was, is
		fallen++
	}
	if fallEthtool {
		for i := range 11 {
			fall(before.Ethtool, after.Ethtool, fmt.Sprintf("rx_prio%d_packets", i), 9_000_000+uint64(i), 1_000+uint64(i))
		}
	} else {
		for _, name := range []string{"out_of_buffer", "out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "duplicate_request", "implied_nak_seq_err", "req_cqe_error", "resp_cqe_error", "rnr_nak_retry_err"} {
			fall(before.HWCounters, after.HWCounters, name, 900_000, 12)
		}
		fall(before.Counters, after.Counters, "symbol_error", 3_000, 2)
		fall(before.Counters, after.Counters, "port_rcv_errors", 40, 1)
	}
	before.Ethtool["rx_discards_phy"], after.Ethtool["rx_discards_phy"] = 1_000, 1_000+382_471_778_169
	grown := 1
	for i := 0; grown < 41; i++ {
		name := fmt.Sprintf("tx_prio%d_bytes_x%d", i%8, i)
		before.Ethtool[name], after.Ethtool[name] = 5_000_000+uint64(i), 9_000_000_000_000+uint64(i)
		grown++
	}
	if n := len(after.Counters) + len(after.HWCounters) + len(after.Ethtool); n != 52 || fallen != 11 {
		panic(fmt.Sprintf("issue shape: %d counters, %d fell", n, fallen))
	}
	return before, after
}

// TestEngineDriverReload is issue 25 item 6: a reading that shows the port
// restarted makes every counter a baseline, those that grew included, and
// the readings after it count normally again.
func TestEngineDriverReload(t *testing.T) {
	for _, tc := range []struct {
		name        string
		fallEthtool bool
		ifindex     [2]int
	}{
		{"11 of 52 fell (q-counters, IB errors), 41 grew", false, [2]int{0, 0}},
		{"11 ethtool statistics fell, 41 grew", true, [2]int{0, 0}},
		{"same shape with ifindex known and unchanged", false, [2]int{7, 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEngine(nil)
			before, after := issueReload(tc.fallEthtool)
			before.Ifindex, after.Ifindex = tc.ifindex[0], tc.ifindex[1]
			apply := func(at int, pr PortReading) *schemas.PortSample {
				ts := t0.Add(time.Duration(at) * time.Second)
				pr.Time = ts
				b := e.Apply(&Reading{Node: "n1", Time: ts, Ports: []PortReading{pr}})
				if b == nil || len(b.Ports) != 1 {
					t.Fatalf("at %d s: no sample", at)
				}
				return &b.Ports[0]
			}
			apply(0, before)
			s := apply(10, after)
			if len(s.Counters) != 52 {
				t.Fatalf("restart reading has %d counters, want 52", len(s.Counters))
			}
			for _, c := range s.Counters {
				if c.Delta != 0 || c.Flags&schemas.FlagReset == 0 || schemas.Usable(c) {
					t.Errorf("%s/%s: delta %d flags %05b, want a baseline (delta 0, reset)", c.Source, c.Name, c.Delta, c.Flags)
				}
			}
			if st := e.Stats(); st.PortRestarts != 1 {
				t.Errorf("PortRestarts = %d, want 1", st.PortRestarts)
			}
			// The next reading counts from the restart's values.
			next := after
			next.Ethtool = map[string]uint64{"rx_discards_phy": after.Ethtool["rx_discards_phy"] + 5}
			next.Counters, next.HWCounters = nil, nil
			s = apply(20, next)
			if c, _ := s.Counter(schemas.SourceEthtool, "rx_discards_phy"); c.Delta != 5 || c.Flags != 0 {
				t.Errorf("after the restart rx_discards_phy: delta %d flags %05b, want 5, 0", c.Delta, c.Flags)
			}
		})
	}
}

func TestEngineRestartSignals(t *testing.T) {
	const (
		first = schemas.FlagFirst
		reset = schemas.FlagReset
		held  = schemas.FlagHeld
		wrap  = schemas.FlagWrapped
	)
	type rd struct {
		at      int
		ifindex int
		lower   []int
		c, hw   map[string]uint64
		et      map[string]uint64
		want    map[string]wantDelta
	}
	c := func(se, data uint64) map[string]uint64 {
		return map[string]uint64{"symbol_error": se, "port_xmit_data": data}
	}
	tests := []struct {
		name     string
		readings []rd
		restarts uint64
	}{
		{"ifindex changed, every counter grew: still a restart", []rd{
			{at: 0, ifindex: 7, c: c(1, 1000), want: map[string]wantDelta{"port_xmit_data": {0, first}}},
			{at: 10, ifindex: 7, c: c(2, 2000), want: map[string]wantDelta{"port_xmit_data": {4000, 0}, "symbol_error": {1, 0}}},
			{at: 20, ifindex: 9, c: c(3, 9000), want: map[string]wantDelta{"port_xmit_data": {0, reset}, "symbol_error": {0, reset}}},
			{at: 30, ifindex: 9, c: c(3, 9100), want: map[string]wantDelta{"port_xmit_data": {400, 0}, "symbol_error": {0, 0}}},
		}, 1},
		{"ifindex unknown in between says nothing", []rd{
			{at: 0, ifindex: 7, c: c(1, 1000), want: map[string]wantDelta{"port_xmit_data": {0, first}}},
			{at: 10, ifindex: 0, c: c(1, 2000), want: map[string]wantDelta{"port_xmit_data": {4000, 0}}},
			{at: 20, ifindex: 7, c: c(1, 3000), want: map[string]wantDelta{"port_xmit_data": {4000, 0}}},
		}, 0},
		{"a bond member re-created", []rd{
			{at: 0, ifindex: 30, lower: []int{4, 5}, c: c(1, 1000), want: map[string]wantDelta{"port_xmit_data": {0, first}}},
			{at: 10, ifindex: 30, lower: []int{4, 5}, c: c(1, 2000), want: map[string]wantDelta{"port_xmit_data": {4000, 0}}},
			{at: 20, ifindex: 30, lower: []int{4, 12}, c: c(1, 2500), want: map[string]wantDelta{"port_xmit_data": {0, reset}}},
		}, 1},
		{"two misread files of many are held, not a restart", []rd{
			{at: 0, c: map[string]uint64{"symbol_error": 5, "port_rcv_errors": 6, "link_downed": 1, "port_xmit_data": 10, "port_rcv_data": 10}, want: map[string]wantDelta{"symbol_error": {0, first}}},
			{at: 10, c: map[string]uint64{"symbol_error": 0, "port_rcv_errors": 0, "link_downed": 1, "port_xmit_data": 20, "port_rcv_data": 20},
				want: map[string]wantDelta{"symbol_error": {0, held}, "port_rcv_errors": {0, held}, "port_xmit_data": {40, 0}}},
		}, 0},
		{"three counters falling is a restart whatever the share", []rd{
			{at: 0, c: map[string]uint64{"symbol_error": 5, "port_rcv_errors": 6, "VL15_dropped": 7, "link_downed": 1, "port_xmit_data": 10, "port_rcv_data": 10, "port_xmit_packets": 10, "port_rcv_packets": 10}, want: map[string]wantDelta{"symbol_error": {0, first}}},
			{at: 10, c: map[string]uint64{"symbol_error": 0, "port_rcv_errors": 0, "VL15_dropped": 0, "link_downed": 1, "port_xmit_data": 20, "port_rcv_data": 20, "port_xmit_packets": 20, "port_rcv_packets": 20},
				want: map[string]wantDelta{"symbol_error": {0, reset}, "port_xmit_data": {0, reset}, "port_rcv_packets": {0, reset}}},
		}, 1},
		// One statistic read as 0 once (a trace's misread; an alt
		// generator's healthy fleet carried link_down_events_phy 2, 0, 2):
		// held, so the next 2 is no new link down.
		{"one ethtool statistic read 0 once is held, not a restart", []rd{
			{at: 0, et: map[string]uint64{"link_down_events_phy": 2, "rx_discards_phy": 100}, want: map[string]wantDelta{"link_down_events_phy": {0, first}}},
			{at: 10, et: map[string]uint64{"link_down_events_phy": 0, "rx_discards_phy": 110}, want: map[string]wantDelta{"link_down_events_phy": {0, held}, "rx_discards_phy": {10, 0}}},
			{at: 20, et: map[string]uint64{"link_down_events_phy": 2, "rx_discards_phy": 120}, want: map[string]wantDelta{"link_down_events_phy": {0, 0}, "rx_discards_phy": {10, 0}}},
		}, 0},
		{"an ethtool statistic falling to a non-zero value is a restart", []rd{
			{at: 0, et: map[string]uint64{"link_down_events_phy": 2, "rx_discards_phy": 100}, want: map[string]wantDelta{"rx_discards_phy": {0, first}}},
			{at: 10, et: map[string]uint64{"link_down_events_phy": 2, "rx_discards_phy": 7}, want: map[string]wantDelta{"link_down_events_phy": {0, reset}, "rx_discards_phy": {0, reset}}},
		}, 1},
		{"a wrap and a misread are not a restart", []rd{
			{at: 0, hw: map[string]uint64{"out_of_buffer": 4294967000, "out_of_sequence": 50, "packet_seq_err": 9}, want: map[string]wantDelta{"out_of_buffer": {0, first}}},
			{at: 10, hw: map[string]uint64{"out_of_buffer": 4, "out_of_sequence": 0, "packet_seq_err": 10},
				want: map[string]wantDelta{"out_of_buffer": {300, wrap}, "out_of_sequence": {0, held}, "packet_seq_err": {1, 0}}},
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEngine(nil)
			for i, r := range tc.readings {
				ts := t0.Add(time.Duration(r.at) * time.Second)
				b := e.Apply(&Reading{Node: "n1", Time: ts, Ports: []PortReading{{Device: "mlx5_bond_0", Port: 1, Time: ts,
					Ifindex: r.ifindex, LowerIfindex: r.lower, Counters: r.c, HWCounters: r.hw, Ethtool: r.et}}})
				if b == nil {
					t.Fatalf("reading %d: no batch", i)
				}
				for name, w := range r.want {
					c, ok := b.Ports[0].Counter(schemas.SourceCounters, name)
					if !ok {
						c, ok = b.Ports[0].Counter(schemas.SourceHWCounters, name)
					}
					if !ok {
						c, ok = b.Ports[0].Counter(schemas.SourceEthtool, name)
					}
					if !ok || c.Delta != w.delta || c.Flags != w.flags {
						t.Errorf("reading %d: %s: delta %d flags %05b (found %v), want delta %d flags %05b", i, name, c.Delta, c.Flags, ok, w.delta, w.flags)
					}
				}
			}
			if got := e.Stats().PortRestarts; got != tc.restarts {
				t.Errorf("PortRestarts = %d, want %d", got, tc.restarts)
			}
		})
	}
}

// TestEngineMLX4PinnedData is issue 25 item 4: an mlx4 port on an old
// kernel reads its 32-bit data counters from PortCounters, which stop at
// 4294967295. From the real ConnectX-3 values of
// test/fixtures/mlx-sysfs-capture.txt (mlx4_0 port 1) the counter climbs
// to the top and stays: each reading there is flagged saturated, and no
// reading of it is taken for a restart.
func TestEngineMLX4PinnedData(t *testing.T) {
	const (
		first = schemas.FlagFirst
		sat   = schemas.FlagSaturated
		pin   = 1<<32 - 1
	)
	fixture := map[string]uint64{"port_rcv_data": 2221223609, "port_rcv_packets": 87169372, "port_xmit_packets": 85734114, "port_xmit_wait": 3599, "symbol_error": 0}
	series := []struct {
		rcvData uint64
		want    wantDelta
	}{
		{2221223609, wantDelta{0, first}},
		{4000000000, wantDelta{(4000000000 - 2221223609) * 4, 0}},
		{pin, wantDelta{(pin - 4000000000) * 4, sat}},
		{pin, wantDelta{0, sat}},
		{pin, wantDelta{0, sat}},
	}
	e := NewEngine(nil)
	for i, st := range series {
		ts := t0.Add(time.Duration(i*10) * time.Second)
		c := make(map[string]uint64, len(fixture))
		for k, v := range fixture {
			c[k] = v + uint64(i)*1000
		}
		c["symbol_error"] = 0
		c["port_rcv_data"] = st.rcvData
		b := e.Apply(&Reading{Node: "n1", Time: ts, Ports: []PortReading{{Device: "mlx4_0", Port: 1, LinkLayer: "InfiniBand", State: "ACTIVE", Time: ts, Counters: c}}})
		got, ok := b.Ports[0].Counter(schemas.SourceCounters, "port_rcv_data")
		if !ok || got.Delta != st.want.delta || got.Flags != st.want.flags {
			t.Errorf("reading %d (%d): delta %d flags %05b, want %d %05b", i, st.rcvData, got.Delta, got.Flags, st.want.delta, st.want.flags)
		}
	}
	if st := e.Stats(); st.PortRestarts != 0 || st.Resets != 0 {
		t.Errorf("stats %+v: a pinned counter is no restart", st)
	}
}
