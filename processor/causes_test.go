package processor

import (
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestCauses(t *testing.T) {
	cases := []struct {
		name      string
		run       func(h *harness)
		wantCause map[string]string // event type -> cause type (""/absent: none)
		because   string
	}{
		{
			name: "retransmissions after a flap of the same link name the flap",
			run: func(h *harness) {
				h.steady(portA, 0, 600, "ACTIVE", func(float64) []schemas.CounterDelta {
					return append(traffic(1_000_000, "out_of_sequence", 10), quiet(0)...)
				})
				h.feed(sample(portA, 600, "ACTIVE", append(traffic(1_000_000, "out_of_sequence", 10), ctr("link_downed", 1, 1, 0), eth("link_down_events_phy", 1, 1, 0))...))
				h.steady(portA, 605, 900, "ACTIVE", func(float64) []schemas.CounterDelta {
					return append(traffic(1_000_000, "out_of_sequence", 30_000), quiet(1)...)
				})
			},
			wantCause: map[string]string{schemas.TypeRetransmissions: schemas.TypeLinkFlap},
			because:   "because its link went down (1 time(s))",
		},
		{
			name: "retransmissions on another port name no cause",
			run: func(h *harness) {
				h.steady(portB, 0, 600, "ACTIVE", func(float64) []schemas.CounterDelta { return quiet(0) })
				h.feed(sample(portB, 600, "ACTIVE", ctr("link_downed", 1, 1, 0)))
				h.steady(portA, 0, 900, "ACTIVE", func(sec float64) []schemas.CounterDelta {
					if sec >= 605 {
						return traffic(1_000_000, "out_of_sequence", 30_000)
					}
					return traffic(1_000_000, "out_of_sequence", 10)
				})
			},
			wantCause: map[string]string{},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Link([]Detector{NewLinkFlap(), NewRetransmissions()})...)
			c.run(h)
			got := map[string]string{}
			for _, ev := range h.events {
				if ev.Cause != nil {
					got[ev.Type] = ev.Cause.Type
					if c.because != "" && !strings.Contains(ev.Summary, c.because) {
						t.Errorf("summary %q lacks %q", ev.Summary, c.because)
					}
					if ev.Cause.Subject != portA.Subject() || !strings.HasPrefix(ev.Cause.ID, ev.Cause.Type+"/") {
						t.Errorf("cause %+v", ev.Cause)
					}
				}
			}
			if len(got) != len(c.wantCause) {
				t.Fatalf("causes %v, want %v", got, c.wantCause)
			}
			for k, v := range c.wantCause {
				if got[k] != v {
					t.Errorf("cause of %s: %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// TestCausesLink checks each linking rule on the book directly: a storm's
// origin that starves, a BER past critical, and what does not explain.
func TestCausesLink(t *testing.T) {
	sub := portA.Subject()
	ev := func(typ string, evidence map[string]any, end *schemas.Millis) *schemas.Event {
		return &schemas.Event{ID: schemas.EventID(typ, sub, at(0)), Type: typ, State: "open", Subject: sub, DetectedAt: at(10), End: end, Evidence: evidence}
	}
	cfgEv := func(settings ...string) *schemas.Event {
		return ev(TypeConfigMismatch, map[string]any{"settings": settings, "priority": 3}, nil)
	}
	storm := &Finding{Subject: sub, Origin: &schemas.Origin{Node: sub.Node, Device: sub.Device, Port: sub.Port}}
	cases := []struct {
		name   string
		known  []*schemas.Event
		typ    string
		f      *Finding
		now    float64
		want   string
		phrase string
	}{
		{"storm from a starving origin", []*schemas.Event{ev(schemas.TypeReceiveStarvation, map[string]any{"rates_per_s": map[string]any{"out_of_buffer": 3200.0}}, nil)},
			schemas.TypePFCStorm, storm, 20, schemas.TypeReceiveStarvation, "host-a mlx5_0/1 does not drain its receive queue (out_of_buffer 3.2k/s)"},
		{"storm without starvation", nil, schemas.TypePFCStorm, storm, 20, "", ""},
		{"BER past critical", []*schemas.Event{ev(schemas.TypeBERDrift, map[string]any{"critical_crossed": true, "current_ber": 2.1e-6, "critical_ber": 1e-6}, nil)},
			schemas.TypeRetransmissions, &Finding{Subject: sub}, 20, schemas.TypeBERDrift, "its link's BER (2.1e-06) is past the critical 1e-06"},
		{"BER drifting but not yet critical explains nothing", []*schemas.Event{ev(schemas.TypeBERDrift, map[string]any{"critical_crossed": false, "current_ber": 2e-7, "critical_ber": 1e-6}, nil)},
			schemas.TypeRetransmissions, &Finding{Subject: sub}, 20, "", ""},
		{"a flap resolved long ago explains nothing", []*schemas.Event{ev(schemas.TypeLinkFlap, map[string]any{"downs": 1}, func() *schemas.Millis { m := at(5); return &m }())},
			schemas.TypeRetransmissions, &Finding{Subject: sub}, 5 + 11*60, "", ""},
		{"ECN NP off by configuration explains a silent notification point", []*schemas.Event{cfgEv(settingNP)},
			schemas.TypeCNPECNImbalance, &Finding{Subject: sub, Keys: []string{"np_disabled"}}, 20, TypeConfigMismatch,
			"its ECN notification point is off on priority 3 by configuration, unlike the rest of the fabric"},
		{"ECN RP off by configuration explains ignored CNPs", []*schemas.Event{cfgEv(settingMTU, settingRP)},
			schemas.TypeCNPECNImbalance, &Finding{Subject: sub, Keys: []string{"np_disabled", "rp_ignoring"}}, 20, TypeConfigMismatch,
			"its ECN reaction point is off on priority 3 by configuration, unlike the rest of the fabric"},
		{"RP off does not explain a silent notification point", []*schemas.Event{cfgEv(settingRP)},
			schemas.TypeCNPECNImbalance, &Finding{Subject: sub, Keys: []string{"np_disabled"}}, 20, "", ""},
		{"an MTU mismatch explains no imbalance", []*schemas.Event{cfgEv(settingMTU, settingPFC)},
			schemas.TypeCNPECNImbalance, &Finding{Subject: sub, Keys: []string{"np_disabled"}}, 20, "", ""},
		{"NP off on another port explains nothing here", []*schemas.Event{cfgEv(settingNP)},
			schemas.TypeCNPECNImbalance, &Finding{Subject: portB.Subject(), Keys: []string{"np_disabled"}}, 20, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			book := NewCauses()
			var passed int
			book.with(EmitterFunc(func(*schemas.Event) { passed++ }))
			for _, e := range c.known {
				book.Emit(e)
			}
			if passed != len(c.known) {
				t.Fatalf("%d events passed on, want %d", passed, len(c.known))
			}
			cause, why := book.Link(c.typ, c.f, at(c.now))
			if got := ""; cause != nil {
				got = cause.Type
				if got != c.want || why != c.phrase {
					t.Fatalf("cause %q %q, want %q %q", got, why, c.want, c.phrase)
				}
			} else if c.want != "" {
				t.Fatalf("no cause, want %s", c.want)
			}
		})
	}
}
