package schemas

import (
	"math"
	"testing"
)

func TestDerivedDefinitions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"per second", PerSecond(500, 2000), 250},
		{"per second without an interval", PerSecond(500, 0), 0},
		{"gbps: bytes over the interval", Gbps(12_500_000_000, 2000), 50},
		{"gbps without an interval", Gbps(1, -5), 0},
		{"link utilisation: the busier direction", LinkUtilisation(10, 50, 100), 0.5},
		{"link utilisation clamped", LinkUtilisation(120, 0, 100), 1},
		{"link utilisation without a rate", LinkUtilisation(10, 50, 0), 0},
		{"pause fraction", PauseFraction(250_000, 1000), 0.25},
		{"pause fraction clamped", PauseFraction(9_000_000, 1000), 1},
		{"pause fraction without an interval", PauseFraction(1, 0), 0},
		{"error ratio", ErrorRatio(100, 1e9), 1e-7},
		{"error ratio without bits", ErrorRatio(100, 0), 0},
		{"error ratio of infinite bits", ErrorRatio(1, math.Inf(1)), 0},
		{"line bits: rate times time", LineBits(200, 1000, 5), 200e9},
		{"line bits without a rate: received bits", LineBits(0, 1000, 1000), 8000},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// RcvUtilisation (pfc_storm's figure) is received traffic only, not
	// clamped, and unknown without a rate; LinkUtilisation is not it.
	if u, ok := RcvUtilisation(10, 100); !ok || u != 0.1 {
		t.Errorf("RcvUtilisation(10, 100) = %v, %v", u, ok)
	}
	if u, ok := RcvUtilisation(101, 100); !ok || u != 1.01 {
		t.Errorf("RcvUtilisation(101, 100) = %v, %v: not clamped", u, ok)
	}
	if _, ok := RcvUtilisation(10, 0); ok {
		t.Error("RcvUtilisation without a rate is known")
	}
	if RcvUtilisation10, _ := RcvUtilisation(10, 100); RcvUtilisation10 == LinkUtilisation(10, 50, 100) {
		t.Error("the two utilisations agree where rx and tx differ")
	}
	for _, tc := range []struct {
		flags Flag
		want  bool
	}{{0, true}, {FlagWrapped, true}, {FlagSaturated, true}, {FlagFirst, false}, {FlagReset, false}, {FlagHeld, false}, {FlagWrapped | FlagHeld, false}} {
		if got := Usable(CounterDelta{Flags: tc.flags}); got != tc.want {
			t.Errorf("Usable(flags %b) = %v, want %v", tc.flags, got, tc.want)
		}
	}
}

