package sim

import (
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// rateOver is a counter's increase per second between the last reading at
// or before from (the first reading if none) and the last at or before to.
func rateOver(t *testing.T, ls []traceLine, get func(traceLine) uint64, from, to time.Time) float64 {
	t.Helper()
	a, b := &ls[0], (*traceLine)(nil)
	for i := range ls {
		if !ls[i].time.After(from) {
			a = &ls[i]
		}
		if !ls[i].time.After(to) {
			b = &ls[i]
		}
	}
	if b == nil || !b.time.After(a.time) {
		t.Fatalf("no readings around %s..%s", from, to)
	}
	return float64(get(*b)-get(*a)) / b.time.Sub(a.time).Seconds()
}

func TestBERDrift(t *testing.T) {
	c := DefaultConfig()
	c.Hosts, c.IBHosts, c.Duration = 4, 2, 20*time.Minute
	from := c.Start.Add(2 * time.Minute)
	critical := from.Add(10 * time.Minute)
	tests := []struct {
		port        PortRef
		errs, bits  func(traceLine) uint64
		criticalBER float64
	}{
		{PortRef{"gpu-001", "mlx5_0", 1},
			func(l traceLine) uint64 { return l.Ethtool["rx_err_lane_2_phy"] },
			func(l traceLine) uint64 { return l.Ethtool["rx_bits_phy"] }, schemas.CriticalPreFECBER},
		{PortRef{"gpu-003", "mlx5_0", 1},
			func(l traceLine) uint64 { return l.Counters["symbol_error"] },
			// Symbol BER is over the bits the line carries at its rate (200G).
			func(l traceLine) uint64 { return uint64(l.time.UnixMilli()) * 200e6 }, schemas.CriticalSymbolBER},
	}
	for _, tt := range tests {
		t.Run(tt.port.String(), func(t *testing.T) {
			c.Faults = []Fault{BERDrift{Port: tt.port, From: from, Lane: 2}}
			lines, labels, _ := generate(t, c)
			if len(labels) != 1 || labels[0].Type != schemas.TypeBERDrift || labels[0].Start.Time() != from ||
				labels[0].CriticalAt == nil || labels[0].CriticalAt.Time() != critical || labels[0].End != nil {
				t.Fatalf("labels = %+v", labels)
			}
			ls := byPort(lines)[tt.port]
			ber := func(a, b time.Time) float64 {
				return rateOver(t, ls, tt.errs, a, b) / rateOver(t, ls, tt.bits, a, b)
			}
			before := ber(c.Start, from)
			at := ber(critical.Add(-time.Minute), critical.Add(time.Minute))
			if before > tt.criticalBER/100 || at < tt.criticalBER/3 || at > tt.criticalBER*3 {
				t.Errorf("BER before %.2g, around critical_at %.2g, want about %.0g", before, at, tt.criticalBER)
			}
		})
	}
}

func TestPFCStorm(t *testing.T) {
	c := DefaultConfig()
	c.Hosts, c.HostsPerLeaf = 6, 3
	origin := PortRef{"gpu-002", "mlx5_0", 1}
	from := c.Start.Add(3*time.Minute + 500*time.Millisecond)
	c.Faults = []Fault{PFCStorm{Port: origin, From: from, Duration: 2 * time.Minute}}
	lines, labels, _ := generate(t, c)
	if len(labels) != 1 {
		t.Fatalf("labels = %+v", labels)
	}
	l := labels[0]
	if l.Type != schemas.TypePFCStorm || l.Subject != portSubject(origin) || l.Start.Time() != from || l.End == nil || l.End.Time() != from.Add(2*time.Minute) {
		t.Fatalf("label = %+v", l)
	}
	// gpu-001 and gpu-003 share leaf-01 with the origin; gpu-004.. do not.
	ports := byPort(lines)
	want := map[string]bool{"gpu-001": true, "gpu-003": true}
	if len(l.Affected) != len(want) {
		t.Fatalf("affected = %+v", l.Affected)
	}
	for _, a := range l.Affected {
		if !want[a.Node] {
			t.Errorf("%s affected", a.Node)
		}
		first := time.Time{}
		for _, ln := range ports[PortRef{a.Node, "mlx5_0", 1}] {
			if ln.time.After(from.Add(3 * time.Second)) {
				first = ln.time
				break
			}
		}
		if a.FirstSeen.Time() != first {
			t.Errorf("%s first_seen %s, first reading in the storm %s", a.Node, a.FirstSeen, first)
		}
	}
	mid := from.Add(time.Minute)
	pauseFraction := func(r PortRef, key string) float64 {
		return rateOver(t, ports[r], func(l traceLine) uint64 { return l.Ethtool[key] }, mid.Add(-30*time.Second), mid.Add(30*time.Second)) / 1e6
	}
	if f := pauseFraction(origin, "tx_prio3_pause_duration"); f < 0.9 || f > 1 {
		t.Errorf("origin pauses %.2f of the time", f)
	}
	if f := pauseFraction(PortRef{"gpu-001", "mlx5_1", 1}, "rx_prio3_pause_duration"); f < 0.4 || f > 0.6 {
		t.Errorf("affected port paused %.2f of the time", f)
	}
	if f := pauseFraction(PortRef{"gpu-005", "mlx5_0", 1}, "rx_prio3_pause_duration"); f > 0.01 {
		t.Errorf("port on another leaf paused %.2f of the time", f)
	}
	last := ports[origin][len(ports[origin])-1]
	if last.Ethtool["tx_pause_storm_warning_events"] != 1 || last.Ethtool["tx_pause_storm_error_events"] != 1 {
		t.Errorf("storm events %d/%d", last.Ethtool["tx_pause_storm_warning_events"], last.Ethtool["tx_pause_storm_error_events"])
	}
}

func TestCNPECNImbalance(t *testing.T) {
	c := DefaultConfig()
	c.Hosts = 2
	port := PortRef{"gpu-002", "mlx5_1", 1}
	from := c.Start.Add(4 * time.Minute)
	c.Faults = []Fault{CNPECNImbalance{Port: port, From: from}}
	lines, labels, _ := generate(t, c)
	if len(labels) != 1 || labels[0].Type != schemas.TypeCNPECNImbalance || labels[0].Start.Time() != from || labels[0].End != nil {
		t.Fatalf("labels = %+v", labels)
	}
	ls := byPort(lines)[port]
	ecn := func(l traceLine) uint64 { return l.HWCounters["np_ecn_marked_roce_packets"] }
	cnp := func(l traceLine) uint64 { return l.HWCounters["np_cnp_sent"] }
	during := [2]time.Time{from.Add(30 * time.Second), c.Start.Add(c.Duration)}
	if r := rateOver(t, ls, cnp, during[0], during[1]); r != 0 {
		t.Errorf("np_cnp_sent climbs %.1f/s during the imbalance", r)
	}
	if r := rateOver(t, ls, ecn, during[0], during[1]); r < 10000 {
		t.Errorf("np_ecn_marked_roce_packets climbs only %.1f/s", r)
	}
	if r := rateOver(t, ls, cnp, c.Start, from); r == 0 {
		t.Error("no CNPs before the imbalance")
	}
}

func TestReceiveStarvationAndItsStorm(t *testing.T) {
	c := DefaultConfig()
	c.Hosts, c.IBHosts, c.Duration = 4, 2, 15*time.Minute
	port := PortRef{"gpu-001", "mlx5_0", 1}
	from := c.Start.Add(2*time.Minute + 300*time.Millisecond)
	stormAt := from.Add(90 * time.Second)
	c.Faults = []Fault{ReceiveStarvation{Port: port, From: from, Duration: 6 * time.Minute, PerSecond: 2000,
		StormAfter: 90 * time.Second, Spread: 300 * time.Millisecond}}
	lines, labels, _ := generate(t, c)
	if len(labels) != 2 {
		t.Fatalf("labels = %+v, want the starvation and its storm", labels)
	}
	starve, storm := labels[0], labels[1]
	if starve.Type != schemas.TypeReceiveStarvation || starve.Start.Time() != from || starve.End == nil ||
		starve.End.Time() != from.Add(6*time.Minute) || starve.Subject != portSubject(port) || starve.Cause != nil {
		t.Errorf("starvation label %+v", starve)
	}
	if storm.Type != schemas.TypePFCStorm || storm.Start.Time() != stormAt || storm.End == nil || storm.End.Time() != from.Add(6*time.Minute) ||
		storm.Cause == nil || storm.Cause.Type != schemas.TypeReceiveStarvation || storm.Cause.Subject != portSubject(port) {
		t.Errorf("storm label %+v (cause %+v)", storm, storm.Cause)
	}
	ls := byPort(lines)[port]
	oob := func(l traceLine) uint64 { return l.HWCounters["out_of_buffer"] }
	txPause := func(l traceLine) uint64 { return l.Ethtool["tx_prio3_pause_duration"] }
	if r := rateOver(t, ls, oob, c.Start, from); r > 50 {
		t.Errorf("out_of_buffer %.0f/s before the starvation", r)
	}
	if r := rateOver(t, ls, oob, from.Add(10*time.Second), stormAt.Add(-10*time.Second)); r < 1000 {
		t.Errorf("out_of_buffer %.0f/s while starving, want ~2000", r)
	}
	if r := rateOver(t, ls, txPause, from.Add(10*time.Second), stormAt.Add(-10*time.Second)); r > 1e4 {
		// A healthy port pauses a few µs a second; a storm most of it.
		t.Errorf("the port pauses its link (%.0f µs/s) before the storm", r)
	}
	if r := rateOver(t, ls, txPause, stormAt.Add(10*time.Second), stormAt.Add(2*time.Minute)); r < 5e5 {
		t.Errorf("the port pauses %.0f µs/s during the storm, want most of each second", r)
	}
	if _, err := (ReceiveStarvation{Port: port, From: from, Duration: time.Minute, StormAfter: 2 * time.Minute}).Start(newLayout(&c)); err == nil {
		t.Error("a storm after the starvation ends: no error")
	}
}

// A receiver starving by RNR NAKs drops few packets and its senders count
// the NAKs; one that does not drain its NIC discards at the port and pauses
// a little; an unknown way or RNR without senders is an error.
func TestReceiveStarvationVia(t *testing.T) {
	c := DefaultConfig()
	c.Hosts, c.IBHosts, c.Duration = 6, 0, 12*time.Minute
	rx, tx := PortRef{"gpu-001", "mlx5_0", 1}, PortRef{"gpu-003", "mlx5_0", 1}
	disc := PortRef{"gpu-005", "mlx5_1", 1}
	from := c.Start.Add(2*time.Minute + 300*time.Millisecond)
	c.Faults = []Fault{
		ReceiveStarvation{Port: rx, Via: StarveRNR, Senders: []PortRef{tx}, From: from, Duration: 5 * time.Minute, PerSecond: 200},
		ReceiveStarvation{Port: disc, Via: StarveDiscards, From: from, Duration: 5 * time.Minute},
	}
	lines, labels, _ := generate(t, c)
	if len(labels) != 2 || labels[0].Subject != portSubject(rx) && labels[1].Subject != portSubject(rx) {
		t.Fatalf("labels = %+v, want one per starving receiver", labels)
	}
	ports := byPort(lines)
	hw := func(name string) func(traceLine) uint64 {
		return func(l traceLine) uint64 { return l.HWCounters[name] }
	}
	et := func(name string) func(traceLine) uint64 {
		return func(l traceLine) uint64 { return l.Ethtool[name] }
	}
	in, before := [2]time.Time{from.Add(10 * time.Second), from.Add(4 * time.Minute)}, [2]time.Time{c.Start, from}
	for _, tc := range []struct {
		what     string
		port     PortRef
		f        func(traceLine) uint64
		span     [2]time.Time
		min, max float64
	}{
		{"receiver out_of_buffer", rx, hw("out_of_buffer"), in, 120, 300},
		{"receiver out_of_buffer before", rx, hw("out_of_buffer"), before, 0, 20},
		{"sender rnr_nak_retry_err", tx, hw("rnr_nak_retry_err"), in, 120, 300},
		{"sender rnr_nak_retry_err before", tx, hw("rnr_nak_retry_err"), before, 0, 1},
		{"discarding rx_discards_phy", disc, et("rx_discards_phy"), in, 500, 1200},
		{"discarding out_of_buffer", disc, hw("out_of_buffer"), in, 0, 20},
		{"discarding tx pause µs/s", disc, et("tx_prio3_pause_duration"), in, 8e4, 3e5},
	} {
		if r := rateOver(t, ports[tc.port], tc.f, tc.span[0], tc.span[1]); r < tc.min || r > tc.max {
			t.Errorf("%s: %.0f/s, want %.0f..%.0f", tc.what, r, tc.min, tc.max)
		}
	}
	l := newLayout(&c)
	for _, bad := range []ReceiveStarvation{
		{Port: rx, Via: "smoke", From: from, Duration: time.Minute},
		{Port: rx, Via: StarveRNR, From: from, Duration: time.Minute},
		{Port: rx, Via: StarveRNR, Senders: []PortRef{rx}, From: from, Duration: time.Minute},
	} {
		if _, err := bad.Start(l); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
