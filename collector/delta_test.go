package collector

import (
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

var t0 = time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)

// step is one reading of one port in a delta-engine table test.
type step struct {
	at      int // seconds after t0
	restart bool
	c       map[string]uint64 // counters/
	hw      map[string]uint64 // hw_counters/
	et      map[string]uint64 // ethtool
	// want: counter name -> expected delta and flags; nil want means the
	// sample must be dropped.
	want map[string]wantDelta
	// absent lists counters that must not appear in the sample.
	absent []string
}

type wantDelta struct {
	delta uint64
	flags schemas.Flag
}

func run(t *testing.T, steps []step) {
	t.Helper()
	e := NewEngine(nil)
	for i, st := range steps {
		r := &Reading{Node: "n1", Time: t0.Add(time.Duration(st.at) * time.Second), Restart: st.restart}
		r.Ports = []PortReading{{Device: "mlx5_0", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", Time: r.Time,
			Counters: st.c, HWCounters: st.hw, Ethtool: st.et}}
		b := e.Apply(r)
		if st.want == nil {
			if b != nil {
				t.Fatalf("step %d: want sample dropped, got %+v", i, b.Ports)
			}
			continue
		}
		if b == nil || len(b.Ports) != 1 {
			t.Fatalf("step %d: want one port sample, got %+v", i, b)
		}
		got := map[string]schemas.CounterDelta{}
		for _, c := range b.Ports[0].Counters {
			got[c.Name] = c
		}
		for name, w := range st.want {
			c, ok := got[name]
			if !ok {
				t.Fatalf("step %d: counter %s missing from sample", i, name)
			}
			if c.Delta != w.delta || c.Flags != w.flags {
				t.Errorf("step %d: %s: delta %d flags %05b, want delta %d flags %05b", i, name, c.Delta, c.Flags, w.delta, w.flags)
			}
		}
		for _, name := range st.absent {
			if _, ok := got[name]; ok {
				t.Errorf("step %d: %s should be absent", i, name)
			}
		}
	}
}