func TestPortFigures(t *testing.T) {
	c := func(src Source, name string, delta uint64, flags Flag) CounterDelta {
		return CounterDelta{Source: src, Name: name, Delta: delta, Flags: flags}
	}
	port := func(layer, rate string, intervalMs int64, counters ...CounterDelta) *PortSample {
		return &PortSample{Device: "mlx5_0", Port: 1, LinkLayer: layer, Rate: rate, TimeMs: 1, IntervalMs: intervalMs, Counters: counters}
	}
	eth, ib := SourceEthtool, SourceCounters
	busy := []CounterDelta{
		c(ib, "port_rcv_data", 12_500_000_000, 0), // 50 Gb/s over 2 s
		c(ib, "port_xmit_data", 2_500_000_000, 0), // 10 Gb/s
		c(eth, "tx_prio3_pause_duration", 500_000, 0),
		c(eth, "tx_prio4_pause_duration", 100_000, 0),
		c(eth, "rx_prio3_pause_duration", 9_000_000, 0), // more than the interval: clamped
		c(eth, "rx_bits_phy", 1e9, 0),
		c(eth, "rx_corrected_bits_phy", 100, 0),
		c(eth, "rx_pcs_symbol_err_phy", 1, 0),
	}
	with := func(i int, flags Flag) []CounterDelta {
		out := append([]CounterDelta(nil), busy...)
		out[i].Flags = flags
		return out
	}
	full := Figures{RateGbps: 100, RcvGbps: 50, XmitGbps: 10, Utilisation: 0.5, TxPauseFraction: 0.25, RxPauseFraction: 1,
		PreFECBER: 1e-7, PostFECBER: 1e-9}
	for _, tc := range []struct {
		name string
		port *PortSample
		want Figures
	}{
		{"baseline has only the rate", port("Ethernet", "100 Gb/sec (4X EDR)", 0, c(ib, "port_rcv_data", 5, FlagFirst)),
			Figures{RateGbps: 100}},
		{"roce half busy, paused a quarter on one priority", port("Ethernet", "100 Gb/sec (4X EDR)", 2000, busy...), full},
		{"a reset receive counter: no receive rate, no utilisation",
			port("Ethernet", "100 Gb/sec (4X EDR)", 2000, with(0, FlagReset)...),
			Figures{RateGbps: 100, XmitGbps: 10, TxPauseFraction: 0.25, RxPauseFraction: 1, PreFECBER: 1e-7, PostFECBER: 1e-9}},
		{"a held pause counter: both pause fractions unknown",
			port("Ethernet", "100 Gb/sec (4X EDR)", 2000, with(3, FlagHeld)...),
			Figures{RateGbps: 100, RcvGbps: 50, XmitGbps: 10, Utilisation: 0.5, PreFECBER: 1e-7, PostFECBER: 1e-9}},
		{"a wrapped counter keeps its delta", port("Ethernet", "100 Gb/sec (4X EDR)", 2000, with(1, FlagWrapped)...), full},
		{"reset phy bits: no BER", port("Ethernet", "100 Gb/sec (4X EDR)", 2000, with(5, FlagReset)...),
			Figures{RateGbps: 100, RcvGbps: 50, XmitGbps: 10, Utilisation: 0.5, TxPauseFraction: 0.25, RxPauseFraction: 1}},
		{"infiniband symbol BER over line bits",
			port("InfiniBand", "200 Gb/sec (4X HDR)", 1000, c(ib, "symbol_error", 2, 0)),
			Figures{RateGbps: 200, SymbolBER: 1e-11}},
		{"infiniband without a rate: received bits",
			port("InfiniBand", "", 1000, c(ib, "symbol_error", 4, 0), c(ib, "port_rcv_data", 1000, 0)),
			Figures{RcvGbps: 8e-6, SymbolBER: 4.0 / 8000}},
		{"infiniband saturated symbol_error is blind, not error-free",
			port("InfiniBand", "200 Gb/sec (4X HDR)", 1000, c(ib, "symbol_error", 0, FlagSaturated)),
			Figures{RateGbps: 200}},
		{"infiniband held symbol_error", port("InfiniBand", "200 Gb/sec (4X HDR)", 1000, c(ib, "symbol_error", 0, FlagHeld)),
			Figures{RateGbps: 200}},
		{"not a rate text", port("Ethernet", "fast", 1000, c(ib, "port_rcv_data", 125_000_000, 0)),
			Figures{RcvGbps: 1}},
		// What upstream mlx5 before 2026 and MLNX_OFED 5.x list: no
		// rx_bits_phy, so the BER is over the link rate times the interval.
		{"roce without rx_bits_phy: BER over the line rate",
			port("Ethernet", "100 Gb/sec (4X EDR)", 2000, c(eth, "rx_corrected_bits_phy", 2000, 0), c(eth, "rx_pcs_symbol_err_phy", 20, 0)),
			Figures{RateGbps: 100, PreFECBER: 1e-8, PostFECBER: 1e-10}},
		{"post-FEC BER from rx_symbol_err_phy where the PCS count is not listed",
			port("Ethernet", "100 Gb/sec (4X EDR)", 2000, c(eth, "rx_symbol_err_phy", 40, 0)),
			Figures{RateGbps: 100, PostFECBER: 2e-10}},
		{"roce without rx_bits_phy and without a rate: no BER",
			port("Ethernet", "", 2000, c(eth, "rx_corrected_bits_phy", 2000, 0)), Figures{}},
		// mlx4 without PortCountersExtended: port_rcv_data pinned at
		// 2^32-1 reads delta 0 whatever the traffic. Unknown, not idle:
		// no receive rate, no utilisation, and no symbol BER over it.
		{"a pinned 32-bit receive counter: no receive rate, no utilisation",
			port("Ethernet", "40 Gb/sec (4X QDR)", 2000, c(ib, "port_rcv_data", 0, FlagSaturated), c(ib, "port_xmit_data", 2_500_000_000, 0)),
			Figures{RateGbps: 40, XmitGbps: 10}},
		{"a pinned 32-bit receive counter on a link without a rate: no symbol BER",
			port("InfiniBand", "", 1000, c(ib, "port_rcv_data", 0, FlagSaturated), c(ib, "symbol_error", 2, 0)),
			Figures{}},
		{"a data counter pinned within the interval: its partial delta is no rate either",
			port("InfiniBand", "40 Gb/sec (4X QDR)", 1000, c(ib, "port_xmit_data", 1_000_000, FlagSaturated), c(ib, "port_rcv_data", 1_250_000_000, 0)),
			Figures{RateGbps: 40, RcvGbps: 10}},
		// IEEE 802.3x: the global pause is a pause of every priority.
		{"global pause counts as every priority",
			port("Ethernet", "100 Gb/sec (4X EDR)", 1000, c(eth, "tx_global_pause_duration", 400_000, 0), c(eth, "rx_global_pause_duration", 100_000, 0), c(eth, "tx_global_pause", 40, 0)),
			Figures{RateGbps: 100, TxPauseFraction: 0.4, RxPauseFraction: 0.1}},
		{"mlx4_en global pause names",
			port("Ethernet", "40 Gb/sec (4X QDR)", 1000, c(eth, "tx_pause_duration", 500_000, 0), c(eth, "rx_pause_duration", 0, 0)),
			Figures{RateGbps: 40, TxPauseFraction: 0.5}},
		{"a held global pause counter: pause fractions unknown",
			port("Ethernet", "100 Gb/sec (4X EDR)", 1000, c(eth, "tx_global_pause_duration", 0, FlagHeld), c(eth, "rx_global_pause_duration", 100_000, 0)),
			Figures{RateGbps: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PortFigures(tc.port); got != tc.want {
				t.Errorf("figures %+v\nwant    %+v", got, tc.want)
			}
		})
	}
}

