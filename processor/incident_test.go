package processor

import (
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// resumingEmitter collects events and resumes one incident.
type resumingEmitter struct {
	events []*schemas.Event
	prev   *Resumed
	asked  []string
}

func (e *resumingEmitter) Emit(ev *schemas.Event) { e.events = append(e.events, ev) }
func (e *resumingEmitter) Resume(typ, scope string, subject schemas.Subject, id string, start schemas.Millis) (Resumed, bool) {
	e.asked = append(e.asked, id)
	if e.prev == nil || e.prev.ID == id || e.prev.Start > start {
		return Resumed{}, false
	}
	p := *e.prev
	e.prev = nil
	return p, true
}

func TestTrackerResumes(t *testing.T) {
	subject := schemas.Subject{Node: "n", Device: "mlx5_0", Port: 1}
	finding := func(onset schemas.Millis) Finding {
		return Finding{Subject: subject, Onset: onset, Severity: schemas.SeverityWarning, Layer: "physical", Summary: "n: x"}
	}
	cases := []struct {
		name      string
		prev      *Resumed
		wantID    string
		wantState string
		wantRev   int
		wantSev   string
	}{
		{"nothing to resume", nil, schemas.EventID("x", subject, 5000), schemas.StateOpen, 0, schemas.SeverityWarning},
		{"older incident goes on", &Resumed{ID: "x/old", Start: 1000, Revision: 4, Severity: schemas.SeverityCritical},
			"x/old", schemas.StateUpdate, 5, schemas.SeverityCritical},
		{"later incident is not folded in", &Resumed{ID: "x/later", Start: 9000, Revision: 2},
			schemas.EventID("x", subject, 5000), schemas.StateOpen, 0, schemas.SeverityWarning},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			em := &resumingEmitter{prev: c.prev}
			tr := NewTracker("x", Policy{})
			tr.Hold(5000, finding(5000), em)
			if len(em.events) != 1 {
				t.Fatalf("%d events", len(em.events))
			}
			ev := em.events[0]
			if ev.ID != c.wantID || ev.State != c.wantState || ev.Revision != c.wantRev || ev.Severity != c.wantSev {
				t.Errorf("event %s %s rev %d %s", ev.ID, ev.State, ev.Revision, ev.Severity)
			}
			// The incident goes on under that id and resolves with the next revision.
			tr.Clear(6000, subject, "clear", nil, em)
			if last := em.events[len(em.events)-1]; last.ID != c.wantID || last.State != schemas.StateResolved || last.Revision != c.wantRev+1 {
				t.Errorf("resolved %s %s rev %d", last.ID, last.State, last.Revision)
			}
			if len(em.asked) != 1 {
				t.Errorf("asked %v, want once, at the open", em.asked)
			}
		})
	}
}

func TestTrackerHysteresis(t *testing.T) {
	subj := portA.Subject()
	f := Finding{Subject: subj, Onset: at(0), Severity: "warning", Layer: "physical", Summary: "x"}
	p := Policy{OpenAfterSamples: 3, ResolveAfterSamples: 2, ResolveAfter: time.Minute}
	var evs []*schemas.Event
	em := EmitterFunc(func(ev *schemas.Event) { evs = append(evs, ev) })
	tr := NewTracker("test", p)

	tr.Hold(at(0), f, em)
	tr.Hold(at(5), f, em)
	tr.Clear(at(10), subj, "", nil, em) // a break: pending dropped
	if len(evs) != 0 || tr.Active() != 0 {
		t.Fatalf("pending break: %d events, %d active", len(evs), tr.Active())
	}
	f.Onset = at(15)
	for _, sec := range []float64{15, 20, 25} {
		tr.Hold(at(sec), f, em)
	}
	if len(evs) != 1 || evs[0].State != "open" || evs[0].Start != at(15) || evs[0].DetectedAt != at(25) {
		t.Fatalf("open: %+v", evs)
	}
	tr.Clear(at(30), subj, "", nil, em)
	tr.Clear(at(35), subj, "", nil, em) // two samples but not a minute
	tr.Hold(at(40), f, em)              // back: clear count restarts
	tr.Clear(at(45), subj, "", nil, em)
	tr.Clear(at(100), subj, "", nil, em) // a minute since 40, two samples
	if len(evs) != 2 || evs[1].State != "resolved" || *evs[1].End != at(45) || evs[1].Revision != 1 {
		t.Fatalf("resolve: %+v", evs[len(evs)-1])
	}
	tr.Clear(at(105), subj, "", nil, em)
	if len(evs) != 2 {
		t.Fatal("resolved twice")
	}
}