func TestEngineDeltas(t *testing.T) {
	const (
		first = schemas.FlagFirst
		reset = schemas.FlagReset
		wrap  = schemas.FlagWrapped
		sat   = schemas.FlagSaturated
		held  = schemas.FlagHeld
	)
	m := func(kv ...any) map[string]uint64 {
		out := map[string]uint64{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = uint64(kv[i+1].(int))
		}
		return out
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"baseline then delta", []step{
			{at: 0, c: m("symbol_error", 5), want: map[string]wantDelta{"symbol_error": {0, first}}},
			{at: 1, c: m("symbol_error", 9), want: map[string]wantDelta{"symbol_error": {4, 0}}},
		}},
		{"16-bit saturates", []step{
			{at: 0, c: m("symbol_error", 65530), want: map[string]wantDelta{"symbol_error": {0, first}}},
			{at: 1, c: m("symbol_error", 65535), want: map[string]wantDelta{"symbol_error": {5, sat}}},
			{at: 2, c: m("symbol_error", 65535), want: map[string]wantDelta{"symbol_error": {0, sat}}},
		}},
		{"8-bit saturates", []step{
			{at: 0, c: m("link_downed", 250), want: map[string]wantDelta{"link_downed": {0, first}}},
			{at: 1, c: m("link_downed", 255), want: map[string]wantDelta{"link_downed": {5, sat}}},
		}},
		{"4-bit saturates, pinned at baseline", []step{
			{at: 0, c: m("local_link_integrity_errors", 15), want: map[string]wantDelta{"local_link_integrity_errors": {0, first | sat}}},
			{at: 1, c: m("local_link_integrity_errors", 15), want: map[string]wantDelta{"local_link_integrity_errors": {0, sat}}},
		}},
		{"cleared saturated counter is a reset", []step{
			{at: 0, c: m("symbol_error", 65535, "port_xmit_data", 1000), want: map[string]wantDelta{"symbol_error": {0, first | sat}}},
			{at: 1, c: m("symbol_error", 3, "port_xmit_data", 2000), want: map[string]wantDelta{"symbol_error": {3, reset}, "port_xmit_data": {4000, 0}}},
		}},
		{"32-bit hw counter wraps", []step{
			{at: 0, hw: m("out_of_buffer", 4294967290), want: map[string]wantDelta{"out_of_buffer": {0, first}}},
			{at: 1, hw: m("out_of_buffer", 4), want: map[string]wantDelta{"out_of_buffer": {10, wrap}}},
		}},
		{"32-bit hw counter low value falling is a reset", []step{
			{at: 0, hw: m("out_of_sequence", 1000), want: map[string]wantDelta{"out_of_sequence": {0, first}}},
			{at: 1, hw: m("out_of_sequence", 7), want: map[string]wantDelta{"out_of_sequence": {7, reset}}},
		}},
		{"port restart is a new baseline for everything, even a high 32-bit counter", []step{
			{at: 0, c: m("port_xmit_data", 1000000, "port_rcv_data", 900000, "symbol_error", 10), hw: m("out_of_buffer", 4294967000),
				want: map[string]wantDelta{"port_xmit_data": {0, first}}},
			{at: 1, c: m("port_xmit_data", 100, "port_rcv_data", 50, "symbol_error", 0), hw: m("out_of_buffer", 2),
				want: map[string]wantDelta{"port_xmit_data": {0, reset}, "port_rcv_data": {0, reset}, "symbol_error": {0, reset}, "out_of_buffer": {0, reset}}},
		}},
		{"a PMA clear (perfquery -R) starts counters/ over; an ethtool misread at the same reading stays held", []step{
			{at: 0, c: m("port_xmit_data", 1000000, "port_rcv_data", 900000, "link_downed", 1), hw: m("out_of_sequence", 50), et: m("link_down_events_phy", 1, "rx_corrected_bits_phy", 500),
				want: map[string]wantDelta{"port_xmit_data": {0, first}}},
			{at: 1, c: m("port_xmit_data", 100, "port_rcv_data", 50, "link_downed", 0), hw: m("out_of_sequence", 52), et: m("link_down_events_phy", 0, "rx_corrected_bits_phy", 530),
				want: map[string]wantDelta{"port_xmit_data": {0, reset}, "link_downed": {0, reset}, "out_of_sequence": {2, 0}, "link_down_events_phy": {0, held}, "rx_corrected_bits_phy": {30, 0}}},
			{at: 2, c: m("port_xmit_data", 300, "port_rcv_data", 90, "link_downed", 0), hw: m("out_of_sequence", 53), et: m("link_down_events_phy", 1, "rx_corrected_bits_phy", 560),
				want: map[string]wantDelta{"port_xmit_data": {800, 0}, "link_down_events_phy": {0, 0}, "rx_corrected_bits_phy": {30, 0}}},
		}},
		{"a reload starts every source over, even with one ethtool statistic read 0", []step{
			{at: 0, c: m("port_xmit_data", 1000000, "port_rcv_data", 900000), et: m("link_down_events_phy", 1, "rx_corrected_bits_phy", 500),
				want: map[string]wantDelta{"port_xmit_data": {0, first}}},
			{at: 1, c: m("port_xmit_data", 100, "port_rcv_data", 50), et: m("link_down_events_phy", 0, "rx_corrected_bits_phy", 20),
				want: map[string]wantDelta{"port_xmit_data": {0, reset}, "link_down_events_phy": {0, reset}, "rx_corrected_bits_phy": {0, reset}}},
		}},
		{"read glitch to 0 is held, then recovers", []step{
			{at: 0, c: m("port_xmit_data", 1000, "symbol_error", 7), want: map[string]wantDelta{"port_xmit_data": {0, first}}},
			{at: 1, c: m("port_xmit_data", 0, "symbol_error", 7), want: map[string]wantDelta{"port_xmit_data": {0, held}, "symbol_error": {0, 0}}},
			{at: 2, c: m("port_xmit_data", 1500, "symbol_error", 8), want: map[string]wantDelta{"port_xmit_data": {2000, 0}, "symbol_error": {1, 0}}},
		}},
		{"zero twice is a clear", []step{
			{at: 0, c: m("symbol_error", 70, "port_xmit_data", 10), want: map[string]wantDelta{"symbol_error": {0, first}}},
			{at: 1, c: m("symbol_error", 0, "port_xmit_data", 20), want: map[string]wantDelta{"symbol_error": {0, held}}},
			{at: 2, c: m("symbol_error", 0, "port_xmit_data", 30), want: map[string]wantDelta{"symbol_error": {0, reset}}},
			{at: 3, c: m("symbol_error", 2, "port_xmit_data", 40), want: map[string]wantDelta{"symbol_error": {2, 0}}},
		}},
		{"zero on a high 32-bit counter is a glitch, not a wrap", []step{
			{at: 0, hw: m("out_of_buffer", 4294967000, "np_cnp_sent", 5), want: map[string]wantDelta{"out_of_buffer": {0, first}}},
			{at: 1, hw: m("out_of_buffer", 0, "np_cnp_sent", 6), want: map[string]wantDelta{"out_of_buffer": {0, held}}},
			{at: 2, hw: m("out_of_buffer", 4294967100, "np_cnp_sent", 7), want: map[string]wantDelta{"out_of_buffer": {100, 0}}},
		}},
		{"a zero baseline then an impossible rate is a glitch, not a delta", []step{
			{at: 0, hw: m("np_ecn_marked_roce_packets", 0, "np_cnp_sent", 96229293), want: map[string]wantDelta{"np_ecn_marked_roce_packets": {0, first}}},
			{at: 10, hw: m("np_ecn_marked_roce_packets", 1751807952, "np_cnp_sent", 96254908), want: map[string]wantDelta{"np_ecn_marked_roce_packets": {0, first}, "np_cnp_sent": {25615, 0}}},
			{at: 20, hw: m("np_ecn_marked_roce_packets", 1751808952, "np_cnp_sent", 96254918), want: map[string]wantDelta{"np_ecn_marked_roce_packets": {1000, 0}}},
		}},
		{"a zero baseline then more events than packets crossed the port is a glitch", []step{
			{at: 0, c: m("port_rcv_packets", 5_000_000_000, "port_xmit_packets", 4_000_000_000), hw: m("np_ecn_marked_roce_packets", 0), want: map[string]wantDelta{"np_ecn_marked_roce_packets": {0, first}}},
			{at: 10, c: m("port_rcv_packets", 5_100_000_000, "port_xmit_packets", 4_100_000_000), hw: m("np_ecn_marked_roce_packets", 606_287_351), want: map[string]wantDelta{"np_ecn_marked_roce_packets": {0, first}}},
			{at: 20, c: m("port_rcv_packets", 5_200_000_000, "port_xmit_packets", 4_200_000_000), hw: m("np_ecn_marked_roce_packets", 606_425_277), want: map[string]wantDelta{"np_ecn_marked_roce_packets": {137_926, 0}}},
		}},
		{"a zero baseline then fewer events than packets is a real delta", []step{
			{at: 0, c: m("port_rcv_packets", 5_000_000_000, "port_xmit_packets", 4_000_000_000), hw: m("np_ecn_marked_roce_packets", 0), want: map[string]wantDelta{"np_ecn_marked_roce_packets": {0, first}}},
			{at: 10, c: m("port_rcv_packets", 5_900_000_000, "port_xmit_packets", 4_100_000_000), hw: m("np_ecn_marked_roce_packets", 606_287_351), want: map[string]wantDelta{"np_ecn_marked_roce_packets": {606_287_351, 0}}},
		}},
		{"missing key keeps the baseline", []step{
			{at: 0, et: m("rx_corrected_bits_phy", 100, "rx_bits_phy", 1000), want: map[string]wantDelta{"rx_corrected_bits_phy": {0, first}}},
			{at: 1, et: m("rx_bits_phy", 2000), want: map[string]wantDelta{"rx_bits_phy": {1000, 0}}, absent: []string{"rx_corrected_bits_phy"}},
			{at: 2, et: m("rx_corrected_bits_phy", 130, "rx_bits_phy", 3000), want: map[string]wantDelta{"rx_corrected_bits_phy": {30, 0}}},
		}},
		{"duplicate and out-of-order samples are dropped", []step{
			{at: 0, c: m("symbol_error", 1), want: map[string]wantDelta{"symbol_error": {0, first}}},
			{at: 5, c: m("symbol_error", 2), want: map[string]wantDelta{"symbol_error": {1, 0}}},
			{at: 5, c: m("symbol_error", 2)},
			{at: 3, c: m("symbol_error", 1)},
			{at: 10, c: m("symbol_error", 4), want: map[string]wantDelta{"symbol_error": {2, 0}}},
		}},
		{"restart is a new baseline", []step{
			{at: 0, c: m("link_downed", 1), want: map[string]wantDelta{"link_downed": {0, first}}},
			{at: 1, c: m("link_downed", 1), want: map[string]wantDelta{"link_downed": {0, 0}}},
			{at: 2, restart: true, c: m("link_downed", 2), want: map[string]wantDelta{"link_downed": {0, first}}},
			{at: 3, c: m("link_downed", 2), want: map[string]wantDelta{"link_downed": {0, 0}}},
		}},
		{"a new counter appearing is a baseline", []step{
			{at: 0, c: m("symbol_error", 1), want: map[string]wantDelta{"symbol_error": {0, first}}},
			{at: 1, c: m("symbol_error", 1, "link_downed", 3), want: map[string]wantDelta{"link_downed": {0, first}}},
		}},
		{"lifespan is a gauge, not a counter", []step{
			{at: 0, hw: m("lifespan", 10, "out_of_buffer", 1), want: map[string]wantDelta{"out_of_buffer": {0, first}}, absent: []string{"lifespan"}},
			{at: 1, hw: m("lifespan", 12, "out_of_buffer", 1), want: map[string]wantDelta{"out_of_buffer": {0, 0}}, absent: []string{"lifespan"}},
		}},
		{"64-bit ethtool counter falling is a reset", []step{
			{at: 0, et: m("tx_prio3_pause", 500), want: map[string]wantDelta{"tx_prio3_pause": {0, first}}},
			{at: 1, et: m("tx_prio3_pause", 20), want: map[string]wantDelta{"tx_prio3_pause": {0, reset}}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { run(t, tc.steps) })
	}
}

func TestEngineBatchIdentity(t *testing.T) {
	e := NewEngine(func(node string, restarts int) string { return node + "-" + string(rune('a'+restarts)) })
	mk := func(at int, restart bool) *Reading {
		ts := t0.Add(time.Duration(at) * time.Second)
		return &Reading{Node: "n1", Time: ts, Restart: restart, Ports: []PortReading{
			{Device: "mlx5_0", Port: 1, Time: ts, Counters: map[string]uint64{"link_downed": 1}, HWCounters: map[string]uint64{"lifespan": 10}},
			{Device: "mlx5_0", Port: 2, Time: ts.Add(3 * time.Millisecond), Counters: map[string]uint64{"link_downed": 1}},
		}}
	}
	b1 := e.Apply(mk(0, false))
	b2 := e.Apply(mk(1, false))
	if b1.MsgID() != "n1/n1-a/1" || b2.MsgID() != "n1/n1-a/2" {
		t.Fatalf("msg ids %s %s", b1.MsgID(), b2.MsgID())
	}
	if b2.TimeMs != t0.Add(time.Second+3*time.Millisecond).UnixMilli() {
		t.Errorf("batch time %d is not the latest port time", b2.TimeMs)
	}
	if b2.Ports[0].IntervalMs != 1000 || b1.Ports[0].IntervalMs != 0 {
		t.Errorf("interval %d / %d", b2.Ports[0].IntervalMs, b1.Ports[0].IntervalMs)
	}
	if b1.Ports[0].Gauges["lifespan"] != 10 {
		t.Errorf("lifespan gauge lost: %v", b1.Ports[0].Gauges)
	}
	if e.Apply(mk(1, false)) != nil {
		t.Errorf("a batch of duplicates must yield nothing")
	}
	b3 := e.Apply(mk(2, true))
	if b3.MsgID() != "n1/n1-b/1" {
		t.Errorf("after restart msg id %s", b3.MsgID())
	}
	st := e.Stats()
	if st.Duplicates != 2 || st.Restarts != 1 || st.Samples != 6 {
		t.Errorf("stats %+v", st)
	}
}

// TestEngineUnreadablePort is issue 8.10: a port whose files could not be
// read for a scrape (all counters 0, or none at all) must not turn its
// lifetime totals into deltas at the next good reading.
func TestEngineUnreadablePort(t *testing.T) {
	const (
		first = schemas.FlagFirst
		reset = schemas.FlagReset
		held  = schemas.FlagHeld
	)
	lifetime := map[string]uint64{"symbol_error": 118, "link_downed": 102, "port_xmit_data": 5000, "port_rcv_data": 4000}
	zero := map[string]uint64{"symbol_error": 0, "link_downed": 0, "port_xmit_data": 0, "port_rcv_data": 0}
	grown := map[string]uint64{"symbol_error": 120, "link_downed": 102, "port_xmit_data": 6000, "port_rcv_data": 4500}
	tests := []struct {
		name  string
		steps []step
	}{
		{"all zero for one scrape", []step{
			{at: 0, c: lifetime, want: map[string]wantDelta{"symbol_error": {0, first}}},
			{at: 10, c: zero, want: map[string]wantDelta{"symbol_error": {0, held}, "link_downed": {0, held}, "port_xmit_data": {0, held}}},
			{at: 20, c: grown, want: map[string]wantDelta{"symbol_error": {2, 0}, "link_downed": {0, 0}, "port_xmit_data": {4000, 0}, "port_rcv_data": {2000, 0}}},
		}},
		{"all zero for three scrapes", []step{
			{at: 0, c: lifetime, want: map[string]wantDelta{"symbol_error": {0, first}}},
			{at: 10, c: zero, want: map[string]wantDelta{"symbol_error": {0, held}}},
			{at: 20, c: zero, want: map[string]wantDelta{"symbol_error": {0, held}, "link_downed": {0, held}}},
			{at: 30, c: zero, want: map[string]wantDelta{"link_downed": {0, held}}},
			{at: 40, c: grown, want: map[string]wantDelta{"symbol_error": {2, 0}, "link_downed": {0, 0}}},
		}},
		{"all zero, then a real clear shows as a restart and publishes nothing false", []step{
			{at: 0, c: lifetime, want: map[string]wantDelta{"symbol_error": {0, first}}},
			{at: 10, c: zero, want: map[string]wantDelta{"symbol_error": {0, held}}},
			{at: 20, c: map[string]uint64{"symbol_error": 1, "link_downed": 0, "port_xmit_data": 300, "port_rcv_data": 200},
				want: map[string]wantDelta{"symbol_error": {0, reset}, "link_downed": {0, reset}, "port_xmit_data": {0, reset}}},
			{at: 30, c: map[string]uint64{"symbol_error": 3, "link_downed": 0, "port_xmit_data": 400, "port_rcv_data": 300},
				want: map[string]wantDelta{"symbol_error": {2, 0}, "port_xmit_data": {400, 0}}},
		}},
		{"no counter readable is no sample, the interval spans the gap", []step{
			{at: 0, c: lifetime, want: map[string]wantDelta{"symbol_error": {0, first}}},
			{at: 10, c: map[string]uint64{}, hw: map[string]uint64{"lifespan": 10}},
			{at: 20, c: grown, want: map[string]wantDelta{"symbol_error": {2, 0}, "port_xmit_data": {4000, 0}}},
		}},
		{"some counters missing keep their baseline", []step{
			{at: 0, c: lifetime, want: map[string]wantDelta{"symbol_error": {0, first}}},
			{at: 10, c: map[string]uint64{"port_xmit_data": 5500}, want: map[string]wantDelta{"port_xmit_data": {2000, 0}}, absent: []string{"symbol_error", "link_downed"}},
			{at: 20, c: grown, want: map[string]wantDelta{"symbol_error": {2, 0}, "link_downed": {0, 0}, "port_xmit_data": {2000, 0}}},
		}},
		{"a counter new in an all-zero reading is no baseline", []step{
			{at: 0, c: map[string]uint64{"symbol_error": 118, "port_xmit_data": 5000}, want: map[string]wantDelta{"symbol_error": {0, first}}},
			{at: 10, c: zero, want: map[string]wantDelta{"symbol_error": {0, held}}, absent: []string{"link_downed", "port_rcv_data"}},
			{at: 20, c: grown, want: map[string]wantDelta{"symbol_error": {2, 0}, "link_downed": {0, first}, "port_rcv_data": {0, first}}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { run(t, tc.steps) })
	}
}

func TestEngineIntervalSpansAnEmptyReading(t *testing.T) {
	e := NewEngine(nil)
	read := func(at int, c map[string]uint64) *schemas.CounterBatch {
		ts := t0.Add(time.Duration(at) * time.Second)
		return e.Apply(&Reading{Node: "n1", Time: ts, Ports: []PortReading{{Device: "mlx5_0", Port: 1, Time: ts, Counters: c}}})
	}
	read(0, map[string]uint64{"symbol_error": 1})
	if b := read(10, map[string]uint64{}); b != nil {
		t.Fatalf("a reading without counters gave a batch: %+v", b.Ports)
	}
	b := read(20, map[string]uint64{"symbol_error": 4})
	if b == nil || b.Ports[0].IntervalMs != 20000 || b.Ports[0].Counters[0].Delta != 3 {
		t.Fatalf("after the gap: %+v, want interval 20000 ms and delta 3", b)
	}
	if st := e.Stats(); st.Empty != 1 || st.Samples != 2 {
		t.Errorf("stats %+v, want 1 empty, 2 samples", st)
	}
}