// TestPortFiguresLAG: a RoCE LAG's sample sums its members' pause
// durations; its pause fractions are the mean member link's, so two links
// pausing 34% each read 34%, not 68%.
func TestPortFiguresLAG(t *testing.T) {
	bond := func(gauges map[string]uint64, counters ...CounterDelta) *PortSample {
		return &PortSample{Device: "mlx5_bond_0", Port: 1, Netdev: "bond0", LinkLayer: "Ethernet", Rate: "100 Gb/sec (4X EDR)",
			TimeMs: 1, IntervalMs: 1000, Counters: counters, Gauges: gauges}
	}
	dur := func(name string, us uint64) CounterDelta {
		return CounterDelta{Source: SourceEthtool, Name: name, Delta: us}
	}
	two := map[string]uint64{GaugeLAGMembers: 2, "lifespan": 10}
	for _, tc := range []struct {
		name   string
		port   *PortSample
		tx, rx float64
		links  int
	}{
		{"two links pausing 34% each", bond(two, dur("tx_prio3_pause_duration", 680_000), dur("rx_prio3_pause_duration", 200_000)), 0.34, 0.1, 2},
		{"two links pausing 90% each", bond(two, dur("tx_prio3_pause_duration", 1_800_000)), 0.9, 0, 2},
		// The mean: one link stuck, its sibling idle.
		{"one link pausing all, the other none", bond(two, dur("tx_prio3_pause_duration", 1_000_000)), 0.5, 0, 2},
		{"global pause over four links", bond(map[string]uint64{GaugeLAGMembers: 4}, dur("tx_global_pause_duration", 2_000_000)), 0.5, 0, 4},
		// A bond line without the gauge (a trace from before it) reads
		// as one link, as it did.
		{"no gauge: one link", bond(nil, dur("tx_prio3_pause_duration", 680_000)), 0.68, 0, 1},
		{"one member", bond(map[string]uint64{GaugeLAGMembers: 1}, dur("tx_prio3_pause_duration", 680_000)), 0.68, 0, 1},
		{"zero members is not a divisor", bond(map[string]uint64{GaugeLAGMembers: 0}, dur("tx_prio3_pause_duration", 680_000)), 0.68, 0, 1},
		{"a count the collector never writes is ignored", bond(map[string]uint64{GaugeLAGMembers: 1 << 40}, dur("tx_prio3_pause_duration", 680_000)), 0.68, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PauseLinks(tc.port); got != tc.links {
				t.Errorf("PauseLinks = %d, want %d", got, tc.links)
			}
			f := PortFigures(tc.port)
			if math.Abs(f.TxPauseFraction-tc.tx) > 1e-12 || math.Abs(f.RxPauseFraction-tc.rx) > 1e-12 {
				t.Errorf("pause fractions tx %v rx %v, want %v %v", f.TxPauseFraction, f.RxPauseFraction, tc.tx, tc.rx)
			}
		})
	}
}

