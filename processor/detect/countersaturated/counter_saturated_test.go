package countersaturated

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/processor/internal/detecttest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestCounterSaturated(t *testing.T) {
	cases := []struct {
		name  string
		steps [][]schemas.CounterDelta // one sample every 5 s
		want  []string
		check func(t *testing.T, evs []*schemas.Event)
	}{
		{
			name: "saturated baseline opens, cleared resolves",
			steps: [][]schemas.CounterDelta{
				{detecttest.Ctr("symbol_error", 65535, 0, detecttest.First|detecttest.Sat), detecttest.Ctr("port_rcv_errors", 12, 0, detecttest.First)},
				{detecttest.Ctr("symbol_error", 65535, 0, detecttest.Sat), detecttest.Ctr("port_rcv_errors", 12, 0, 0)},
				{detecttest.Ctr("symbol_error", 0, 0, detecttest.Held), detecttest.Ctr("port_rcv_errors", 12, 0, 0)}, // glitch: still pinned
				{detecttest.Ctr("symbol_error", 3, 3, detecttest.Reset), detecttest.Ctr("port_rcv_errors", 0, 0, detecttest.Reset)},
				{detecttest.Ctr("symbol_error", 3, 0, 0)},
			},
			want: []string{"open", "resolved"},
			check: func(t *testing.T, evs []*schemas.Event) {
				open := evs[0]
				if open.Severity != "critical" || open.Layer != "physical" || open.Start != detecttest.At(0) || open.DetectedAt != detecttest.At(0) {
					t.Errorf("open %+v", open)
				}
				if !reflect.DeepEqual(open.Evidence["saturated"], []string{"symbol_error"}) {
					t.Errorf("evidence %v", open.Evidence)
				}
				if *evs[1].End != detecttest.At(15) || evs[1].Revision != 1 {
					t.Errorf("resolved %+v", evs[1])
				}
			},
		},
		{
			name: "healthy baseline, resets and ethtool values are nothing",
			steps: [][]schemas.CounterDelta{
				{detecttest.Ctr("symbol_error", 60000, 0, detecttest.First), detecttest.Eth("rx_pcs_symbol_err_phy", 65535, 0, detecttest.First)},
				{detecttest.Ctr("symbol_error", 65000, 1000, 0), detecttest.Eth("rx_pcs_symbol_err_phy", 70000, 4465, 0)},
				{detecttest.Ctr("symbol_error", 5, 5, detecttest.Reset)},
			},
		},
		{
			name: "a second counter saturating is one update",
			steps: [][]schemas.CounterDelta{
				{detecttest.Ctr("port_xmit_discards", 65000, 0, detecttest.First), detecttest.Ctr("link_downed", 255, 0, detecttest.First|detecttest.Sat)},
				{detecttest.Ctr("port_xmit_discards", 65535, 535, detecttest.Sat), detecttest.Ctr("link_downed", 255, 0, detecttest.Sat)},
				{detecttest.Ctr("port_xmit_discards", 65535, 0, detecttest.Sat), detecttest.Ctr("link_downed", 255, 0, detecttest.Sat)},
				{detecttest.Ctr("port_xmit_discards", 65535, 0, detecttest.Sat), detecttest.Ctr("link_downed", 255, 0, detecttest.Sat)},
			},
			want: []string{"open", "update"},
			check: func(t *testing.T, evs []*schemas.Event) {
				if evs[0].Severity != "warning" || evs[0].Layer != "physical" {
					t.Errorf("open %+v", evs[0])
				}
				if !reflect.DeepEqual(evs[1].Evidence["saturated"], []string{"link_downed", "port_xmit_discards"}) || evs[1].Revision != 1 {
					t.Errorf("update %+v", evs[1])
				}
			},
		},
		{
			name: "saturating within an interval starts at the previous reading",
			steps: [][]schemas.CounterDelta{
				{detecttest.Ctr("port_xmit_discards", 65000, 0, detecttest.First)},
				{detecttest.Ctr("port_xmit_discards", 65535, 535, detecttest.Sat)},
			},
			want: []string{"open"},
			check: func(t *testing.T, evs []*schemas.Event) {
				if evs[0].Start != detecttest.At(0) || evs[0].DetectedAt != detecttest.At(5) || evs[0].Layer != "link_network" {
					t.Errorf("open %+v", evs[0])
				}
			},
		},
		{
			// mlx4 on an old kernel: no PortCountersExtended, the data
			// counters stop at 2^32-1 and read as an idle link.
			name: "pinned 32-bit data counters open a warning: throughput blind",
			steps: [][]schemas.CounterDelta{
				{detecttest.Ctr("port_rcv_data", 1<<32-1, 0, detecttest.First|detecttest.Sat), detecttest.Ctr("port_xmit_data", 4_000_000_000, 0, detecttest.First), detecttest.Ctr("symbol_error", 3, 0, detecttest.First)},
				{detecttest.Ctr("port_rcv_data", 1<<32-1, 0, detecttest.Sat), detecttest.Ctr("port_xmit_data", 1<<32-1, 4*(1<<32-1-4_000_000_000), detecttest.Sat), detecttest.Ctr("symbol_error", 3, 0, 0)},
				{detecttest.Ctr("port_rcv_data", 1<<32-1, 0, detecttest.Sat), detecttest.Ctr("port_xmit_data", 1<<32-1, 0, detecttest.Sat), detecttest.Ctr("symbol_error", 3, 0, 0)},
				{detecttest.Ctr("port_rcv_data", 1000, 4000, detecttest.Reset), detecttest.Ctr("port_xmit_data", 1000, 4000, detecttest.Reset), detecttest.Ctr("symbol_error", 0, 0, detecttest.Reset)},
				{detecttest.Ctr("port_rcv_data", 2000, 4000, 0), detecttest.Ctr("port_xmit_data", 2000, 4000, 0), detecttest.Ctr("symbol_error", 0, 0, 0)},
			},
			want: []string{"open", "update", "resolved"},
			check: func(t *testing.T, evs []*schemas.Event) {
				open := evs[0]
				if open.Severity != "warning" || open.Layer != "link_network" || open.Start != detecttest.At(0) {
					t.Errorf("open %+v", open)
				}
				if !reflect.DeepEqual(open.Evidence["saturated"], []string{"port_rcv_data"}) || open.Evidence["blind_figures"] == nil ||
					!strings.Contains(open.Summary, "throughput figures are unknown, not zero") || strings.Contains(open.Summary, "new errors") {
					t.Errorf("open %s %v", open.Summary, open.Evidence)
				}
				if !reflect.DeepEqual(evs[1].Evidence["saturated"], []string{"port_rcv_data", "port_xmit_data"}) {
					t.Errorf("update %v", evs[1].Evidence)
				}
			},
		},
		{
			name: "64-bit data counters far past 2^32 are nothing",
			steps: [][]schemas.CounterDelta{
				{detecttest.Ctr("port_rcv_data", 1<<32-2, 0, detecttest.First), detecttest.Ctr("port_rcv_packets", 1<<32, 0, detecttest.First)},
				{detecttest.Ctr("port_rcv_data", 1<<33, 4*(1<<32+2), 0), detecttest.Ctr("port_rcv_packets", 1<<33, 1<<32, 0)},
				{detecttest.Ctr("port_rcv_data", 1<<34, 4*(1<<33), 0), detecttest.Ctr("port_rcv_packets", 1<<34, 1<<33, 0)},
			},
		},
		{
			// A busy InfiniBand port pins port_xmit_wait in hours: a
			// congestion figure, not an incident of its own.
			name: "pinned port_xmit_wait alone is no incident",
			steps: [][]schemas.CounterDelta{
				{detecttest.Ctr("port_xmit_wait", 1<<32-1, 0, detecttest.First|detecttest.Sat), detecttest.Ctr("symbol_error", 0, 0, detecttest.First)},
				{detecttest.Ctr("port_xmit_wait", 1<<32-1, 0, detecttest.Sat), detecttest.Ctr("symbol_error", 0, 0, 0)},
				{detecttest.Ctr("port_xmit_wait", 1<<32-1, 0, detecttest.Sat), detecttest.Ctr("symbol_error", 0, 0, 0)},
			},
		},
		{
			name: "pinned port_xmit_wait is listed with another pinned counter",
			steps: [][]schemas.CounterDelta{
				{detecttest.Ctr("port_xmit_wait", 1<<32-1, 0, detecttest.First|detecttest.Sat), detecttest.Ctr("symbol_error", 65535, 0, detecttest.First|detecttest.Sat)},
				{detecttest.Ctr("port_xmit_wait", 1<<32-1, 0, detecttest.Sat), detecttest.Ctr("symbol_error", 65535, 0, detecttest.Sat)},
			},
			want: []string{"open"},
			check: func(t *testing.T, evs []*schemas.Event) {
				if !reflect.DeepEqual(evs[0].Evidence["saturated"], []string{"symbol_error"}) ||
					!reflect.DeepEqual(evs[0].Evidence["also_pinned"], []string{"port_xmit_wait"}) {
					t.Errorf("evidence %v", evs[0].Evidence)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := detecttest.NewHarness(t, New())
			for i, cs := range c.steps {
				h.Feed(detecttest.Sample(detecttest.PortA, float64(5*i), "ACTIVE", cs...))
			}
			if !detecttest.EqualStrings(h.States(), c.want) {
				t.Fatalf("states %v, want %v", h.States(), c.want)
			}
			if c.check != nil {
				c.check(t, h.Events)
			}
		})
	}
}

func TestCounterSaturatedPinnedForHours(t *testing.T) {
	// A counter nobody clears must not produce an event per sample.
	h := detecttest.NewHarness(t, New())
	h.Feed(detecttest.Sample(detecttest.PortA, 0, "ACTIVE", detecttest.Ctr("symbol_error", 65535, 0, detecttest.First|detecttest.Sat)))
	h.Steady(detecttest.PortA, 5, 4*3600, "ACTIVE", func(float64) []schemas.CounterDelta {
		return []schemas.CounterDelta{detecttest.Ctr("symbol_error", 65535, 0, detecttest.Sat)}
	})
	if !detecttest.EqualStrings(h.States(), []string{"open"}) {
		t.Fatalf("states %v", h.States())
	}
}

// TestCounterSaturatedChurn: incidents of one port must not open and
// resolve over and over. A host whose clock lags the fleet's data time by
// more than SilentResolveAfter looked silent at every watermark step (its
// newest data time is that far behind) although it reported every
// interval: the sweep resolved its incident and its next sample opened a
// new one, 537 incidents on 8 ports in 2 minutes. And a port that does go
// silent and comes back with the same pinned counter is no new fault: its
// incident does not reopen within ReopenHold, unless the evidence is new.
func TestCounterSaturatedChurn(t *testing.T) {
	fleet := schemas.PortID{Node: "host-b", Device: "mlx5_0", Port: 1}
	pinned := func(names ...string) func(float64) []schemas.CounterDelta {
		return func(float64) []schemas.CounterDelta {
			var cs []schemas.CounterDelta
			for _, n := range names {
				cs = append(cs, detecttest.Ctr(n, 65535, 0, detecttest.Sat))
			}
			return cs
		}
	}
	healthy := func(float64) []schemas.CounterDelta {
		return []schemas.CounterDelta{detecttest.Ctr("symbol_error", 1, 0, 0)}
	}
	// step feeds the fleet's port and portA for [from, to) seconds of the
	// fleet's time, portA lagging by lag seconds and silent where mk is
	// nil.
	type span struct {
		from, to float64
		mk       func(float64) []schemas.CounterDelta
	}
	cases := []struct {
		name  string
		lag   float64
		spans []span
		want  []string
		check func(t *testing.T, evs []*schemas.Event)
	}{
		{
			name:  "a host 40 min behind the fleet reporting every interval: one incident, open",
			lag:   2400,
			spans: []span{{2400, 2400 + 2*3600, pinned("symbol_error")}},
			want:  []string{"open"},
		},
		{
			name: "a host 40 min behind that stops reporting: resolved once, as silent",
			lag:  2400,
			spans: []span{
				{2400, 3000, pinned("symbol_error")},
				{3000, 3000 + 3600, nil},
			},
			want: []string{"open", "resolved"},
			check: func(t *testing.T, evs []*schemas.Event) {
				if evs[1].Evidence["silent_since"] == nil {
					t.Errorf("resolved %v", evs[1].Evidence)
				}
			},
		},
		{
			name: "silent for 35 min, back with the same pinned counter: not reopened within the hold",
			spans: []span{
				{0, 600, pinned("symbol_error")},
				{600, 600 + 35*60, nil},
				{600 + 35*60, 600 + 35*60 + 20*60, pinned("symbol_error")},
			},
			want: []string{"open", "resolved"},
		},
		{
			name: "back with the same pinned counter after the hold: a new incident",
			spans: []span{
				{0, 600, pinned("symbol_error")},
				{600, 600 + 35*60, nil},
				{600 + 35*60, 600 + 35*60 + 40*60, pinned("symbol_error")},
			},
			want: []string{"open", "resolved", "open"},
		},
		{
			name: "back with another counter pinned: new evidence, reopened at once",
			spans: []span{
				{0, 600, pinned("symbol_error")},
				{600, 600 + 35*60, nil},
				{600 + 35*60, 600 + 35*60 + 60, pinned("symbol_error", "link_downed")},
			},
			want: []string{"open", "resolved", "open"},
			check: func(t *testing.T, evs []*schemas.Event) {
				if evs[2].DetectedAt-evs[1].DetectedAt > 6*60*1000 {
					t.Errorf("reopened at %v, resolved at %v", evs[2].DetectedAt, evs[1].DetectedAt)
				}
			},
		},
		{
			name: "cleared, pinned again within the hold: one new incident at its end, from the first pinned reading",
			spans: []span{
				{0, 600, pinned("symbol_error")},
				{600, 900, healthy},
				{900, 900 + 40*60, pinned("symbol_error")},
			},
			want: []string{"open", "resolved", "open"},
			check: func(t *testing.T, evs []*schemas.Event) {
				resolved, reopened := evs[1], evs[2]
				if reopened.Start != detecttest.At(900) || reopened.DetectedAt-resolved.DetectedAt < 30*60*1000 || reopened.ID == evs[0].ID {
					t.Errorf("resolved at %v; reopened %s starting %v detected %v", resolved.DetectedAt, reopened.ID, reopened.Start, reopened.DetectedAt)
				}
			},
		},
		{
			name: "cleared and pinned again, over and over: one incident per hold",
			spans: func() []span {
				var out []span
				for k := 0.0; k < 12; k++ { // 2 h: pinned 5 min, clear 5 min
					out = append(out, span{k * 600, k*600 + 300, pinned("symbol_error")}, span{k*600 + 300, k*600 + 600, healthy})
				}
				return out
			}(),
			// Opens at 0, 40 and 80 min: each resolution holds the next
			// open back for 30 min, to the next pinned reading after it.
			want: []string{"open", "resolved", "open", "resolved", "open", "resolved"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := detecttest.NewHarness(t, New())
			first := true
			for _, sp := range c.spans {
				for sec := sp.from; sec < sp.to; sec += 5 {
					h.Feed(detecttest.Sample(fleet, sec, "ACTIVE", detecttest.Ctr("symbol_error", 0, 0, 0)))
					if sp.mk == nil {
						continue
					}
					cs := sp.mk(sec)
					if first {
						for i := range cs {
							cs[i].Flags |= schemas.FlagFirst
						}
						first = false
					}
					h.Feed(detecttest.Sample(detecttest.PortA, sec-c.lag, "ACTIVE", cs...))
				}
			}
			var states []string
			for _, ev := range h.Events {
				if ev.Subject.Node == detecttest.PortA.Node {
					states = append(states, ev.State)
				}
			}
			if !detecttest.EqualStrings(states, c.want) {
				t.Fatalf("states %v (%d events), want %v", states[:min(len(states), 12)], len(states), c.want)
			}
			if c.check != nil {
				c.check(t, h.Events)
			}
		})
	}
}
