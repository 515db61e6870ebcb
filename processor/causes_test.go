package processor

import (
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

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
		{"storm from an mlx4 origin that sends RNR NAKs", []*schemas.Event{ev(schemas.TypeReceiveStarvation, map[string]any{"rates_per_s": map[string]any{"rq_num_rnr": 500.0, "rx_discards_phy": 20.0}}, nil)},
			schemas.TypePFCStorm, storm, 20, schemas.TypeReceiveStarvation, "host-a mlx5_0/1 does not drain its receive queue (rq_num_rnr 500/s)"},
		{"storm without starvation", nil, schemas.TypePFCStorm, storm, 20, "", ""},
		{"RNR completion errors and a starvation that ended before they began", []*schemas.Event{ev(schemas.TypeReceiveStarvation, map[string]any{"rates_per_s": map[string]any{"out_of_buffer": 900.0}}, func() *schemas.Millis { m := at(15); return &m }())},
			schemas.TypeCompletionErrors, &Finding{Subject: portB.Subject(), Onset: at(60), Evidence: map[string]any{"rates_per_s": map[string]any{"rnr_nak_retry_err": 40.0}}}, 70, "", ""},
		{"RNR completion errors during a starvation", []*schemas.Event{ev(schemas.TypeReceiveStarvation, map[string]any{"rates_per_s": map[string]any{"out_of_buffer": 900.0}}, nil)},
			schemas.TypeCompletionErrors, &Finding{Subject: portB.Subject(), Onset: at(60), Evidence: map[string]any{"counts_since_onset": map[string]any{"sq_num_rree": uint64(12)}}}, 70,
			schemas.TypeReceiveStarvation, "host-a mlx5_0/1 does not drain its receive queue (out_of_buffer 900/s)"},
		{"BER past critical", []*schemas.Event{ev(schemas.TypeBERDrift, map[string]any{"critical_crossed": true, "current_ber": 2.1e-6, "critical_ber": 1e-6}, nil)},
			schemas.TypeRetransmissions, &Finding{Subject: sub}, 20, schemas.TypeBERDrift, "its link's BER (2.1e-06) is past the critical 1e-06"},
		{"BER drifting but not yet critical explains nothing", []*schemas.Event{ev(schemas.TypeBERDrift, map[string]any{"critical_crossed": false, "current_ber": 2e-7, "critical_ber": 1e-6}, nil)},
			schemas.TypeRetransmissions, &Finding{Subject: sub}, 20, "", ""},
		{"a flap resolved long ago explains nothing", []*schemas.Event{ev(schemas.TypeLinkFlap, map[string]any{"downs": 1}, func() *schemas.Millis { m := at(5); return &m }())},
			schemas.TypeRetransmissions, &Finding{Subject: sub}, 5 + 11*60, "", ""},
		{"ECN NP off by configuration explains a silent notification point", []*schemas.Event{cfgEv(SettingECNNP)},
			schemas.TypeCNPECNImbalance, &Finding{Subject: sub, Keys: []string{"np_disabled"}}, 20, TypeConfigMismatch,
			"its ECN notification point is off on priority 3 by configuration, unlike the rest of the fabric"},
		{"ECN RP off by configuration explains ignored CNPs", []*schemas.Event{cfgEv("mtu", SettingECNRP)},
			schemas.TypeCNPECNImbalance, &Finding{Subject: sub, Keys: []string{"np_disabled", "rp_ignoring"}}, 20, TypeConfigMismatch,
			"its ECN reaction point is off on priority 3 by configuration, unlike the rest of the fabric"},
		{"RP off does not explain a silent notification point", []*schemas.Event{cfgEv(SettingECNRP)},
			schemas.TypeCNPECNImbalance, &Finding{Subject: sub, Keys: []string{"np_disabled"}}, 20, "", ""},
		{"an MTU mismatch explains no imbalance", []*schemas.Event{cfgEv("mtu", "pfc_enabled")},
			schemas.TypeCNPECNImbalance, &Finding{Subject: sub, Keys: []string{"np_disabled"}}, 20, "", ""},
		{"NP off on another port explains nothing here", []*schemas.Event{cfgEv(SettingECNNP)},
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