func TestEthernetPHYBits(t *testing.T) {
	c := func(name string, delta uint64, flags Flag) CounterDelta {
		return CounterDelta{Source: SourceEthtool, Name: name, Delta: delta, Flags: flags}
	}
	for _, tc := range []struct {
		name     string
		p        PortSample
		wantBits float64
		wantSrc  PHYBits
	}{
		{"rx_bits_phy listed", PortSample{Rate: "100 Gb/sec (4X EDR)", IntervalMs: 1000, Counters: []CounterDelta{c("rx_bits_phy", 5e10, 0)}}, 5e10, PHYBitsCounted},
		{"rx_bits_phy a baseline: nothing, not the rate", PortSample{Rate: "100 Gb/sec (4X EDR)", IntervalMs: 1000, Counters: []CounterDelta{c("rx_bits_phy", 0, FlagFirst)}}, 0, PHYBitsNone},
		{"not listed: the line rate", PortSample{Rate: "25 Gb/sec (1X EDR)", State: "ACTIVE", IntervalMs: 10_000}, 25e10, PHYBitsLineRate},
		{"not listed, link down: none", PortSample{Rate: "25 Gb/sec (1X EDR)", State: "DOWN", IntervalMs: 10_000}, 0, PHYBitsNone},
		{"no interval", PortSample{Rate: "25 Gb/sec (1X EDR)"}, 0, PHYBitsNone},
	} {
		bits, src := EthernetPHYBits(&tc.p)
		if bits != tc.wantBits || src != tc.wantSrc {
			t.Errorf("%s: %v %v, want %v %v", tc.name, bits, src, tc.wantBits, tc.wantSrc)
		}
	}
}

func TestLaneCount(t *testing.T) {
	for rate, want := range map[string]int{
		"100 Gb/sec (4X EDR)": 4, "25 Gb/sec (1X EDR)": 1, "200 Gb/sec (2X HDR)": 2, "400 Gb/sec (4X NDR)": 4,
		"800 Gb/sec (8X XDR)": 8, "40 Gb/sec (4X QDR)": 4, "10 Gb/sec": 0, "": 0, "(X)": 0, "1 Gb/sec (999X)": 0,
	} {
		if got := LaneCount(rate); got != want {
			t.Errorf("LaneCount(%q) = %d, want %d", rate, got, want)
		}
	}
}
