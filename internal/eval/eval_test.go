package eval

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

const (
	t0 = schemas.Millis(1773446400000) // 2026-03-14T00:00:00Z
	s  = schemas.Millis(1000)
)

func ptr(m schemas.Millis) *schemas.Millis { return &m }

var portA = schemas.Subject{Node: "a", Device: "mlx5_0", Port: 1}

func ev(id, typ, state string, subj schemas.Subject, start, detected schemas.Millis, end *schemas.Millis) schemas.Event {
	scope := schemas.ScopePort
	if subj.Node == "" {
		scope = schemas.ScopeFabric
	}
	return schemas.Event{ID: id, Type: typ, State: state, Scope: scope, Subject: subj, Start: start, DetectedAt: detected, End: end}
}

func TestEvaluate(t *testing.T) {
	flapLabel := schemas.Label{Type: schemas.TypeLinkFlap, Start: t0 + 60*s, End: ptr(t0 + 64*s), Subject: portA}
	tests := []struct {
		name                       string
		events                     []schemas.Event
		labels                     []schemas.Label
		precision, recall          float64
		fragments, unmatched, miss int
	}{
		{"exact match", []schemas.Event{
			ev("1", schemas.TypeLinkFlap, "open", portA, t0+55*s, t0+65*s, nil),
			ev("1", schemas.TypeLinkFlap, "resolved", portA, t0+55*s, t0+400*s, ptr(t0+70*s)),
		}, []schemas.Label{flapLabel}, 1, 1, 0, 0, 0},
		{"fragment is false", []schemas.Event{
			ev("1", schemas.TypeLinkFlap, "open", portA, t0+55*s, t0+65*s, nil),
			ev("1", schemas.TypeLinkFlap, "resolved", portA, t0+55*s, t0+66*s, ptr(t0+66*s)),
			ev("2", schemas.TypeLinkFlap, "open", portA, t0+70*s, t0+75*s, nil),
		}, []schemas.Label{flapLabel}, 0.5, 1, 1, 0, 0},
		{"too late is unmatched", []schemas.Event{
			ev("1", schemas.TypeLinkFlap, "open", portA, t0+200*s, t0+205*s, nil),
		}, []schemas.Label{flapLabel}, 0, 0, 0, 1, 1},
		{"within 120 s after end matches", []schemas.Event{
			ev("1", schemas.TypeLinkFlap, "open", portA, t0+180*s, t0+185*s, nil),
		}, []schemas.Label{flapLabel}, 1, 1, 0, 0, 0},
		{"two intervals before start matches", []schemas.Event{
			ev("1", schemas.TypeLinkFlap, "open", portA, t0+51*s, t0+52*s, ptr(t0+51*s)),
		}, []schemas.Label{flapLabel}, 1, 1, 0, 0, 0},
		{"other port does not match", []schemas.Event{
			ev("1", schemas.TypeLinkFlap, "open", schemas.Subject{Node: "a", Device: "mlx5_0", Port: 2}, t0+60*s, t0+65*s, nil),
		}, []schemas.Label{flapLabel}, 0, 0, 0, 1, 1},
		{"other type does not match", []schemas.Event{
			ev("1", schemas.TypeCounterSaturated, "open", portA, t0+60*s, t0+65*s, nil),
		}, []schemas.Label{flapLabel}, 0, 0, 0, 1, 1},
		{"fabric matches fabric", []schemas.Event{
			ev("f", schemas.TypeCNPECNImbalance, "open", schemas.Subject{}, t0, t0+100*s, nil),
		}, []schemas.Label{{Type: schemas.TypeCNPECNImbalance, Start: t0 + 10*s, Scope: "fabric"}}, 1, 1, 0, 0, 0},
		{"no events, no labels", nil, nil, 1, 1, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := Evaluate(tc.events, tc.labels, Options{Interval: 5 * time.Second})
			a := rep.All
			if a.Precision != tc.precision || a.Recall != tc.recall || a.Fragments != tc.fragments || a.Unmatched != tc.unmatched || len(rep.Misses) != tc.miss {
				t.Fatalf("precision %.2f recall %.2f fragments %d unmatched %d misses %d; want %.2f %.2f %d %d %d",
					a.Precision, a.Recall, a.Fragments, a.Unmatched, len(rep.Misses), tc.precision, tc.recall, tc.fragments, tc.unmatched, tc.miss)
			}
		})
	}
}

func TestEvaluateLatencyLeadAffected(t *testing.T) {
	storm := ev("p", schemas.TypePFCStorm, "open", portA, t0+10*s, t0+12*s, nil)
	storm.Affected = []schemas.Affected{{Node: "b"}, {Node: "c"}}
	upd := storm
	upd.State = "update"
	upd.Affected = []schemas.Affected{{Node: "b"}, {Node: "c"}, {Node: "x"}}
	drift := ev("d", schemas.TypeBERDrift, "open", portA, t0, t0+600*s, nil)
	labels := []schemas.Label{
		{Type: schemas.TypePFCStorm, Start: t0 + 10*s, Subject: portA, Affected: []schemas.LabelAffected{{Node: "b"}, {Node: "c"}, {Node: "d"}}},
		{Type: schemas.TypeBERDrift, Start: t0, Subject: portA, CriticalAt: ptr(t0 + 2400*s)},
	}
	rep := Evaluate([]schemas.Event{storm, upd, drift}, labels, Options{Interval: time.Second})
	var pfc, ber *TypeReport
	for _, r := range rep.Types {
		switch r.Type {
		case schemas.TypePFCStorm:
			pfc = r
		case schemas.TypeBERDrift:
			ber = r
		}
	}
	if pfc.Latency.Median != 2 {
		t.Errorf("storm latency %v, want 2 s", pfc.Latency.Median)
	}
	// affected {b,c,x} vs {b,c,d}: P = R = 2/3.
	if d := pfc.AffectedF1 - 2.0/3; d > 1e-9 || d < -1e-9 {
		t.Errorf("affected-F1 %v, want 2/3", pfc.AffectedF1)
	}
	if ber.Lead.Median != 1800 {
		t.Errorf("lead %v, want 1800 s", ber.Lead.Median)
	}
	var buf bytes.Buffer
	rep.WriteText(&buf)
	if !strings.Contains(buf.String(), "pfc_storm") || !strings.Contains(buf.String(), "all") {
		t.Errorf("text report:\n%s", buf.String())
	}
}

func TestTraceInterval(t *testing.T) {
	d, err := TraceInterval("../../test/scenarios/flap-and-saturation/trace.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if d < 4900*time.Millisecond || d > 5100*time.Millisecond {
		t.Fatalf("interval %s, want about 5s", d)
	}
}
