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
		{"ECN RP off by configuration explains ignored CNPs", []*schemas.Event{cfgEv(settingMTU, SettingECNRP)},
			schemas.TypeCNPECNImbalance, &Finding{Subject: sub, Keys: []string{"np_disabled", "rp_ignoring"}}, 20, TypeConfigMismatch,
			"its ECN reaction point is off on priority 3 by configuration, unlike the rest of the fabric"},
		{"RP off does not explain a silent notification point", []*schemas.Event{cfgEv(SettingECNRP)},
			schemas.TypeCNPECNImbalance, &Finding{Subject: sub, Keys: []string{"np_disabled"}}, 20, "", ""},
		{"an MTU mismatch explains no imbalance", []*schemas.Event{cfgEv(settingMTU, settingPFC)},
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

// TestCausesRNR: one RNR failure seen by two detectors. The receiver that
// does not post buffers is the receive_starvation; the requester whose
// completions fail with RNR NAKs names it as cause, and only one of the two
// incidents is a root.
func TestCausesRNR(t *testing.T) {
	mlx4Req := schemas.PortID{Node: "host-b", Device: "mlx4_0", Port: 1}
	other := schemas.PortID{Node: "host-d", Device: "mlx5_0", Port: 1}
	cases := []struct {
		name string
		topo string // topology JSON, "" for none
		req  schemas.PortID
		// requester's counters per 5 s while the receiver starves
		fail []any
		// a second receiver that starves at the same time (nil: none)
		second *schemas.PortID
		// noReceiver: the starving receiver is not monitored
		noReceiver bool
		wantCause  schemas.PortID // zero: no cause
	}{
		{name: "mlx5 requester: req_cqe_error with rnr_nak_retry_err names the starving receiver",
			req: portB, fail: []any{"req_cqe_error", 250, "rnr_nak_retry_err", 400}, wantCause: portA},
		{name: "mlx4 requester: sq_num_rree with sq_num_rnr names the starving receiver",
			req: mlx4Req, fail: []any{"sq_num_rree", 250, "sq_num_rnr", 400, "sq_num_wrfe", 300}, wantCause: portA},
		{name: "an unmonitored receiver: the requester's own secondary-only starvation is the root",
			req: portB, fail: []any{"req_cqe_error", 250, "rnr_nak_retry_err", 400}, noReceiver: true, wantCause: portB},
		{name: "completion errors without RNR evidence are an application's own",
			req: portB, fail: []any{"req_cqe_error", 250, "req_remote_access_errors", 250}},
		{name: "of two starving receivers the back-to-back peer is the one",
			topo: `{"fabric":"f","switches":[{"name":"leaf-1","tier":"leaf"}],"links":[
				{"a":"host-b/mlx5_0/1","b":"host-d/mlx5_0/1"},{"a":"host-a/mlx5_0/1","b":"leaf-1/p1"}]}`,
			req: portB, fail: []any{"req_cqe_error", 250, "rnr_nak_retry_err", 400}, second: &other, wantCause: other},
		{name: "a starving receiver out of the requester's reach is not the cause",
			topo: `{"fabric":"f","switches":[{"name":"leaf-1","tier":"leaf"},{"name":"leaf-2","tier":"leaf"}],"links":[
				{"a":"host-b/mlx5_0/1","b":"leaf-1/p1"},{"a":"host-a/mlx5_0/1","b":"leaf-2/p1"}]}`,
			req: portB, fail: []any{"req_cqe_error", 250, "rnr_nak_retry_err", 400}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			if c.topo != "" {
				topo, err := schemas.ParseTopology(strings.NewReader(c.topo))
				if err != nil {
					t.Fatal(err)
				}
				h.topo = topo
			}
			h.dets = Link([]Detector{NewReceiveStarvation(), NewCompletionErrors()})
			for _, d := range h.dets {
				if err := d.(Initializer).Init(h); err != nil {
					t.Fatal(err)
				}
			}
			for sec := 0.0; sec < 1500; sec += 5 {
				fault := sec >= 600 && sec < 900
				oob, kv := 1, []any{}
				if fault {
					oob, kv = 16_000, c.fail
				}
				if !c.noReceiver {
					h.feed(sample(portA, sec, "ACTIVE", traffic(1_000_000, "out_of_buffer", oob)...))
				}
				if c.second != nil {
					h.feed(sample(*c.second, sec+0.5, "ACTIVE", traffic(1_000_000, "out_of_buffer", oob/4)...))
				}
				h.feed(sample(c.req, sec+1, "ACTIVE", traffic(1_000_000, kv...)...))
			}
			roots := map[string]string{} // incident id -> type, for incidents never naming a cause
			caused := map[string]*schemas.Cause{}
			for _, ev := range h.events {
				if ev.Cause != nil {
					caused[ev.ID] = ev.Cause
				} else if _, ok := caused[ev.ID]; !ok {
					roots[ev.ID] = ev.Type
				}
			}
			for id := range caused {
				delete(roots, id)
			}
			var ce *schemas.Event
			for _, ev := range h.events {
				if ev.Type == schemas.TypeCompletionErrors {
					ce = ev
				}
			}
			if ce == nil {
				for _, ev := range h.events {
					t.Logf("%s %s %s %s", ev.Type, ev.State, ev.Subject, ev.Summary)
				}
				t.Fatal("no completion_errors incident")
			}
			cause := caused[ce.ID]
			if c.wantCause == (schemas.PortID{}) {
				if cause != nil {
					t.Fatalf("cause %+v, want none", cause)
				}
				return
			}
			if cause == nil || cause.Type != schemas.TypeReceiveStarvation || cause.Subject != c.wantCause.Subject() {
				t.Fatalf("cause %+v, want receive_starvation of %s", cause, c.wantCause)
			}
			if _, ok := roots[cause.ID]; !ok {
				t.Errorf("cause %s is not an incident of its own (roots %v)", cause.ID, roots)
			}
			if c.second == nil && len(roots) != 1 {
				t.Errorf("roots %v: one fault, want one root incident", roots)
			}
			for _, ev := range h.events {
				_, why, _ := strings.Cut(ev.Summary, ", because ")
				if ev.ID == ce.ID && ev.Cause != nil && !strings.Contains(why, c.wantCause.Node+" ") {
					t.Errorf("summary %q does not name the receiver", ev.Summary)
				}
			}
		})
	}
}
