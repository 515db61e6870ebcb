package eval

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Two runs add up per type; the misses, false alarms and weak storms are
// listed with their run, and Check names every target missed.
func TestSum(t *testing.T) {
	iv := Options{Interval: 5 * time.Second}
	retrans := schemas.Label{Type: schemas.TypeRetransmissions, Start: t0 + 60*s, End: ptr(t0 + 300*s), Subject: portA}
	storm := schemas.Label{Type: schemas.TypePFCStorm, Start: t0 + 60*s, End: ptr(t0 + 300*s), Subject: portA,
		Affected: []schemas.LabelAffected{{Node: "b"}, {Node: "c"}, {Node: "d"}}}
	stormEv := ev("s", schemas.TypePFCStorm, "open", portA, t0+60*s, t0+70*s, nil)
	stormEv.Affected = []schemas.Affected{{Node: "b"}}

	var sum Sum
	// Run 1: the retransmissions found 90 s late, a false completion_errors.
	sum.Add("run1", []schemas.Event{
		ev("r", schemas.TypeRetransmissions, "open", portA, t0+60*s, t0+150*s, nil),
		ev("c", schemas.TypeCompletionErrors, "open", portA, t0+600*s, t0+610*s, nil),
	}, []schemas.Label{retrans}, iv)
	// Run 2: the retransmissions missed, a storm with one of three victims.
	sum.Add("run2", []schemas.Event{stormEv}, []schemas.Label{retrans, storm}, iv)

	byType := map[string]*TypeReport{}
	for _, r := range sum.Types() {
		byType[r.Type] = r
	}
	for _, tc := range []struct {
		typ                        string
		labels, incidents, matched int
		precision, recall          float64
	}{
		{schemas.TypeRetransmissions, 2, 1, 1, 1, 0.5},
		{schemas.TypeCompletionErrors, 0, 1, 0, 0, 1},
		{schemas.TypePFCStorm, 1, 1, 1, 1, 1},
		{"all", 3, 3, 2, 2.0 / 3, 2.0 / 3},
	} {
		r := byType[tc.typ]
		if r == nil {
			t.Fatalf("no %s totals", tc.typ)
		}
		if r.Labels != tc.labels || r.Incidents != tc.incidents || r.Matched != tc.matched || r.Precision != tc.precision || r.Recall != tc.recall {
			t.Errorf("%s: %d labels %d incidents %d matched, P %.3f R %.3f; want %+v", tc.typ, r.Labels, r.Incidents, r.Matched, r.Precision, r.Recall, tc)
		}
	}
	if sum.Runs != 2 || len(sum.Misses) != 1 || sum.Misses[0].Run != "run2" || len(sum.False) != 1 || sum.False[0].Run != "run1" {
		t.Errorf("runs %d, misses %+v, false %+v", sum.Runs, sum.Misses, sum.False)
	}
	if len(sum.F1Low) != 1 || sum.F1Low[0].Run != "run2" || sum.F1Low[0].F1 != 0.5 {
		t.Errorf("weak storms %+v, want run2's at 0.5", sum.F1Low)
	}
	got := strings.Join(sum.Check(Issue12), "\n")
	for _, want := range []string{"retransmissions: recall 0.500", "retransmissions: latency max 90.0 s", "completion_errors: precision 0.000", "pfc_storm: affected-F1 0.500"} {
		if !strings.Contains(got, want) {
			t.Errorf("Check misses %q in:\n%s", want, got)
		}
	}
	var b bytes.Buffer
	sum.WriteText(&b)
	for _, want := range []string{"2 runs", "missed [run2]: retransmissions", "false alarm [run1]: completion_errors", "affected-F1 0.500 [run2]"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report misses %q:\n%s", want, b.String())
		}
	}

	var clean Sum
	clean.Add("ok", []schemas.Event{ev("r", schemas.TypeRetransmissions, "open", portA, t0+60*s, t0+70*s, nil)}, []schemas.Label{retrans}, iv)
	if m := clean.Check(Issue12); len(m) != 0 {
		t.Errorf("a clean run misses targets: %v", m)
	}
}
