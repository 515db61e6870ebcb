package runtime

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
// it reads the headers of the events stored since the warm-up's start minus
// WarmUp (all of them in StartAll) and keeps, per incident id, the highest
// revision there (Nats-Msg-Id id#revision). A decided event whose revision
// is not above it is already on the stream and is not published again; any
// other is published, with its Nats-Msg-Id still guarding against a
// concurrent run (a rolling restart) within the duplicate window. A tracker
// emits an incident's revisions in order, 0..n, so the stream ends with
// every revision once, however long the outage was.
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
type publishedLog struct {
	last map[string]publishedRev
}

type publishedRev struct {
	revision int
	touched  bool
}

// loadPublished reads the last revision per incident id on the events
// stream since from (zero: everything).
func loadPublished(ctx context.Context, js jetstream.JetStream, from time.Time) (*publishedLog, int, error) {
	l := &publishedLog{last: map[string]publishedRev{}}
	unnamed := 0
	err := readHeaders(ctx, js, schemas.StreamEvents, schemas.EventsAllFilter, from, func(m jetstream.Msg) {
		id, rev, ok := parseEventMsgID(m.Headers().Get(nats.MsgIdHdr))
		if !ok {
			unnamed++
			return
		}
		if cur, seen := l.last[id]; !seen || rev > cur.revision {
			l.last[id] = publishedRev{revision: rev}
		}
	})
	if err != nil {
		return nil, 0, fmt.Errorf("events history: %w", err)
	}
	return l, unnamed, nil
}

// parseEventMsgID splits schemas.Event.MsgID ("id#revision"); an id may
// itself contain '#' (node names are free text), the revision never does.
func parseEventMsgID(s string) (id string, revision int, ok bool) {
	i := strings.LastIndexByte(s, '#')
	if i <= 0 {
		return "", 0, false
	}
	// Only what schemas.Event.MsgID writes: no sign, no leading zero.
	rev, err := strconv.Atoi(s[i+1:])
	if err != nil || rev < 0 || strconv.Itoa(rev) != s[i+1:] {
		return "", 0, false
	}
	return s[:i], rev, true
}

// seen reports whether ev's revision is already on the events stream, and
// notes that the warm-up decided its incident again.
func (l *publishedLog) seen(ev *schemas.Event) bool {
	if l == nil || len(l.last) == 0 {
		return false
	}
	cur, ok := l.last[ev.ID]
	if !ok {
		return false
	}
	if !cur.touched {
		cur.touched = true
		l.last[ev.ID] = cur
	}
	return ev.Revision <= cur.revision
}

// caughtUp forgets the ids the warm-up did not decide again.
func (l *publishedLog) caughtUp() (forgotten int) {
	if l == nil {
		return 0
	}
	for id, cur := range l.last {
		if !cur.touched {
			delete(l.last, id)
			forgotten++
		}
	}
	return forgotten
}
