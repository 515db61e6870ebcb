package schemas

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Event types, states, severities, scopes and layers, as docs/formats.md names them.
const (
	TypeLinkFlap         = "link_flap"
	TypeCounterSaturated = "counter_saturated"
	TypeBERDrift         = "ber_drift"
	TypePFCStorm         = "pfc_storm"
	TypeCNPECNImbalance  = "cnp_ecn_imbalance"

	StateOpen     = "open"
	StateUpdate   = "update"
	StateResolved = "resolved"

	SeverityWarning  = "warning"
	SeverityCritical = "critical"

	ScopePort   = "port"
	ScopeNode   = "node"
	ScopeFabric = "fabric"

	LayerPhysical    = "physical"
	LayerLinkNetwork = "link_network"
	LayerTransport   = "transport"
	LayerApplication = "application"
)

// TimeLayout is the data-time format of every JSON file: RFC 3339 UTC with
// millisecond precision.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Millis is a data time in unix milliseconds. On msgpack it is an integer; in
// JSON an RFC 3339 UTC string with milliseconds.
type Millis int64

// MillisOf converts a time.
func MillisOf(t time.Time) Millis { return Millis(t.UnixMilli()) }

// Time converts back to a UTC time.
func (m Millis) Time() time.Time { return time.UnixMilli(int64(m)).UTC() }

func (m Millis) String() string { return m.Time().Format(TimeLayout) }

// MarshalJSON writes the RFC 3339 form.
func (m Millis) MarshalJSON() ([]byte, error) {
	return []byte(`"` + m.String() + `"`), nil
}

// UnmarshalJSON reads the RFC 3339 form.
func (m *Millis) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("time: %w", err)
	}
	t, err := ParseTime(s)
	if err != nil {
		return err
	}
	*m = MillisOf(t)
	return nil
}

// ParseTime parses an RFC 3339 time (any sub-second precision) into UTC.
//
// Every time rdmawatch reads it writes back in UTC, so a time whose offset
// moves it out of years 0000-9999 ("0000-01-01T00:00:00+00:10" is year -1
// in UTC) is refused here: accepted, it would be written as text no RFC 3339
// reader, this one included, takes back.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q is not RFC 3339", s)
	}
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, fmt.Errorf("time %q is not RFC 3339 in UTC: year %d is outside 0000-9999", s, y)
	}
	return t, nil
}

// Subject names what an event is about: node, device and port for port
// scope, node only for node scope, nothing for fabric scope.
type Subject struct {
	Node   string `json:"node,omitempty" msgpack:"node,omitempty"`
	Device string `json:"device,omitempty" msgpack:"device,omitempty"`
	Port   int    `json:"port,omitempty" msgpack:"port,omitempty"`
}

func (s Subject) String() string {
	switch {
	case s.Node == "":
		return "fabric"
	case s.Device == "":
		return s.Node
	}
	return fmt.Sprintf("%s/%s/%d", s.Node, s.Device, s.Port)
}

// Origin is the port a PFC storm comes from.
type Origin struct {
	Node   string `json:"node" msgpack:"node"`
	Device string `json:"device" msgpack:"device"`
	Port   int    `json:"port" msgpack:"port"`
	// Silent is true when the origin's own collector stopped reporting.
	Silent bool `json:"silent" msgpack:"silent"`
}

// Affected is a port a PFC storm reached, or a port that shows the
// symptom of another port's fault (completion_errors' responders).
type Affected struct {
	Node          string  `json:"node" msgpack:"node"`
	Device        string  `json:"device" msgpack:"device"`
	Port          int     `json:"port" msgpack:"port"`
	FirstSeen     Millis  `json:"first_seen" msgpack:"first_seen"`
	Hops          int     `json:"hops" msgpack:"hops"`
	PauseFraction float64 `json:"pause_fraction" msgpack:"pause_fraction"`
	// RatePerS and Counter, for the affected ports of an incident that
	// count errors of their own (completion_errors: the responders of a
	// requester whose work requests fail): the port's latest rate per
	// second of its largest counter, and that counter's name.
	RatePerS float64 `json:"rate_per_s,omitempty" msgpack:"rate_per_s,omitempty"`
	Counter  string  `json:"counter,omitempty" msgpack:"counter,omitempty"`
}

