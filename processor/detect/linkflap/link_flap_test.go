package linkflap

import (
	"testing"

	"github.com/rdmawatch/rdmawatch/processor/internal/detecttest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestLinkFlap(t *testing.T) {
	cases := []struct {
		name  string
		run   func(h *detecttest.Harness)
		want  []string
		check func(t *testing.T, evs []*schemas.Event)
	}{
		{
			name: "baseline with old downs is no flap",
			run: func(h *detecttest.Harness) {
				h.Feed(detecttest.Sample(detecttest.PortA, 0, "ACTIVE", detecttest.Ctr("link_downed", 7, 0, detecttest.First), detecttest.Eth("link_down_events_phy", 9, 0, detecttest.First)))
				h.Steady(detecttest.PortA, 5, 600, "ACTIVE", func(float64) []schemas.CounterDelta { return detecttest.Quiet(7) })
			},
		},
		{
			name: "link_down_events_phy read 0 on the first reading catches up with link_downed: no flap, a later one opens",
			run: func(h *detecttest.Harness) {
				h.Feed(detecttest.Sample(detecttest.PortA, 0, "ACTIVE", detecttest.Ctr("link_downed", 1, 0, detecttest.First), detecttest.Eth("link_down_events_phy", 0, 0, detecttest.First)))
				h.Feed(detecttest.Sample(detecttest.PortA, 5, "ACTIVE", detecttest.Ctr("link_downed", 0, 0, 0), detecttest.Eth("link_down_events_phy", 0, 1, 0)))
				h.Steady(detecttest.PortA, 10, 600, "ACTIVE", func(float64) []schemas.CounterDelta { return detecttest.Quiet(0) })
				h.Feed(detecttest.Sample(detecttest.PortA, 600, "ACTIVE", detecttest.Ctr("link_downed", 0, 1, 0), detecttest.Eth("link_down_events_phy", 0, 1, 0)))
			},
			want: []string{"open"},
		},
		{
			name: "both link-down counters at 0 on the first reading: the PHY counter's rise is a flap",
			run: func(h *detecttest.Harness) {
				h.Feed(detecttest.Sample(detecttest.PortA, 0, "ACTIVE", detecttest.Ctr("link_downed", 0, 0, detecttest.First), detecttest.Eth("link_down_events_phy", 0, 0, detecttest.First)))
				h.Feed(detecttest.Sample(detecttest.PortA, 5, "ACTIVE", detecttest.Ctr("link_downed", 0, 0, 0), detecttest.Eth("link_down_events_phy", 0, 1, 0)))
			},
			want: []string{"open"},
		},
		{
			name: "one flap opens once and resolves after 5 min stable",
			run: func(h *detecttest.Harness) {
				h.Feed(detecttest.Sample(detecttest.PortA, 0, "ACTIVE", detecttest.Ctr("link_downed", 1, 0, detecttest.First)))
				h.Steady(detecttest.PortA, 5, 60, "ACTIVE", func(float64) []schemas.CounterDelta { return detecttest.Quiet(1) })
				h.Feed(detecttest.Sample(detecttest.PortA, 60, "ACTIVE", detecttest.Ctr("link_downed", 2, 1, 0), detecttest.Eth("link_down_events_phy", 2, 1, 0)))
				h.Steady(detecttest.PortA, 65, 900, "ACTIVE", func(float64) []schemas.CounterDelta { return detecttest.Quiet(2) })
			},
			want: []string{"open", "resolved"},
			check: func(t *testing.T, evs []*schemas.Event) {
				open, res := evs[0], evs[1]
				if open.Start != detecttest.At(55) || open.DetectedAt != detecttest.At(60) {
					t.Errorf("start %v detected %v, want the previous sample and the flap sample", open.Start, open.DetectedAt)
				}
				if open.ID != schemas.EventID(schemas.TypeLinkFlap, detecttest.PortA.Subject(), detecttest.At(55)) || res.ID != open.ID {
					t.Errorf("ids %q %q", open.ID, res.ID)
				}
				if open.Severity != "warning" || open.Layer != "physical" || open.End != nil || open.Scope != "port" {
					t.Errorf("open %+v", open)
				}
				if got := open.Evidence["downs"]; got != uint64(1) {
					t.Errorf("downs %v: both counters saw the same down", got)
				}
				if res.Revision != 1 || res.End == nil || *res.End != detecttest.At(65) || res.DetectedAt != detecttest.At(360) {
					t.Errorf("resolved rev %d end %v detected %v", res.Revision, res.End, res.DetectedAt)
				}
				if len(open.NextChecks) < 3 {
					t.Errorf("next checks %v", open.NextChecks)
				}
			},
		},
		{
			name: "three flaps turn critical with one update",
			run: func(h *detecttest.Harness) {
				h.Feed(detecttest.Sample(detecttest.PortA, 0, "ACTIVE", detecttest.Ctr("link_downed", 0, 0, detecttest.First)))
				for i := uint64(1); i <= 3; i++ {
					h.Feed(detecttest.Sample(detecttest.PortA, float64(5*i), "ACTIVE", detecttest.Ctr("link_downed", i, 1, 0)))
				}
				h.Steady(detecttest.PortA, 20, 700, "ACTIVE", func(float64) []schemas.CounterDelta { return detecttest.Quiet(3) })
			},
			want: []string{"open", "update", "resolved"},
			check: func(t *testing.T, evs []*schemas.Event) {
				if evs[1].Severity != "critical" || evs[1].Evidence["downs"] != uint64(3) || evs[2].Severity != "critical" {
					t.Errorf("update %+v", evs[1])
				}
			},
		},
		{
			name: "flapping every sample for 10 min updates at a bounded rate",
			run: func(h *detecttest.Harness) {
				h.Feed(detecttest.Sample(detecttest.PortA, 0, "ACTIVE", detecttest.Ctr("link_downed", 0, 0, detecttest.First)))
				for i := uint64(1); i <= 120; i++ {
					h.Feed(detecttest.Sample(detecttest.PortA, float64(5*i), "ACTIVE", detecttest.Ctr("link_downed", i, 1, 0)))
				}
				h.Steady(detecttest.PortA, 605, 1000, "ACTIVE", func(float64) []schemas.CounterDelta { return detecttest.Quiet(120) })
			},
			check: func(t *testing.T, evs []*schemas.Event) {
				st := (&detecttest.Harness{Events: evs}).States()
				if st[0] != "open" || st[len(st)-1] != "resolved" || len(evs) > 13 {
					t.Errorf("%d events %v: want open, at most one update a minute, resolved", len(evs), st)
				}
				for _, ev := range evs[1 : len(evs)-1] {
					if ev.State != "update" {
						t.Errorf("state %s in the middle", ev.State)
					}
				}
			},
		},
		{
			name: "reset, glitch and restart are not flaps",
			run: func(h *detecttest.Harness) {
				h.Feed(detecttest.Sample(detecttest.PortA, 0, "ACTIVE", detecttest.Ctr("link_downed", 4, 0, detecttest.First)))
				h.Feed(detecttest.Sample(detecttest.PortA, 5, "ACTIVE", detecttest.Ctr("link_downed", 0, 0, detecttest.Held)))   // read glitch
				h.Feed(detecttest.Sample(detecttest.PortA, 10, "ACTIVE", detecttest.Ctr("link_downed", 4, 0, 0)))                // back
				h.Feed(detecttest.Sample(detecttest.PortA, 15, "ACTIVE", detecttest.Ctr("link_downed", 1, 1, detecttest.Reset))) // driver reload
				h.Feed(detecttest.Sample(detecttest.PortA, 20, "ACTIVE", detecttest.Ctr("link_downed", 9, 0, detecttest.First))) // collector restart
				h.Feed(detecttest.Sample(detecttest.PortA, 25, "ACTIVE", detecttest.Ctr("link_downed", 9, 0, 0)))
			},
		},
		{
			// A driver reload resets the port's counters and leaves
			// link_downed at 0 or 1: from 0 to 1 it did not fall, so only
			// the other counters' reset flags say the port was reset.
			name: "a reload that leaves link_downed at 1 is not a flap",
			run: func(h *detecttest.Harness) {
				h.Feed(detecttest.Sample(detecttest.PortA, 0, "ACTIVE", detecttest.Ctr("link_downed", 0, 0, detecttest.First), detecttest.Ctr("port_rcv_data", 9e9, 0, detecttest.First)))
				h.Feed(detecttest.Sample(detecttest.PortA, 5, "ACTIVE", detecttest.Ctr("link_downed", 0, 0, 0), detecttest.Ctr("port_rcv_data", 9.1e9, 1e8, 0)))
				h.Feed(detecttest.Sample(detecttest.PortA, 10, "ACTIVE", detecttest.Ctr("link_downed", 1, 1, 0), detecttest.Ctr("port_rcv_data", 4e6, 4e6, detecttest.Reset),
					detecttest.Eth("link_down_events_phy", 1, 1, 0), detecttest.Eth("rx_bits_phy", 1e9, 1e9, detecttest.Reset)))
				h.Steady(detecttest.PortA, 15, 400, "ACTIVE", func(float64) []schemas.CounterDelta { return detecttest.Quiet(1) })
			},
		},
		{
			name: "a flap in the interval after a reload counts",
			run: func(h *detecttest.Harness) {
				h.Feed(detecttest.Sample(detecttest.PortA, 0, "ACTIVE", detecttest.Ctr("link_downed", 0, 0, detecttest.First), detecttest.Ctr("port_rcv_data", 9e9, 0, detecttest.First)))
				h.Feed(detecttest.Sample(detecttest.PortA, 5, "ACTIVE", detecttest.Ctr("link_downed", 1, 1, 0), detecttest.Ctr("port_rcv_data", 4e6, 4e6, detecttest.Reset)))
				h.Feed(detecttest.Sample(detecttest.PortA, 10, "ACTIVE", detecttest.Ctr("link_downed", 2, 1, 0), detecttest.Ctr("port_rcv_data", 8e6, 4e6, 0)))
			},
			want: []string{"open"},
		},
		{
			name: "a link that stays down keeps the incident open",
			run: func(h *detecttest.Harness) {
				h.Feed(detecttest.Sample(detecttest.PortA, 0, "ACTIVE", detecttest.Ctr("link_downed", 0, 0, detecttest.First)))
				h.Feed(detecttest.Sample(detecttest.PortA, 5, "DOWN", detecttest.Ctr("link_downed", 1, 1, 0)))
				h.Steady(detecttest.PortA, 10, 1200, "DOWN", func(float64) []schemas.CounterDelta { return detecttest.Quiet(1) })
				h.Steady(detecttest.PortA, 1200, 1600, "ACTIVE", func(float64) []schemas.CounterDelta { return detecttest.Quiet(1) })
			},
			want: []string{"open", "resolved"},
			check: func(t *testing.T, evs []*schemas.Event) {
				if evs[1].DetectedAt != detecttest.At(1495) {
					t.Errorf("resolved at %v, want 5 min after the last DOWN sample", evs[1].DetectedAt)
				}
			},
		},
		{
			name: "a silent port resolves when the watermark passes it",
			run: func(h *detecttest.Harness) {
				other := schemas.PortID{Node: "host-b", Device: "mlx5_0", Port: 1}
				h.Feed(detecttest.Sample(detecttest.PortA, 0, "ACTIVE", detecttest.Ctr("link_downed", 0, 0, detecttest.First)))
				h.Feed(detecttest.Sample(detecttest.PortA, 5, "ACTIVE", detecttest.Ctr("link_downed", 1, 1, 0)))
				h.Steady(other, 0, 2000, "ACTIVE", func(float64) []schemas.CounterDelta { return detecttest.Quiet(0) })
			},
			want: []string{"open", "resolved"},
			check: func(t *testing.T, evs []*schemas.Event) {
				if evs[1].Evidence["silent_since"] != detecttest.At(5).String() || *evs[1].End != detecttest.At(5) {
					t.Errorf("resolved %+v", evs[1])
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := detecttest.NewHarness(t, New())
			c.run(h)
			if c.want != nil || c.check == nil {
				if !detecttest.EqualStrings(h.States(), c.want) {
					t.Fatalf("states %v, want %v", h.States(), c.want)
				}
			}
			if c.check != nil {
				c.check(t, h.Events)
			}
		})
	}
}

// TestLinkFlapLAGMember: a RoCE LAG member's link (its own sample, device
// <bond>.<member>) that goes down while the bond port goes down too is the
// bond's flap, one incident, whichever sample of the reading comes first; a
// member flap the LAG rode through (the bond stayed up) is the member's own
// incident, from the member's first down.
func TestLinkFlapLAGMember(t *testing.T) {
	bond := schemas.PortID{Node: "host-a", Device: "mlx5_bond_0", Port: 1}
	member := schemas.PortID{Node: "host-a", Device: schemas.BondMemberDevice("mlx5_bond_0", "ens1f0np0"), Port: 1}
	bondQuiet := func(v uint64) []schemas.CounterDelta {
		return []schemas.CounterDelta{detecttest.Ctr("link_downed", v, 0, 0)}
	}
	memberQuiet := func(v uint64) []schemas.CounterDelta {
		return []schemas.CounterDelta{detecttest.Eth("link_down_events_phy", v, 0, 0)}
	}
	type reading struct {
		sec                  float64
		bondDown, memberDown bool
	}
	for _, tc := range []struct {
		name        string
		memberFirst bool
		bondFlaps   bool
		wantSubject string
	}{
		{"bond and member go down together, bond first", false, true, bond.Device},
		{"bond and member go down together, member first", true, true, bond.Device},
		{"the member alone: the LAG rode through", false, false, member.Device},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := detecttest.NewHarness(t, New())
			var bv, mv uint64
			for sec := 0.0; sec < 900; sec += 5 {
				flap := sec == 60
				var b, m []schemas.CounterDelta
				switch {
				case sec == 0:
					b, m = []schemas.CounterDelta{detecttest.Ctr("link_downed", 0, 0, detecttest.First)}, []schemas.CounterDelta{detecttest.Eth("link_down_events_phy", 0, 0, detecttest.First)}
				case flap:
					mv++
					m = []schemas.CounterDelta{detecttest.Eth("link_down_events_phy", mv, 1, 0)}
					b = bondQuiet(bv)
					if tc.bondFlaps {
						bv++
						b = []schemas.CounterDelta{detecttest.Ctr("link_downed", bv, 1, 0)}
					}
				default:
					b, m = bondQuiet(bv), memberQuiet(mv)
				}
				bs, ms := detecttest.Sample(bond, sec, "ACTIVE", b...), detecttest.Sample(member, sec, "ACTIVE", m...)
				if tc.memberFirst {
					h.Feed(ms)
					h.Feed(bs)
				} else {
					h.Feed(bs)
					h.Feed(ms)
				}
			}
			if got := h.States(); !detecttest.EqualStrings(got, []string{"open", "resolved"}) {
				t.Fatalf("states %v, want one incident opened and resolved", got)
			}
			open := h.Events[0]
			if open.Subject.Device != tc.wantSubject {
				t.Errorf("subject %s, want %s", open.Subject.Device, tc.wantSubject)
			}
			if open.Start != detecttest.At(55) {
				t.Errorf("start %v, want %v: the interval of the first down", open.Start, detecttest.At(55))
			}
		})
	}
}
