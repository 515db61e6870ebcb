// Package eval scores events against labels with docs/formats.md's matching rules:
// precision, recall, detection latency, lead before critical and the
// affected-F1 of PFC storms, per event type and overall.
package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Incident is all the events of one id.
type Incident struct {
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	Scope         string          `json:"scope"`
	Subject       schemas.Subject `json:"subject"`
	Start         schemas.Millis  `json:"start"`
	End           *schemas.Millis `json:"end"`
	FirstDetected schemas.Millis  `json:"first_detected"`
	States        []string        `json:"states"`
	Summary       string          `json:"summary"`
	// AffectedNodes is the union of the affected nodes over the incident.
	AffectedNodes []string `json:"affected_nodes,omitempty"`
	// Cause is the cause its events named last.
	Cause *schemas.Cause `json:"cause,omitempty"`
}

// Incidents groups events by id, in the order incidents first appear.
func Incidents(events []schemas.Event) []*Incident {
	var out []*Incident
	byID := map[string]*Incident{}
	affected := map[string]map[string]bool{}
	for _, ev := range events {
		in := byID[ev.ID]
		if in == nil {
			in = &Incident{ID: ev.ID, Type: ev.Type, Scope: ev.Scope, Subject: ev.Subject, Start: ev.Start, FirstDetected: ev.DetectedAt, Summary: ev.Summary}
			byID[ev.ID] = in
			affected[ev.ID] = map[string]bool{}
			out = append(out, in)
		}
		in.States = append(in.States, ev.State)
		if ev.Start < in.Start {
			in.Start = ev.Start
		}
		if ev.DetectedAt < in.FirstDetected {
			in.FirstDetected = ev.DetectedAt
		}
		in.End = ev.End
		in.Cause = lastCause(in.Cause, &ev)
		for _, a := range ev.Affected {
			if !affected[ev.ID][a.Node] {
				affected[ev.ID][a.Node] = true
				in.AffectedNodes = append(in.AffectedNodes, a.Node)
			}
		}
	}
	for _, in := range out {
		sort.Strings(in.AffectedNodes)
	}
	return out
}

// Options are the trace facts the matching rule needs.
type Options struct {
	// Interval is the trace's collection interval: a label's window opens
	// two intervals before its start.
	Interval time.Duration
}

// Stats summarises durations in seconds.
type Stats struct {
	N      int     `json:"n"`
	Median float64 `json:"median_s"`
	P95    float64 `json:"p95_s"`
	Min    float64 `json:"min_s"`
	Max    float64 `json:"max_s"`
}

func summarise(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))].Seconds()
	}
	return Stats{N: len(s), Median: q(0.5), P95: q(0.95), Min: s[0].Seconds(), Max: s[len(s)-1].Seconds()}
}

// TypeReport is the score of one event type (or "all").
type TypeReport struct {
	Type       string  `json:"type"`
	Labels     int     `json:"labels"`
	Incidents  int     `json:"incidents"`
	Matched    int     `json:"matched_labels"`
	Fragments  int     `json:"fragments"`
	Unmatched  int     `json:"unmatched_incidents"`
	Precision  float64 `json:"precision"`
	Recall     float64 `json:"recall"`
	Latency    Stats   `json:"latency"`
	Lead       Stats   `json:"lead_before_critical"`
	AffectedF1 float64 `json:"affected_f1"`
	CauseScore
	affectedN int
	latencies []time.Duration
	leads     []time.Duration
	f1s       []float64
}

// Miss is a label no incident matched.
type Miss struct {
	Label schemas.Label `json:"label"`
}

// FalseAlarm is an incident that matched no label, or a fragment of one
// already matched.
type FalseAlarm struct {
	Incident *Incident `json:"incident"`
	Fragment bool      `json:"fragment"`
}

// Report is the whole evaluation.
type Report struct {
	Interval    time.Duration `json:"-"`
	Types       []*TypeReport `json:"types"`
	All         *TypeReport   `json:"all"`
	Misses      []Miss        `json:"misses"`
	FalseAlarms []FalseAlarm  `json:"false_alarms"`
}

func subjectMatches(in *Incident, l *schemas.Label) bool {
	if l.Fabric() {
		return in.Scope == schemas.ScopeFabric || in.Subject.Node == ""
	}
	if in.Subject.Node != l.Subject.Node {
		return false
	}
	if l.Subject.Device != "" && in.Subject.Device != "" && l.Subject.Device != in.Subject.Device {
		return false
	}
	if l.Subject.Port != 0 && in.Subject.Port != 0 && l.Subject.Port != in.Subject.Port {
		return false
	}
	return true
}

const forever = schemas.Millis(math.MaxInt64)

// Matches is docs/formats.md's rule: same type, same subject, and the incident's
// span overlaps [label.start - 2 intervals, label.end + 120 s].
func Matches(in *Incident, l *schemas.Label, interval time.Duration) bool {
	if in.Type != l.Type || !subjectMatches(in, l) {
		return false
	}
	from := l.Start - schemas.Millis(2*interval.Milliseconds())
	to := forever
	if l.End != nil {
		to = *l.End + 120_000
	}
	inFrom := min(in.Start, in.FirstDetected)
	inTo := forever
	if in.End != nil {
		inTo = *in.End
	}
	return inFrom <= to && inTo >= from
}

func f1(got []string, want []schemas.LabelAffected) float64 {
	if len(got) == 0 && len(want) == 0 {
		return 1
	}
	w := map[string]bool{}
	for _, a := range want {
		w[a.Node] = true
	}
	tp := 0
	for _, g := range got {
		if w[g] {
			tp++
		}
	}
	if tp == 0 {
		return 0
	}
	p := float64(tp) / float64(len(got))
	r := float64(tp) / float64(len(w))
	return 2 * p * r / (p + r)
}

