package eval

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Sum adds up the reports of many runs (a sweep over generator seeds and
// presets) per event type: the counts add, and latency, lead, affected-F1
// and cause accuracy are taken over every matched label of every run.
type Sum struct {
	Runs   int
	types  map[string]*TypeReport
	Misses []RunMiss
	False  []RunFalseAlarm
	// F1Low lists the storms whose affected-F1 fell below F1Floor.
	F1Low []RunF1
}

// RunMiss is a missed label of one named run.
type RunMiss struct {
	Run   string
	Label schemas.Label
}

// RunFalseAlarm is a false alarm or fragment of one named run.
type RunFalseAlarm struct {
	Run string
	FalseAlarm
}

// RunF1 is one storm's affected-F1 in a named run.
type RunF1 struct {
	Run     string
	Subject schemas.Subject
	F1      float64
}

// F1Floor is the affected-F1 below which Sum lists a storm by name.
const F1Floor = 0.9

// Add takes one run's events and labels (Evaluate's inputs) under a name.
func (s *Sum) Add(run string, events []schemas.Event, labels []schemas.Label, opt Options) *Report {
	rep := Evaluate(events, labels, opt)
	if s.types == nil {
		s.types = map[string]*TypeReport{}
	}
	s.Runs++
	for _, r := range rep.Types {
		t := s.types[r.Type]
		if t == nil {
			t = &TypeReport{Type: r.Type}
			s.types[r.Type] = t
		}
		t.accumulate(r)
	}
	for _, m := range rep.Misses {
		s.Misses = append(s.Misses, RunMiss{Run: run, Label: m.Label})
	}
	for _, fa := range rep.FalseAlarms {
		s.False = append(s.False, RunFalseAlarm{Run: run, FalseAlarm: fa})
	}
	for _, in := range Incidents(events) {
		if in.Type != schemas.TypePFCStorm {
			continue
		}
		for i := range labels {
			if Matches(in, &labels[i], opt.Interval) {
				if v := f1(in.AffectedNodes, labels[i].Affected); v < F1Floor {
					s.F1Low = append(s.F1Low, RunF1{Run: run, Subject: in.Subject, F1: v})
				}
				break
			}
		}
	}
	return rep
}

// Types returns the per-type totals, sorted by type, and "all" last.
func (s *Sum) Types() []*TypeReport {
	names := make([]string, 0, len(s.types))
	for t := range s.types {
		names = append(names, t)
	}
	sort.Strings(names)
	all := &TypeReport{Type: "all"}
	var out []*TypeReport
	for _, n := range names {
		r := s.types[n]
		finish(r)
		out = append(out, r)
		all.accumulate(r)
	}
	finish(all)
	return append(out, all)
}

// Targets are issue 12's figures a sweep must meet.
type Targets struct {
	Precision, Recall, CauseAccuracy, AffectedF1 float64
	// MaxLatency bounds the latency (max over matched labels) of the
	// types it names.
	MaxLatency map[string]time.Duration
}

// Issue12 is the issue's targets.
var Issue12 = Targets{Precision: 0.95, Recall: 0.95, CauseAccuracy: 0.9, AffectedF1: 0.9,
	MaxLatency: map[string]time.Duration{schemas.TypeRetransmissions: time.Minute, schemas.TypeReceiveStarvation: time.Minute}}

// Check returns one sentence per target a type misses; none when all are met.
func (s *Sum) Check(t Targets) []string {
	var out []string
	for _, r := range s.Types() {
		if r.Type == "all" {
			continue
		}
		if r.Incidents > 0 && r.Precision < t.Precision {
			out = append(out, fmt.Sprintf("%s: precision %.3f < %.2f", r.Type, r.Precision, t.Precision))
		}
		if r.Labels > 0 && r.Recall < t.Recall {
			out = append(out, fmt.Sprintf("%s: recall %.3f < %.2f", r.Type, r.Recall, t.Recall))
		}
		if r.CauseLabels > 0 && r.CauseAccuracy < t.CauseAccuracy {
			out = append(out, fmt.Sprintf("%s: cause accuracy %.3f < %.2f", r.Type, r.CauseAccuracy, t.CauseAccuracy))
		}
		if r.affectedN > 0 && r.AffectedF1 < t.AffectedF1 {
			out = append(out, fmt.Sprintf("%s: affected-F1 %.3f < %.2f", r.Type, r.AffectedF1, t.AffectedF1))
		}
		if d, ok := t.MaxLatency[r.Type]; ok && r.Latency.N > 0 && r.Latency.Max > d.Seconds() {
			out = append(out, fmt.Sprintf("%s: latency max %.1f s > %s", r.Type, r.Latency.Max, d))
		}
	}
	return out
}

// WriteText prints the totals as eval's table, the cause accuracy, then
// every miss, false alarm and low affected-F1 with its run.
func (s *Sum) WriteText(w io.Writer) {
	rep := &Report{Types: s.Types()}
	rep.All = rep.Types[len(rep.Types)-1]
	rep.Types = rep.Types[:len(rep.Types)-1]
	fmt.Fprintf(w, "%d runs\n", s.Runs)
	rep.WriteText(w)
	for _, m := range s.Misses {
		fmt.Fprintf(w, "missed [%s]: %s %s from %s\n", m.Run, m.Label.Type, subjectText(m.Label.Subject, m.Label.Fabric()), m.Label.Start)
	}
	for _, fa := range s.False {
		kind := "false alarm"
		if fa.Fragment {
			kind = "fragment"
		}
		fmt.Fprintf(w, "%s [%s]: %s %s detected %s: %s\n", kind, fa.Run, fa.Incident.Type, fa.Incident.Subject, fa.Incident.FirstDetected, strings.TrimSpace(fa.Incident.Summary))
	}
	for _, f := range s.F1Low {
		fmt.Fprintf(w, "affected-F1 %.3f [%s]: pfc_storm %s\n", f.F1, f.Run, f.Subject)
	}
}

// AffectedF1 is the affected-F1 of a storm incident against its label.
func AffectedF1(in *Incident, l *schemas.Label) float64 {
	return f1(in.AffectedNodes, l.Affected)
}
