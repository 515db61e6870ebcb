package engine

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Every incident state change reaches the events stream exactly once.
//
// A restarted processor rebuilds its state by re-reading the counters
// stream, and so decides again the events of the re-read part. Which of
// them did the previous run publish? The events stream's duplicate window
// (10 min) answers only for the last 10 minutes, and the old rule (publish
// what was decided from the last 9 minutes of messages, suppress the rest)
// lost every event decided during a longer outage: an incident's open and
// updates were missing while its resolved was there.
//
// So the processor asks the events stream itself. Before it reads counters,
// it reads the events stored since the warm-up's start minus
// WarmUp (all of them in StartAll) and keeps, per incident id, the highest
// revision there. A decided event whose revision
// is not above it is already on the stream and is not published again; any
// other is published, with its Nats-Msg-Id still guarding against a
// concurrent run (a rolling restart) within the duplicate window. A tracker
// emits an incident's revisions in order, 0..n, so the stream ends with
// every revision once, however long the outage was.
//
// A re-decided incident need not take the same revisions: whether an
// update was material can depend on what else the run knew at that data
// time (a cause linked from the configuration, which a live run learns when
// the inventory arrives and a warm-up knows from its start). So the
// revision numbers are matched, but the states decide: an incident whose
// last revision on the stream is resolved gets nothing more, and a
// resolution the warm-up decides at a revision the stream already holds
// (the previous run published more updates) is published as the revision
// after the stream's last. Otherwise the resolution would be taken for one
// already published and the incident left open on the stream for ever.
//
// Why that history window: an event the warm-up decides again has the
// same id, so the same onset, which the warm-up has seen in data; its
// revisions were published after that data was stored, so after the
// warm-up's start. The extra WarmUp covers onsets that a detector dates
// before the first reading it uses. The events stream is small (incident
// state changes, not samples), so reading hours of headers takes little.
//
// The map is pruned once the warm-up has caught up with the stream: an id
// the warm-up did not decide again cannot come back (a new decision has a
// new onset, so a new id).
//
// Resuming: an incident older than the warm-up is found again with a later
// onset, so a new id. The log also keeps the incidents left open on the
// stream, by type, scope and subject, and hands one to the tracker that
// opens a later incident on the same subject (processor.Resumer): the old
// incident goes on with its next revision instead of a second incident
// being opened for one fault while the first stays open for ever.
type publishedLog struct {
	last map[string]publishedRev
	open map[openKey]processor.Resumed
	// lastOpen is the last event of each incident open on the stream, to
	// resolve it when the warm-up does not find it again.
	lastOpen map[string]*schemas.Event
}

type publishedRev struct {
	revision int
	// resolved: the stream's highest revision of the incident resolves it.
	resolved bool
	touched  bool
}

type openKey struct {
	typ, scope string
	subject    schemas.Subject
}

// loadPublished reads the events on the events stream since from (zero:
// everything).
func loadPublished(ctx context.Context, js jetstream.JetStream, from time.Time) (*publishedLog, int, error) {
	l := &publishedLog{last: map[string]publishedRev{}, open: map[openKey]processor.Resumed{}, lastOpen: map[string]*schemas.Event{}}
	unreadable := 0
	err := readStream(ctx, js, schemas.StreamEvents, schemas.EventsAllFilter, from, false, func(m jetstream.Msg) {
		ev, err := schemas.DecodeEvent(m.Data())
		if err != nil {
			unreadable++
			return
		}
		if cur, seen := l.last[ev.ID]; !seen || ev.Revision > cur.revision {
			l.last[ev.ID] = publishedRev{revision: ev.Revision, resolved: ev.State == schemas.StateResolved}
		}
		k := openKey{ev.Type, ev.Scope, ev.Subject}
		switch {
		case ev.State != schemas.StateResolved:
			if prev, ok := l.open[k]; !ok || prev.ID != ev.ID || ev.Revision > prev.Revision {
				l.open[k] = processor.Resumed{ID: ev.ID, Start: ev.Start, Revision: ev.Revision, Severity: ev.Severity}
				l.lastOpen[ev.ID] = ev
			}
		case l.open[k].ID == ev.ID:
			delete(l.open, k)
		}
	})
	if err != nil {
		return nil, 0, fmt.Errorf("events history: %w", err)
	}
	return l, unreadable, nil
}

