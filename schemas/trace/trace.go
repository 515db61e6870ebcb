// Package trace is the one owner of the trace format v1 (docs/formats.md): JSON
// Lines, one port reading ("sample") or one collector restart a line, read
// as gzip when the stream is gzip. The reader (replay, eval, the tests) and
// the writer (the simulator) sit side by side so they cannot drift apart.
package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// ErrMalformed wraps every error about a malformed trace; the message
// names the file and the line.
var ErrMalformed = errors.New("malformed trace")

// Line kinds.
const (
	KindSample           = "sample"
	KindCollectorRestart = "collector_restart"
)

// Line is one line as read, format v1.
type Line struct {
	Kind       string            `json:"kind"`
	TS         string            `json:"ts"`
	Node       string            `json:"node"`
	Device     string            `json:"device,omitempty"`
	Port       int               `json:"port,omitempty"`
	Netdev     string            `json:"netdev,omitempty"`
	LinkLayer  string            `json:"link_layer,omitempty"`
	State      string            `json:"state,omitempty"`
	Rate       string            `json:"rate,omitempty"`
	Counters   map[string]uint64 `json:"counters,omitempty"`
	HWCounters map[string]uint64 `json:"hw_counters,omitempty"`
	Ethtool    map[string]uint64 `json:"ethtool,omitempty"`
	// Config is the port's settings as read with the sample (optional, a
	// sample line's only); a key it lacks is unknown, never "off".
	Config *schemas.PortConfig `json:"config,omitempty"`

	time time.Time
}

// Time is the parsed ts.
func (l *Line) Time() time.Time { return l.time }

// Parse parses and validates one line. The error says what is wrong, not
// where: the Reader adds the file and line number.
func Parse(data []byte) (*Line, error) {
	var l Line
	// Unmarshal checks the line holds exactly one JSON value, and skips the
	// Decoder's own buffering: this is replay's hottest loop.
	if err := json.Unmarshal(data, &l); err != nil {
		if strings.Contains(err.Error(), "after top-level value") {
			return nil, errors.New("more than one JSON value on the line")
		}
		return nil, fmt.Errorf("not a JSON object of trace format v1: %v", err)
	}
	if l.TS == "" {
		return nil, errors.New(`missing "ts"`)
	}
	t, err := schemas.ParseTime(l.TS)
	if err != nil {
		return nil, fmt.Errorf(`"ts": %v`, err)
	}
	l.time = t
	hasCounters := l.Counters != nil || l.HWCounters != nil || l.Ethtool != nil
	if err := check(l.Kind, l.Node, l.Device, l.Port, hasCounters); err != nil {
		return nil, err
	}
	if l.Kind != KindSample {
		// A restart has no port to describe: dropped, as an unknown key is.
		l.Config = nil
	}
	if err := l.Config.Validate(); err != nil {
		return nil, fmt.Errorf(`"config": %v`, err)
	}
	return &l, nil
}

// check holds the rules the reader enforces and the writer keeps: what one
// writes, the other reads.
func check(kind, node, device string, port int, hasCounters bool) error {
	if node == "" {
		return errors.New(`missing "node"`)
	}
	switch kind {
	case KindCollectorRestart:
	case KindSample:
		if device == "" {
			return errors.New(`sample without "device"`)
		}
		if port < 1 || port > schemas.MaxPort {
			// Stored as UInt16: a larger number would become another port.
			return fmt.Errorf(`sample "port" %d: want 1-%d`, port, schemas.MaxPort)
		}
		if !hasCounters {
			return errors.New(`sample without "counters", "hw_counters" or "ethtool"`)
		}
	case "":
		return errors.New(`missing "kind"`)
	default:
		return fmt.Errorf(`unknown "kind" %q (want %q or %q)`, kind, KindSample, KindCollectorRestart)
	}
	return nil
}

// ToRecord turns a line read into the form a writer takes; the counters are
// sorted by name (a map keeps no order).
func ToRecord(l *Line) *Record {
	return &Record{Kind: l.Kind, Time: l.time, Node: l.Node, Device: l.Device, Port: l.Port, Netdev: l.Netdev,
		LinkLayer: l.LinkLayer, State: l.State, Rate: l.Rate,
		Counters: counterList(l.Counters), HWCounters: counterList(l.HWCounters), Ethtool: counterList(l.Ethtool),
		Config: l.Config}
}

func counterList(m map[string]uint64) []Counter {
	if m == nil {
		return nil
	}
	cs := make([]Counter, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		cs = append(cs, Counter{Name: name, Value: m[name]})
	}
	return cs
}
