package processor_test

import (
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/processor/detect/completionerrors"
	"github.com/rdmawatch/rdmawatch/processor/detect/linkflap"
	"github.com/rdmawatch/rdmawatch/processor/detect/receivestarvation"
	"github.com/rdmawatch/rdmawatch/processor/detect/retransmissions"
	"github.com/rdmawatch/rdmawatch/processor/internal/detecttest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestCauses(t *testing.T) {
	cases := []struct {
		name      string
		run       func(h *detecttest.Harness)
		wantCause map[string]string // event type -> cause type (""/absent: none)
		because   string
	}{
		{
			name: "retransmissions after a flap of the same link name the flap",
			run: func(h *detecttest.Harness) {
				h.Steady(detecttest.PortA, 0, 600, "ACTIVE", func(float64) []schemas.CounterDelta {
					return append(detecttest.Traffic(1_000_000, "out_of_sequence", 10), detecttest.Quiet(0)...)
				})
				h.Feed(detecttest.Sample(detecttest.PortA, 600, "ACTIVE", append(detecttest.Traffic(1_000_000, "out_of_sequence", 10), detecttest.Ctr("link_downed", 1, 1, 0), detecttest.Eth("link_down_events_phy", 1, 1, 0))...))
				h.Steady(detecttest.PortA, 605, 900, "ACTIVE", func(float64) []schemas.CounterDelta {
					return append(detecttest.Traffic(1_000_000, "out_of_sequence", 30_000), detecttest.Quiet(1)...)
				})
			},
			wantCause: map[string]string{schemas.TypeRetransmissions: schemas.TypeLinkFlap},
			because:   "because its link went down (1 time(s))",
		},
		{
			name: "retransmissions on another port name no cause",
			run: func(h *detecttest.Harness) {
				h.Steady(detecttest.PortB, 0, 600, "ACTIVE", func(float64) []schemas.CounterDelta { return detecttest.Quiet(0) })
				h.Feed(detecttest.Sample(detecttest.PortB, 600, "ACTIVE", detecttest.Ctr("link_downed", 1, 1, 0)))
				h.Steady(detecttest.PortA, 0, 900, "ACTIVE", func(sec float64) []schemas.CounterDelta {
					if sec >= 605 {
						return detecttest.Traffic(1_000_000, "out_of_sequence", 30_000)
					}
					return detecttest.Traffic(1_000_000, "out_of_sequence", 10)
				})
			},
			wantCause: map[string]string{},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := detecttest.NewHarness(t, processor.Link([]processor.Detector{linkflap.New(), retransmissions.New()})...)
			c.run(h)
			got := map[string]string{}
			for _, ev := range h.Events {
				if ev.Cause != nil {
					got[ev.Type] = ev.Cause.Type
					if c.because != "" && !strings.Contains(ev.Summary, c.because) {
						t.Errorf("summary %q lacks %q", ev.Summary, c.because)
					}
					if ev.Cause.Subject != detecttest.PortA.Subject() || !strings.HasPrefix(ev.Cause.ID, ev.Cause.Type+"/") {
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
			req: detecttest.PortB, fail: []any{"req_cqe_error", 250, "rnr_nak_retry_err", 400}, wantCause: detecttest.PortA},
		{name: "mlx4 requester: sq_num_rree with sq_num_rnr names the starving receiver",
			req: mlx4Req, fail: []any{"sq_num_rree", 250, "sq_num_rnr", 400, "sq_num_wrfe", 300}, wantCause: detecttest.PortA},
		{name: "an unmonitored receiver: the requester's own secondary-only starvation is the root",
			req: detecttest.PortB, fail: []any{"req_cqe_error", 250, "rnr_nak_retry_err", 400}, noReceiver: true, wantCause: detecttest.PortB},
		{name: "completion errors without RNR evidence are an application's own",
			req: detecttest.PortB, fail: []any{"req_cqe_error", 250, "req_remote_access_errors", 250}},
		{name: "of two starving receivers the back-to-back peer is the one",
			topo: `{"fabric":"f","switches":[{"name":"leaf-1","tier":"leaf"}],"links":[
				{"a":"host-b/mlx5_0/1","b":"host-d/mlx5_0/1"},{"a":"host-a/mlx5_0/1","b":"leaf-1/p1"}]}`,
			req: detecttest.PortB, fail: []any{"req_cqe_error", 250, "rnr_nak_retry_err", 400}, second: &other, wantCause: other},
		{name: "a starving receiver out of the requester's reach is not the cause",
			topo: `{"fabric":"f","switches":[{"name":"leaf-1","tier":"leaf"},{"name":"leaf-2","tier":"leaf"}],"links":[
				{"a":"host-b/mlx5_0/1","b":"leaf-1/p1"},{"a":"host-a/mlx5_0/1","b":"leaf-2/p1"}]}`,
			req: detecttest.PortB, fail: []any{"req_cqe_error", 250, "rnr_nak_retry_err", 400}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := detecttest.NewHarness(t)
			if c.topo != "" {
				topo, err := schemas.ParseTopology(strings.NewReader(c.topo))
				if err != nil {
					t.Fatal(err)
				}
				h.Topo = topo
			}
			h.Dets = processor.Link([]processor.Detector{receivestarvation.New(), completionerrors.New()})
			for _, d := range h.Dets {
				if err := d.(processor.Initializer).Init(h); err != nil {
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
					h.Feed(detecttest.Sample(detecttest.PortA, sec, "ACTIVE", detecttest.Traffic(1_000_000, "out_of_buffer", oob)...))
				}
				if c.second != nil {
					h.Feed(detecttest.Sample(*c.second, sec+0.5, "ACTIVE", detecttest.Traffic(1_000_000, "out_of_buffer", oob/4)...))
				}
				h.Feed(detecttest.Sample(c.req, sec+1, "ACTIVE", detecttest.Traffic(1_000_000, kv...)...))
			}
			roots := map[string]string{} // incident id -> type, for incidents never naming a cause
			caused := map[string]*schemas.Cause{}
			for _, ev := range h.Events {
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
			for _, ev := range h.Events {
				if ev.Type == schemas.TypeCompletionErrors {
					ce = ev
				}
			}
			if ce == nil {
				for _, ev := range h.Events {
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
			for _, ev := range h.Events {
				_, why, _ := strings.Cut(ev.Summary, ", because ")
				if ev.ID == ce.ID && ev.Cause != nil && !strings.Contains(why, c.wantCause.Node+" ") {
					t.Errorf("summary %q does not name the receiver", ev.Summary)
				}
			}
		})
	}
}
