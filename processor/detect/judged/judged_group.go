package judged

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rdmawatch/rdmawatch/processor"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// One incident per cause when the symptom shows on peers (judged.group,
// completion_errors). An application whose work requests are wrong (a bad
// rkey, a short receive buffer on the other side) fails on both ends at
// once: the requester counts req_* errors and flushes its QPs, each
// responder it talks to counts resp_* errors. The counters do not say which
// responder a requester talks to, so the grouping is by time:
//
//   - a port whose errors are mostly requester-side (req_*, mlx4 sq_*) is
//     the subject of its incident;
//   - a port whose errors are mostly responder-side (resp_*, mlx4 rq_*) is
//     `affected` of a requester whose errors are on (open, or seen within
//     the grouping window) and began no later than its own plus the window,
//     the requester whose onset is nearest its own;
//   - responders with no such requester (it is not monitored) are one
//     incident together when their errors begin within the window of each
//     other: its subject is the responder already open, else the one with
//     the most errors since the onset (ties: by name), the others affected.
//
// The window is three of the port's intervals, at least 30 s: the ports'
// samples of one moment are up to an interval apart, and an onset is known
// to an interval. A port already open as a subject stays one: regrouping
// an incident that was published would leave it without an end.

// groupWindowMs is the least grouping window.
const groupWindowMs = 30_000

type groupMember struct {
	id        schemas.PortID
	requester bool
	rate      float64 // latest primary errors per second
	total     float64 // primary errors since the onset
	counter   string  // its largest primary counter now
	onset     schemas.Millis
	last      schemas.Millis // latest sample in excess
	window    schemas.Millis
	leader    schemas.Subject // the subject of its incident (itself when it leads)
}

// requesterSide reports whether a completion counter is counted by the
// requester (the side whose work request failed).
func requesterSide(name string) bool {
	return strings.HasPrefix(name, "req_") || strings.HasPrefix(name, "sq_")
}

// groupHold records the port's excess sample and holds the incident it
// belongs to, if it leads one.
func (j *Engine) groupHold(s *processor.Sample, st *Port, em processor.Emitter) {
	t := j.track()
	subject := s.ID.Subject()
	if j.members == nil {
		j.members = map[schemas.Subject]*groupMember{}
	}
	m := j.members[subject]
	if m == nil || st.Since != m.onset {
		m = &groupMember{id: s.ID, onset: st.Since, leader: subject}
		j.members[subject] = m
	}
	m.last = s.Time
	m.window = max(groupWindowMs, 3*schemas.Millis(s.IntervalMs))
	var req, resp, best float64
	for i, c := range j.Primary {
		tot := float64(st.total[i])
		if requesterSide(c.Name) {
			req += tot
		} else {
			resp += tot
		}
		if r := float64(st.rates[i]); r > best {
			best, m.counter = r, c.Name
		}
	}
	m.requester = req > 0 && req >= resp
	m.rate, m.total = st.PrimRate, req+resp

	m.leader = subject
	if !t.IsOpen(subject) {
		m.leader = j.leaderOf(m, s.Time)
	}
	if m.leader != subject {
		// Affected of another port's incident: a pending incident of its
		// own is dropped (opening needs the condition without a break).
		t.Clear(s.Time, subject, "", nil, em)
		return
	}
	f := j.finding(s, st, false)
	f.Affected = j.affectedOf(subject, s.Time)
	if n := len(f.Affected); n > 0 {
		names := make([]string, 0, n)
		for _, a := range f.Affected {
			names = append(names, fmt.Sprintf("%s %s %s/s", a.Node, a.Counter, processor.HumanRate(a.RatePerS)))
		}
		if m.requester {
			f.Summary += fmt.Sprintf("; %d responder(s) count errors of the same requests (%s)", n, strings.Join(names, ", "))
		} else {
			f.Summary += fmt.Sprintf("; no monitored requester shows errors, %d other responder(s) count the same (%s)", n, strings.Join(names, ", "))
		}
	}
	f.Evidence["role"] = map[bool]string{true: "requester", false: "responder"}[m.requester]
	t.Hold(s.Time, f, em)
}

// leaderOf picks the subject of m's incident (see the comment above).
func (j *Engine) leaderOf(m *groupMember, now schemas.Millis) schemas.Subject {
	self := m.id.Subject()
	if m.requester {
		return self
	}
	t := j.track()
	var best *groupMember
	for s, r := range j.members {
		if !r.requester || s == self || !(t.IsOpen(s) || now-r.last <= r.window) || m.onset < r.onset-m.window {
			continue
		}
		if best == nil || absMs(m.onset-r.onset) < absMs(m.onset-best.onset) ||
			absMs(m.onset-r.onset) == absMs(m.onset-best.onset) && s.String() < best.id.Subject().String() {
			best = r
		}
	}
	if best != nil {
		return best.id.Subject()
	}
	// No requester: the responders whose errors began together.
	best = m
	bestOpen := false
	for s, q := range j.members {
		if q.requester || s == self || q.leader != s || absMs(m.onset-q.onset) > m.window || !(t.IsOpen(s) || now-q.last <= q.window) {
			continue
		}
		open := t.IsOpen(s)
		switch {
		case open && !bestOpen, open == bestOpen && (q.avgRate() > best.avgRate() || q.avgRate() == best.avgRate() && s.String() < best.id.Subject().String()):
			best, bestOpen = q, open
		}
	}
	return best.id.Subject()
}

// leadsOpen reports whether an open incident still names s as affected.
func (j *Engine) leadsOpen(s schemas.Subject) bool {
	m, ok := j.members[s]
	return ok && m.leader != s && j.track().IsOpen(m.leader)
}

// affectedOf lists the members whose incident subject leads, sorted.
func (j *Engine) affectedOf(subject schemas.Subject, now schemas.Millis) []schemas.Affected {
	var out []schemas.Affected
	var topo *schemas.Topology
	if j.fabric != nil {
		topo = j.fabric.Topology()
	}
	lead := schemas.PortID{Node: subject.Node, Device: subject.Device, Port: subject.Port}
	for s, q := range j.members {
		if s == subject || q.leader != subject {
			continue
		}
		a := schemas.Affected{Node: q.id.Node, Device: q.id.Device, Port: q.id.Port, FirstSeen: q.onset,
			RatePerS: sig(q.rate), Counter: q.counter}
		if now-q.last > q.window {
			a.RatePerS = 0 // its errors stopped
		}
		if topo != nil {
			if h, ok := topo.Hops(lead, q.id); ok {
				a.Hops = h
			}
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, k int) bool {
		return schemas.Subject{Node: out[i].Node, Device: out[i].Device, Port: out[i].Port}.String() <
			schemas.Subject{Node: out[k].Node, Device: out[k].Device, Port: out[k].Port}.String()
	})
	return out
}

// avgRate is the member's errors per second since its onset: the ports'
// samples of one moment are read apart, so their totals so far are not
// comparable, their rates are.
func (m *groupMember) avgRate() float64 {
	return m.total / max(1, float64(m.last-m.onset)/1000)
}

func absMs(v schemas.Millis) schemas.Millis {
	if v < 0 {
		return -v
	}
	return v
}
