package sim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Fault is a kind of trouble injected into the fleet, a small value in
// Config.Faults. Start checks it against the fabric and returns its state for
// one run, so a Config can be generated any number of times.
type Fault interface {
	Start(l *Layout) (Effect, error)
}

// Effect is a running fault. For every reading of one of its Ports, the fleet
// calls Apply before the traffic model advances the port (to take the link
// down, scale traffic or BER, add error counts) and Observe afterwards, on the
// port exactly as the reading shows it (to time the labels).
type Effect interface {
	Ports() []PortRef
	Apply(t *Tick)
	Observe(t *Tick)
	// Labels is the ground truth so far; a label still open has a nil End.
	Labels() []Label
}

// Tick is one reading of one port: the window since its previous reading and
// the knobs the traffic model reads. Faults change the knobs and the port.
type Tick struct {
	// Prev is the previous reading's time, Now this one's.
	Prev, Now time.Time
	// First is set on the port's first reading of the run.
	First bool
	Port  *PortState
	Rand  *rand.Rand
	// UpFraction is the share of the window the link was up.
	UpFraction float64
	// UtilScale multiplies the traffic (1 = as usual).
	UtilScale float64
	// BERScale multiplies the pre-FEC bit error rate (1 = as usual).
	BERScale float64
	// CNPScale multiplies the share of ECN-marked packets the port answers
	// with a CNP (1 = as usual, 0 = congestion control is off).
	CNPScale float64
	// State is the sysfs state the reading shows.
	State string
	// Config is the port's configuration the reading shows (nil: none;
	// misconfig.go), shared: a fault changes a copy.
	Config *schemas.PortConfig
}

// Seconds is the window's length.
func (t *Tick) Seconds() float64 { return t.Now.Sub(t.Prev).Seconds() }

// Overlap is the part of the window inside [from, to), in seconds.
func (t *Tick) Overlap(from, to time.Time) float64 {
	a, b := t.Prev, t.Now
	if from.After(a) {
		a = from
	}
	if to.Before(b) {
		b = to
	}
	if !b.After(a) {
		return 0
	}
	return b.Sub(a).Seconds()
}

// Within reports whether instant x falls in the window (Prev, Now].
func (t *Tick) Within(x time.Time) bool { return x.After(t.Prev) && !x.After(t.Now) }

// Label is one line of labels format v1 (docs/formats.md).
type Label struct {
	Type       string          `json:"type"`
	Start      schemas.Millis  `json:"start"`
	End        *schemas.Millis `json:"end"`
	Subject    schemas.Subject `json:"subject"`
	Scope      string          `json:"scope,omitempty"`
	Affected   []LabelAffected `json:"affected,omitempty"`
	CriticalAt *schemas.Millis `json:"critical_at,omitempty"`
	// Cause is the root-cause incident that explains this one, when a
	// fault makes one (docs/formats.md, labels: `cause`).
	Cause *schemas.LabelCause `json:"cause,omitempty"`
}

// LabelAffected is a node a PFC storm reached.
type LabelAffected struct {
	Node      string         `json:"node"`
	FirstSeen schemas.Millis `json:"first_seen"`
}

func portSubject(r PortRef) schemas.Subject {
	return schemas.Subject{Node: r.Node, Device: r.Device, Port: r.Port}
}

func millisPtr(t time.Time) *schemas.Millis {
	m := schemas.MillisOf(t)
	return &m
}

func sortLabels(ls []Label) {
	sort.SliceStable(ls, func(i, j int) bool {
		if ls[i].Start != ls[j].Start {
			return ls[i].Start < ls[j].Start
		}
		if ls[i].Type != ls[j].Type {
			return ls[i].Type < ls[j].Type
		}
		return ls[i].Subject.String() < ls[j].Subject.String()
	})
}

// checkWindow reports an error when t is outside the trace.
func checkWindow(l *Layout, what string, t time.Time) error {
	if t.Before(l.Start) || !t.Before(l.End) {
		return fmt.Errorf("%s %s is outside the trace [%s, %s)", what, t.UTC().Format(schemas.TimeLayout),
			l.Start.Format(schemas.TimeLayout), l.End.Format(schemas.TimeLayout))
	}
	return nil
}
