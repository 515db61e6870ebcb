package processor

import (
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestLinkFlap(t *testing.T) {
	cases := []struct {
		name  string
		run   func(h *harness)
		want  []string
		check func(t *testing.T, evs []*schemas.Event)
	}{
		{
			name: "baseline with old downs is no flap",
			run: func(h *harness) {
				h.feed(sample(portA, 0, "ACTIVE", ctr("link_downed", 7, 0, first), eth("link_down_events_phy", 9, 0, first)))
				h.steady(portA, 5, 600, "ACTIVE", func(float64) []schemas.CounterDelta { return quiet(7) })
			},
		},
		{
			name: "link_down_events_phy read 0 on the first reading catches up with link_downed: no flap, a later one opens",
			run: func(h *harness) {
				h.feed(sample(portA, 0, "ACTIVE", ctr("link_downed", 1, 0, first), eth("link_down_events_phy", 0, 0, first)))
				h.feed(sample(portA, 5, "ACTIVE", ctr("link_downed", 0, 0, 0), eth("link_down_events_phy", 0, 1, 0)))
				h.steady(portA, 10, 600, "ACTIVE", func(float64) []schemas.CounterDelta { return quiet(0) })
				h.feed(sample(portA, 600, "ACTIVE", ctr("link_downed", 0, 1, 0), eth("link_down_events_phy", 0, 1, 0)))
			},
			want: []string{"open"},
		},
		{
			name: "both link-down counters at 0 on the first reading: the PHY counter's rise is a flap",
			run: func(h *harness) {
				h.feed(sample(portA, 0, "ACTIVE", ctr("link_downed", 0, 0, first), eth("link_down_events_phy", 0, 0, first)))
				h.feed(sample(portA, 5, "ACTIVE", ctr("link_downed", 0, 0, 0), eth("link_down_events_phy", 0, 1, 0)))
			},
			want: []string{"open"},
		},
		{
			name: "one flap opens once and resolves after 5 min stable",
			run: func(h *harness) {
				h.feed(sample(portA, 0, "ACTIVE", ctr("link_downed", 1, 0, first)))
				h.steady(portA, 5, 60, "ACTIVE", func(float64) []schemas.CounterDelta { return quiet(1) })
				h.feed(sample(portA, 60, "ACTIVE", ctr("link_downed", 2, 1, 0), eth("link_down_events_phy", 2, 1, 0)))
				h.steady(portA, 65, 900, "ACTIVE", func(float64) []schemas.CounterDelta { return quiet(2) })
			},
			want: []string{"open", "resolved"},
			check: func(t *testing.T, evs []*schemas.Event) {
				open, res := evs[0], evs[1]
				if open.Start != at(55) || open.DetectedAt != at(60) {
					t.Errorf("start %v detected %v, want the previous sample and the flap sample", open.Start, open.DetectedAt)
				}
				if open.ID != schemas.EventID(schemas.TypeLinkFlap, portA.Subject(), at(55)) || res.ID != open.ID {
					t.Errorf("ids %q %q", open.ID, res.ID)
				}
				if open.Severity != "warning" || open.Layer != "physical" || open.End != nil || open.Scope != "port" {
					t.Errorf("open %+v", open)
				}
				if got := open.Evidence["downs"]; got != uint64(1) {
					t.Errorf("downs %v: both counters saw the same down", got)
				}
				if res.Revision != 1 || res.End == nil || *res.End != at(65) || res.DetectedAt != at(360) {
					t.Errorf("resolved rev %d end %v detected %v", res.Revision, res.End, res.DetectedAt)
				}
				if len(open.NextChecks) < 3 {
					t.Errorf("next checks %v", open.NextChecks)
				}
			},
		},
		{
			name: "three flaps turn critical with one update",
			run: func(h *harness) {
				h.feed(sample(portA, 0, "ACTIVE", ctr("link_downed", 0, 0, first)))
				for i := uint64(1); i <= 3; i++ {
					h.feed(sample(portA, float64(5*i), "ACTIVE", ctr("link_downed", i, 1, 0)))
				}
				h.steady(portA, 20, 700, "ACTIVE", func(float64) []schemas.CounterDelta { return quiet(3) })
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
			run: func(h *harness) {
				h.feed(sample(portA, 0, "ACTIVE", ctr("link_downed", 0, 0, first)))
				for i := uint64(1); i <= 120; i++ {
					h.feed(sample(portA, float64(5*i), "ACTIVE", ctr("link_downed", i, 1, 0)))
				}
				h.steady(portA, 605, 1000, "ACTIVE", func(float64) []schemas.CounterDelta { return quiet(120) })
			},
			check: func(t *testing.T, evs []*schemas.Event) {
				st := (&harness{events: evs}).states()
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
			run: func(h *harness) {
				h.feed(sample(portA, 0, "ACTIVE", ctr("link_downed", 4, 0, first)))
				h.feed(sample(portA, 5, "ACTIVE", ctr("link_downed", 0, 0, held)))   // read glitch
				h.feed(sample(portA, 10, "ACTIVE", ctr("link_downed", 4, 0, 0)))     // back
				h.feed(sample(portA, 15, "ACTIVE", ctr("link_downed", 1, 1, reset))) // driver reload
				h.feed(sample(portA, 20, "ACTIVE", ctr("link_downed", 9, 0, first))) // collector restart
				h.feed(sample(portA, 25, "ACTIVE", ctr("link_downed", 9, 0, 0)))
			},
		},
		{
			// A driver reload resets the port's counters and leaves
			// link_downed at 0 or 1: from 0 to 1 it did not fall, so only
			// the other counters' reset flags say the port was reset.
			name: "a reload that leaves link_downed at 1 is not a flap",
			run: func(h *harness) {
				h.feed(sample(portA, 0, "ACTIVE", ctr("link_downed", 0, 0, first), ctr("port_rcv_data", 9e9, 0, first)))
				h.feed(sample(portA, 5, "ACTIVE", ctr("link_downed", 0, 0, 0), ctr("port_rcv_data", 9.1e9, 1e8, 0)))
				h.feed(sample(portA, 10, "ACTIVE", ctr("link_downed", 1, 1, 0), ctr("port_rcv_data", 4e6, 4e6, reset),
					eth("link_down_events_phy", 1, 1, 0), eth("rx_bits_phy", 1e9, 1e9, reset)))
				h.steady(portA, 15, 400, "ACTIVE", func(float64) []schemas.CounterDelta { return quiet(1) })
			},
		},
		{
			name: "a flap in the interval after a reload counts",
			run: func(h *harness) {
				h.feed(sample(portA, 0, "ACTIVE", ctr("link_downed", 0, 0, first), ctr("port_rcv_data", 9e9, 0, first)))
				h.feed(sample(portA, 5, "ACTIVE", ctr("link_downed", 1, 1, 0), ctr("port_rcv_data", 4e6, 4e6, reset)))
				h.feed(sample(portA, 10, "ACTIVE", ctr("link_downed", 2, 1, 0), ctr("port_rcv_data", 8e6, 4e6, 0)))
			},
			want: []string{"open"},
		},
		{
			name: "a link that stays down keeps the incident open",
			run: func(h *harness) {
				h.feed(sample(portA, 0, "ACTIVE", ctr("link_downed", 0, 0, first)))
				h.feed(sample(portA, 5, "DOWN", ctr("link_downed", 1, 1, 0)))
				h.steady(portA, 10, 1200, "DOWN", func(float64) []schemas.CounterDelta { return quiet(1) })
				h.steady(portA, 1200, 1600, "ACTIVE", func(float64) []schemas.CounterDelta { return quiet(1) })
			},
			want: []string{"open", "resolved"},
			check: func(t *testing.T, evs []*schemas.Event) {
				if evs[1].DetectedAt != at(1495) {
					t.Errorf("resolved at %v, want 5 min after the last DOWN sample", evs[1].DetectedAt)
				}
			},
		},
		{
			name: "a silent port resolves when the watermark passes it",
			run: func(h *harness) {
				other := schemas.PortID{Node: "host-b", Device: "mlx5_0", Port: 1}
				h.feed(sample(portA, 0, "ACTIVE", ctr("link_downed", 0, 0, first)))
				h.feed(sample(portA, 5, "ACTIVE", ctr("link_downed", 1, 1, 0)))
				h.steady(other, 0, 2000, "ACTIVE", func(float64) []schemas.CounterDelta { return quiet(0) })
			},
			want: []string{"open", "resolved"},
			check: func(t *testing.T, evs []*schemas.Event) {
				if evs[1].Evidence["silent_since"] != at(5).String() || *evs[1].End != at(5) {
					t.Errorf("resolved %+v", evs[1])
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, NewLinkFlap())
			c.run(h)
			if c.want != nil || c.check == nil {
				if !equalStrings(h.states(), c.want) {
					t.Fatalf("states %v, want %v", h.states(), c.want)
				}
			}
			if c.check != nil {
				c.check(t, h.events)
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
	bondQuiet := func(v uint64) []schemas.CounterDelta { return []schemas.CounterDelta{ctr("link_downed", v, 0, 0)} }
	memberQuiet := func(v uint64) []schemas.CounterDelta {
		return []schemas.CounterDelta{eth("link_down_events_phy", v, 0, 0)}
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
			h := newHarness(t, NewLinkFlap())
			var bv, mv uint64
			for sec := 0.0; sec < 900; sec += 5 {
				flap := sec == 60
				var b, m []schemas.CounterDelta
				switch {
				case sec == 0:
					b, m = []schemas.CounterDelta{ctr("link_downed", 0, 0, first)}, []schemas.CounterDelta{eth("link_down_events_phy", 0, 0, first)}
				case flap:
					mv++
					m = []schemas.CounterDelta{eth("link_down_events_phy", mv, 1, 0)}
					b = bondQuiet(bv)
					if tc.bondFlaps {
						bv++
						b = []schemas.CounterDelta{ctr("link_downed", bv, 1, 0)}
					}
				default:
					b, m = bondQuiet(bv), memberQuiet(mv)
				}
				bs, ms := sample(bond, sec, "ACTIVE", b...), sample(member, sec, "ACTIVE", m...)
				if tc.memberFirst {
					h.feed(ms)
					h.feed(bs)
				} else {
					h.feed(bs)
					h.feed(ms)
				}
			}
			if got := h.states(); !equalStrings(got, []string{"open", "resolved"}) {
				t.Fatalf("states %v, want one incident opened and resolved", got)
			}
			open := h.events[0]
			if open.Subject.Device != tc.wantSubject {
				t.Errorf("subject %s, want %s", open.Subject.Device, tc.wantSubject)
			}
			if open.Start != at(55) {
				t.Errorf("start %v, want %v: the interval of the first down", open.Start, at(55))
			}
		})
	}
}
