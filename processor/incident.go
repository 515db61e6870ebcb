package processor

import (
	"sort"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Policy is the hysteresis and update rate of an incident type. Every
// duration is data time. Zero values mean "no requirement".
type Policy struct {
	// OpenAfterSamples is how many consecutive holding observations open an
	// incident (0 or 1: the first one does).
	OpenAfterSamples int
	// OpenAfter is how long the condition must hold, from the first holding
	// observation, before the incident opens.
	OpenAfter time.Duration
	// ResolveAfter is how long the condition must have been clear, from the
	// last holding observation, before the incident resolves.
	ResolveAfter time.Duration
	// ResolveAfterSamples is how many clear observations in a row resolve it.
	// With both ResolveAfter and ResolveAfterSamples zero, the first clear
	// observation resolves.
	ResolveAfterSamples int
	// MinUpdateInterval bounds non-material updates (new figures, more of
	// the same errors): at most one per interval. Material changes (a worse
	// severity, a new key such as a new counter or a new affected port) are
	// published at once; they are bounded by nature.
	MinUpdateInterval time.Duration
	// SilentResolveAfter resolves an open incident whose subject has sent
	// nothing for this long, measured against the watermark in Sweep: a
	// silent port can neither confirm nor clear the condition, and an
	// incident must not stay open forever. Zero disables it.
	SilentResolveAfter time.Duration
}

// Finding is what a detector sees while its condition holds.
type Finding struct {
	Scope   string // defaults to port
	Subject schemas.Subject
	// Onset is the estimated start; used when the incident opens, it is part
	// of the id, so it must come from data only.
	Onset    schemas.Millis
	Severity string
	Layer    string
	Summary  string
	Evidence map[string]any
	Checks   []schemas.Check // next checks, commands with notes
	Origin   *schemas.Origin
	Affected []schemas.Affected
	// Keys are the facets of the incident whose appearance is material (a
	// counter that saturates, a port that joins). Affected ports add their
	// own key.
	Keys []string
	// Progress says the figures moved in a way worth telling (more flaps)
	// but not material: published at most every MinUpdateInterval.
	Progress bool
}

type phase uint8

const (
	phasePending phase = iota
	phaseOpen
)

type incident struct {
	phase       phase
	id          string
	start       schemas.Millis
	revision    int
	holdSince   schemas.Millis
	holdCount   int
	lastHeld    schemas.Millis
	clearSince  schemas.Millis // first clear observation after lastHeld, 0 while holding
	clearCount  int
	severity    string
	keys        map[string]struct{}
	lastPublish schemas.Millis
	dirty       bool
	last        Finding
	// cause is the incident that explains this one (see causes.go), in
	// words in because; once found it stays.
	cause   *schemas.Cause
	because string
}

// Resumer is implemented by an Emitter that knows the incidents a previous
// run left open on the events stream. A restarted processor rebuilds its
// state from a bounded stretch of history; an incident older than that is
// found again with a later onset, so a new id. Through Resume the tracker
// continues the open incident instead of opening a second one for the same
// fault, and the old one is not left open for ever.
type Resumer interface {
	// Resume returns the incident of type typ open on scope and subject
	// when it is not id (an incident found again with its own id needs no
	// help) and started no later than start, at most once per incident.
	Resume(typ, scope string, subject schemas.Subject, id string, start schemas.Millis) (Resumed, bool)
}

// Resumed is the last published state of an open incident.
type Resumed struct {
	ID       string
	Start    schemas.Millis
	Revision int
	Severity string
}

// Tracker runs the lifecycle of one incident type: open -> update ->
// resolved, one incident per subject at a time. Only subjects with a pending
// or open incident take memory. Not safe for concurrent use: a processor
// drives it from one goroutine.
type Tracker struct {
	typ    string
	policy Policy
	active map[schemas.Subject]*incident
}

// NewTracker starts a tracker for events of type typ.
func NewTracker(typ string, p Policy) *Tracker {
	return &Tracker{typ: typ, policy: p, active: make(map[schemas.Subject]*incident)}
}

// Policy returns the tracker's policy.
func (t *Tracker) Policy() Policy { return t.policy }

// IsOpen reports whether subject has an open incident.
func (t *Tracker) IsOpen(subject schemas.Subject) bool {
	if len(t.active) == 0 {
		return false // the common case: no incident at all
	}
	inc, ok := t.active[subject]
	return ok && inc.phase == phaseOpen
}

// ID returns the id of subject's open incident.
func (t *Tracker) ID(subject schemas.Subject) (string, bool) {
	inc, ok := t.active[subject]
	if !ok || inc.phase != phaseOpen {
		return "", false
	}
	return inc.id, true
}

// Active is the number of pending or open incidents.
func (t *Tracker) Active() int { return len(t.active) }

// Tracks reports whether subject has an incident pending (held, not yet
// open) or open.
func (t *Tracker) Tracks(subject schemas.Subject) bool {
	_, ok := t.active[subject]
	return ok
}

// Pending reports whether subject has an incident held but not yet open.
func (t *Tracker) Pending(subject schemas.Subject) bool {
	inc, ok := t.active[subject]
	return ok && inc.phase != phaseOpen
}

func severityRank(s string) int {
	switch s {
	case schemas.SeverityCritical:
		return 2
	case schemas.SeverityWarning:
		return 1
	}
	return 0
}

// Hold records that the condition holds for f.Subject at data time now. It
// opens, updates or does nothing, as the policy says.
func (t *Tracker) Hold(now schemas.Millis, f Finding, em Emitter) {
	if f.Scope == "" {
		f.Scope = schemas.ScopePort
	}
	inc, ok := t.active[f.Subject]
	if !ok {
		inc = &incident{phase: phasePending, start: f.Onset, holdSince: now, keys: make(map[string]struct{})}
		t.active[f.Subject] = inc
	}
	inc.holdCount++
	inc.lastHeld = now
	inc.clearSince, inc.clearCount = 0, 0
	inc.last = f

	material := false
	if severityRank(f.Severity) > severityRank(inc.severity) {
		// Severity only rises within an incident: a link that flapped
		// critically stays a critical incident until it resolves, and an
		// oscillating figure cannot produce an update per sample.
		inc.severity = f.Severity
		material = true
	}
	for _, k := range findingKeys(f) {
		if _, seen := inc.keys[k]; !seen {
			inc.keys[k] = struct{}{}
			material = true
		}
	}
	if l, ok := em.(Linker); ok {
		if c, why := l.Link(t.typ, &f, now); c != nil {
			if inc.cause == nil || inc.cause.ID != c.ID {
				material = true
			}
			inc.cause, inc.because = c, why
		}
	}

	if inc.phase == phasePending {
		if inc.holdCount < t.policy.OpenAfterSamples || now-inc.holdSince < millis(t.policy.OpenAfter) {
			return
		}
		inc.phase = phaseOpen
		inc.id = schemas.EventID(t.typ, f.Subject, inc.start)
		if r, ok := em.(Resumer); ok {
			if prev, ok := r.Resume(t.typ, f.Scope, f.Subject, inc.id, inc.start); ok {
				// The incident the previous run opened goes on: same id,
				// next revision, no second open for one fault.
				inc.id, inc.start, inc.revision = prev.ID, prev.Start, prev.Revision
				if severityRank(prev.Severity) > severityRank(inc.severity) {
					inc.severity = prev.Severity
				}
				t.emit(em, inc, schemas.StateUpdate, now, nil, f)
				return
			}
		}
		t.emit(em, inc, schemas.StateOpen, now, nil, f)
		return
	}
	if f.Progress {
		inc.dirty = true
	}
	if material || (inc.dirty && now-inc.lastPublish >= millis(t.policy.MinUpdateInterval)) {
		t.emit(em, inc, schemas.StateUpdate, now, nil, f)
	}
}

func findingKeys(f Finding) []string {
	if len(f.Affected) == 0 {
		return f.Keys
	}
	keys := append([]string(nil), f.Keys...)
	for _, a := range f.Affected {
		keys = append(keys, "affected:"+schemas.Subject{Node: a.Node, Device: a.Device, Port: a.Port}.String())
	}
	return keys
}

// Clear records that the condition was observed clear for subject at data
// time now. why is a short clause for the resolved summary ("the link has
// been stable for 5m0s"); evidence, if not nil, is merged into the resolved
// event's evidence.
func (t *Tracker) Clear(now schemas.Millis, subject schemas.Subject, why string, evidence map[string]any, em Emitter) {
	inc, ok := t.active[subject]
	if !ok {
		return
	}
	if inc.phase == phasePending {
		// Opening needs the condition to hold without a break.
		delete(t.active, subject)
		return
	}
	if inc.clearCount == 0 {
		inc.clearSince = now
	}
	inc.clearCount++
	if inc.clearCount < t.policy.ResolveAfterSamples || now-inc.lastHeld < millis(t.policy.ResolveAfter) {
		return
	}
	t.resolve(em, inc, subject, now, inc.clearSince, why, evidence)
}

// Sweep resolves the open incidents of subjects silent for
// Policy.SilentResolveAfter at watermark wm, and drops pending ones.
// lastSeen returns a subject's latest data time (false: unknown, treated as
// silent since its last holding observation). Subjects are visited in
// sorted order so that the output is deterministic.
func (t *Tracker) Sweep(wm schemas.Millis, lastSeen func(schemas.Subject) (schemas.Millis, bool), em Emitter) {
	if t.policy.SilentResolveAfter <= 0 || len(t.active) == 0 {
		return
	}
	subjects := make([]schemas.Subject, 0, len(t.active))
	for s := range t.active {
		subjects = append(subjects, s)
	}
	sort.Slice(subjects, func(i, j int) bool { return subjectLess(subjects[i], subjects[j]) })
	for _, s := range subjects {
		inc := t.active[s]
		seen, ok := lastSeen(s)
		if !ok || seen < inc.lastHeld {
			seen = inc.lastHeld
		}
		if wm-seen < millis(t.policy.SilentResolveAfter) {
			continue
		}
		if inc.phase == phasePending {
			delete(t.active, s)
			continue
		}
		why := "the port has been silent since " + seen.String()
		t.resolve(em, inc, s, wm, seen, why, map[string]any{"silent_since": seen.String()})
	}
}

func (t *Tracker) resolve(em Emitter, inc *incident, subject schemas.Subject, now, end schemas.Millis, why string, evidence map[string]any) {
	f := inc.last
	merged := make(map[string]any, len(f.Evidence)+len(evidence))
	for k, v := range f.Evidence {
		merged[k] = v
	}
	for k, v := range evidence {
		merged[k] = v
	}
	f.Evidence = merged
	if why != "" {
		// The last open summary describes the fault as it was (a link that
		// "is DOWN"); say what ended it first, and keep the rest as history.
		who, what, ok := strings.Cut(f.Summary, ": ")
		if ok {
			f.Summary = who + ": resolved, " + why + " (while open: " + what + ")"
		} else {
			f.Summary = "resolved, " + why + " (while open: " + f.Summary + ")"
		}
	}
	t.emit(em, inc, schemas.StateResolved, now, &end, f)
	delete(t.active, subject)
}

func (t *Tracker) emit(em Emitter, inc *incident, state string, now schemas.Millis, end *schemas.Millis, f Finding) {
	if state != schemas.StateOpen {
		inc.revision++
	}
	inc.lastPublish = now
	inc.dirty = false
	ev := &schemas.Event{
		ID:         inc.id,
		Type:       t.typ,
		State:      state,
		Severity:   inc.severity,
		Scope:      f.Scope,
		Subject:    f.Subject,
		Start:      inc.start,
		DetectedAt: now,
		End:        end,
		Layer:      f.Layer,
		Summary:    f.Summary,
		Evidence:   f.Evidence,
		NextChecks: schemas.CheckCommands(f.Checks),
		Checks:     f.Checks,
		Origin:     f.Origin,
		Affected:   f.Affected,
		Cause:      inc.cause,
		Revision:   inc.revision,
	}
	if inc.because != "" {
		ev.Summary += ", because " + inc.because
	}
	if ev.Evidence == nil {
		ev.Evidence = map[string]any{}
	}
	if ev.NextChecks == nil {
		ev.NextChecks = []string{}
	}
	em.Emit(ev)
}

func millis(d time.Duration) schemas.Millis { return schemas.Millis(d / time.Millisecond) }

func subjectLess(a, b schemas.Subject) bool {
	if a.Node != b.Node {
		return a.Node < b.Node
	}
	if a.Device != b.Device {
		return a.Device < b.Device
	}
	return a.Port < b.Port
}