// decide says whether ev is to be published and with which revision, and
// notes that the warm-up decided its incident again: false for a revision
// the stream holds already and for anything after the incident's
// resolution on the stream; a resolution at a revision the stream holds,
// when the stream's last revision does not resolve, goes out as the next
// revision (see the type's comment).
func (l *publishedLog) decide(ev *schemas.Event) (publish bool, revision int) {
	if l == nil || len(l.last) == 0 {
		return true, ev.Revision
	}
	cur, ok := l.last[ev.ID]
	if !ok {
		return true, ev.Revision
	}
	cur.touched = true
	publish = true
	switch {
	case cur.resolved:
		publish = false
	case ev.Revision > cur.revision:
		cur.revision = ev.Revision
	case ev.State == schemas.StateResolved:
		cur.revision = cur.revision + 1
	default:
		publish = false
	}
	if publish {
		cur.resolved = ev.State == schemas.StateResolved
		revision = cur.revision
	} else {
		revision = ev.Revision
	}
	l.last[ev.ID] = cur
	return publish, revision
}

// resolvedOnStream notes that the events stream holds a resolution of id
// at revision (another processor published it): decide publishes nothing
// more of the incident.
func (l *publishedLog) resolvedOnStream(id string, revision int) {
	if l == nil {
		return
	}
	cur := l.last[id]
	l.last[id] = publishedRev{revision: max(cur.revision, revision), resolved: true, touched: true}
}

// resume implements processor.Resumer for the emitter: the incident left
// open on scope and subject, if it is not id and started no later than
// the one being opened (a replay over a stream that holds later incidents
// of the same port must not fold an earlier one into them).
func (l *publishedLog) resume(typ, scope string, subject schemas.Subject, id string, start schemas.Millis) (processor.Resumed, bool) {
	if l == nil || len(l.open) == 0 {
		return processor.Resumed{}, false
	}
	k := openKey{typ, scope, subject}
	prev, ok := l.open[k]
	if !ok || prev.Start > start {
		return processor.Resumed{}, false
	}
	delete(l.open, k)
	if prev.ID == id {
		return processor.Resumed{}, false
	}
	return prev, true
}

// caughtUp forgets the ids the warm-up did not decide again, and the open
// incidents it did not find again. Of those, the ones this processor owns
// (owns says which, and why when not because the counters no longer show
// them: Processor.resolves) cannot be decided by anyone else: they come
// back as resolved events, so no incident stays open for ever because a
// processor restarted. The others belong to other instances.
func (l *publishedLog) caughtUp(owns func(schemas.Subject) (own bool, why string), at schemas.Millis) (forgotten int, others []string, resolve []*schemas.Event) {
	if l == nil {
		return 0, nil, nil
	}
	for id, cur := range l.last {
		if !cur.touched {
			delete(l.last, id)
			forgotten++
		}
	}
	for _, r := range l.open {
		prev := l.lastOpen[r.ID]
		if prev == nil {
			others = append(others, r.ID)
			continue
		}
		own, why := owns(prev.Subject)
		if !own {
			others = append(others, r.ID)
			continue
		}
		end := max(at, prev.DetectedAt)
		ev := *prev
		ev.State, ev.Revision = schemas.StateResolved, prev.Revision+1
		ev.DetectedAt, ev.End = end, &end
		ev.Summary = "resolved: after a processor restart the counters no longer show it (it was: " + prev.Summary + ")"
		ev.Evidence = map[string]any{"resolved_by": "restart", "last_revision_before_restart": prev.Revision}
		if why != "" {
			ev.Summary = "resolved: " + why + " (it was: " + prev.Summary + ")"
			ev.Evidence["resolved_by"] = "unevaluated"
		}
		resolve = append(resolve, &ev)
	}
	sort.Slice(resolve, func(i, j int) bool { return resolve[i].ID < resolve[j].ID })
	sort.Strings(others)
	clear(l.open)
	clear(l.lastOpen)
	return forgotten, others, resolve
}