// Evaluate scores incidents against labels. Incidents are taken in order of
// first detection; each claims the earliest matching label not yet claimed;
// one that only matches claimed labels is a fragment and counts as false.
func Evaluate(events []schemas.Event, labels []schemas.Label, opt Options) *Report {
	ins := Incidents(events)
	sort.SliceStable(ins, func(i, j int) bool { return ins[i].FirstDetected < ins[j].FirstDetected })
	rep := &Report{Interval: opt.Interval}
	byType := map[string]*TypeReport{}
	tr := func(t string) *TypeReport {
		if byType[t] == nil {
			byType[t] = &TypeReport{Type: t}
		}
		return byType[t]
	}
	for i := range labels {
		tr(labels[i].Type).Labels++
	}
	claimed := make([]bool, len(labels))
	for _, in := range ins {
		r := tr(in.Type)
		r.Incidents++
		best, anyMatch := -1, false
		for i := range labels {
			if !Matches(in, &labels[i], opt.Interval) {
				continue
			}
			anyMatch = true
			if !claimed[i] && (best < 0 || labels[i].Start < labels[best].Start) {
				best = i
			}
		}
		switch {
		case best >= 0:
			claimed[best] = true
			l := &labels[best]
			r.Matched++
			r.latencies = append(r.latencies, in.FirstDetected.Time().Sub(l.Start.Time()))
			if l.CriticalAt != nil {
				r.leads = append(r.leads, l.CriticalAt.Time().Sub(in.FirstDetected.Time()))
			}
			r.scoreCause(in, l)
			if l.Type == schemas.TypePFCStorm {
				r.f1s = append(r.f1s, f1(in.AffectedNodes, l.Affected))
			}
		case anyMatch:
			r.Fragments++
			rep.FalseAlarms = append(rep.FalseAlarms, FalseAlarm{Incident: in, Fragment: true})
		default:
			r.Unmatched++
			rep.FalseAlarms = append(rep.FalseAlarms, FalseAlarm{Incident: in})
		}
	}
	for i := range labels {
		if !claimed[i] {
			rep.Misses = append(rep.Misses, Miss{Label: labels[i]})
		}
	}
	all := &TypeReport{Type: "all"}
	types := make([]string, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		r := byType[t]
		finish(r)
		rep.Types = append(rep.Types, r)
		all.accumulate(r)
	}
	finish(all)
	rep.All = all
	return rep
}

// accumulate adds a type's counts and samples to an "all types" report.
func (all *TypeReport) accumulate(r *TypeReport) {
	all.Labels += r.Labels
	all.Incidents += r.Incidents
	all.Matched += r.Matched
	all.Fragments += r.Fragments
	all.Unmatched += r.Unmatched
	all.latencies = append(all.latencies, r.latencies...)
	all.leads = append(all.leads, r.leads...)
	all.f1s = append(all.f1s, r.f1s...)
	all.add(r.CauseScore)
}

func finish(r *TypeReport) {
	r.Precision, r.Recall = 1, 1
	if r.Incidents > 0 {
		r.Precision = float64(r.Matched) / float64(r.Incidents)
	}
	if r.Labels > 0 {
		r.Recall = float64(r.Matched) / float64(r.Labels)
	}
	r.finishCause()
	r.Latency = summarise(r.latencies)
	r.Lead = summarise(r.leads)
	if len(r.f1s) > 0 {
		sum := 0.0
		for _, v := range r.f1s {
			sum += v
		}
		r.AffectedF1 = sum / float64(len(r.f1s))
		r.affectedN = len(r.f1s)
	}
}

// WriteText prints the report as a table, then the misses and false alarms.
func (rep *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%-20s %6s %9s %7s %5s %9s %6s  %-26s  %-18s %s\n", "type", "labels", "incidents", "matched", "frag", "precision", "recall", "latency s p50/p95/max", "lead s p50/min", "affected-F1")
	for _, r := range append(rep.Types, rep.All) {
		lat, lead, af := "-", "-", "-"
		if r.Latency.N > 0 {
			lat = fmt.Sprintf("%.1f/%.1f/%.1f", r.Latency.Median, r.Latency.P95, r.Latency.Max)
		}
		if r.Lead.N > 0 {
			lead = fmt.Sprintf("%.0f/%.0f", r.Lead.Median, r.Lead.Min)
		}
		if r.affectedN > 0 {
			af = fmt.Sprintf("%.3f", r.AffectedF1)
		}
		fmt.Fprintf(w, "%-20s %6d %9d %7d %5d %9.3f %6.3f  %-26s  %-18s %s\n", r.Type, r.Labels, r.Incidents, r.Matched, r.Fragments, r.Precision, r.Recall, lat, lead, af)
	}
	rep.writeCauses(w)
	for _, m := range rep.Misses {
		fmt.Fprintf(w, "missed: %s %s from %s\n", m.Label.Type, subjectText(m.Label.Subject, m.Label.Fabric()), m.Label.Start)
	}
	for _, fa := range rep.FalseAlarms {
		kind := "false alarm"
		if fa.Fragment {
			kind = "fragment"
		}
		fmt.Fprintf(w, "%s: %s %s detected %s: %s\n", kind, fa.Incident.Type, fa.Incident.Subject, fa.Incident.FirstDetected, strings.TrimSpace(fa.Incident.Summary))
	}
}

func subjectText(s schemas.Subject, fabric bool) string {
	if fabric {
		return "fabric"
	}
	return s.String()
}

// WriteJSON prints the report as one JSON document.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