// Event is one state change of one incident. Field names are docs/formats.md's.
type Event struct {
	Version    int            `json:"-" msgpack:"v"`
	ID         string         `json:"id" msgpack:"id"`
	Type       string         `json:"type" msgpack:"type"`
	State      string         `json:"state" msgpack:"state"`
	Severity   string         `json:"severity" msgpack:"severity"`
	Scope      string         `json:"scope" msgpack:"scope"`
	Subject    Subject        `json:"subject" msgpack:"subject"`
	Start      Millis         `json:"start" msgpack:"start"`
	DetectedAt Millis         `json:"detected_at" msgpack:"detected_at"`
	End        *Millis        `json:"end" msgpack:"end"`
	Layer      string         `json:"layer" msgpack:"layer"`
	Summary    string         `json:"summary" msgpack:"summary"`
	Evidence   map[string]any `json:"evidence" msgpack:"evidence"`
	NextChecks []string       `json:"next_checks" msgpack:"next_checks"`
	// Checks are the next checks with a note each; NextChecks are their
	// commands (optional: older producers send NextChecks only).
	Checks   []Check    `json:"checks,omitempty" msgpack:"checks,omitempty"`
	Origin   *Origin    `json:"origin,omitempty" msgpack:"origin,omitempty"`
	Affected []Affected `json:"affected,omitempty" msgpack:"affected,omitempty"`
	Cause    *Cause     `json:"cause,omitempty" msgpack:"cause,omitempty"`
	// Revision counts the state changes of the incident from 0 (open); with
	// ID it is the Nats-Msg-Id, so a re-published change is dropped.
	Revision int `json:"revision" msgpack:"rev"`
}

// MsgID is the Nats-Msg-Id of this state change.
func (e *Event) MsgID() string { return fmt.Sprintf("%s#%d", e.ID, e.Revision) }

// EventID builds the deterministic incident id: the same input gives the
// same id on every run.
func EventID(typ string, subject Subject, start Millis) string {
	return fmt.Sprintf("%s/%s/%d", typ, subject.String(), int64(start)/1000)
}

// Validate checks the fields every reader relies on.
func (e *Event) Validate() error {
	var missing []string
	for name, v := range map[string]string{"id": e.ID, "type": e.Type, "state": e.State, "severity": e.Severity, "scope": e.Scope, "layer": e.Layer, "summary": e.Summary} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("event %q: empty %s", e.ID, strings.Join(sorted(missing), ", "))
	}
	switch e.State {
	case StateOpen, StateUpdate, StateResolved:
	default:
		return fmt.Errorf("event %q: state %q", e.ID, e.State)
	}
	switch e.Scope {
	case ScopePort:
		if e.Subject.Node == "" || e.Subject.Device == "" || e.Subject.Port < 1 || e.Subject.Port > MaxPort {
			return fmt.Errorf("event %q: port scope needs node, device and port 1-%d (port %d)", e.ID, MaxPort, e.Subject.Port)
		}
	case ScopeNode:
		if e.Subject.Node == "" {
			return fmt.Errorf("event %q: node scope needs a node", e.ID)
		}
	case ScopeFabric:
	default:
		return fmt.Errorf("event %q: scope %q", e.ID, e.Scope)
	}
	if e.State == StateResolved && e.End == nil {
		return fmt.Errorf("event %q: resolved without end", e.ID)
	}
	return nil
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}

// EncodeEvent encodes an event for the wire.
func EncodeEvent(e *Event) ([]byte, error) {
	e.Version = Version
	return msgpack.Marshal(e)
}

// maxEventElems bounds every list and map of an event on the wire (affected
// ports, next checks, evidence): a storm reaching every port of a large
// fabric is a few thousand entries.
const maxEventElems = 1 << 16

// DecodeEvent decodes and validates an event from the wire.
func DecodeEvent(data []byte) (*Event, error) {
	if err := checkWire(data, maxEventElems); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	var e Event
	if err := msgpack.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	if e.Version < 1 || e.Version > Version {
		return nil, fmt.Errorf("decode event: %w %d", ErrVersion, e.Version)
	}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	return &e, nil
}
