package schemas

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Label is one line of labels format v1: the ground truth of one fault, the
// input of `rdmawatch eval`.
type Label struct {
	Type    string  `json:"type"`
	Start   Millis  `json:"start"`
	End     *Millis `json:"end"` // nil: until the trace ends
	Subject Subject `json:"subject"`
	// Scope is "fabric" for fabric-scope labels, empty otherwise.
	Scope string `json:"scope,omitempty"`
	// Affected lists the nodes a pfc_storm reached.
	Affected []LabelAffected `json:"affected,omitempty"`
	// CriticalAt is when a ber_drift link crosses the critical level.
	CriticalAt *Millis     `json:"critical_at,omitempty"`
	Cause      *LabelCause `json:"cause,omitempty"`
}

// LabelAffected is a node a labelled PFC storm reached.
type LabelAffected struct {
	Node      string `json:"node"`
	FirstSeen Millis `json:"first_seen"`
}

// Fabric reports whether the label is about the whole fabric.
func (l *Label) Fabric() bool { return l.Scope == ScopeFabric || l.Subject.Node == "" }

// ParseLabels reads labels format v1; errors name the line.
func ParseLabels(r io.Reader, name string) ([]Label, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 4<<20)
	var out []Label
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var l Label
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("%s line %d: %v", name, n, err)
		}
		if l.Type == "" {
			return nil, fmt.Errorf("%s line %d: missing \"type\"", name, n)
		}
		if l.Start == 0 {
			return nil, fmt.Errorf("%s line %d: missing \"start\"", name, n)
		}
		if l.End != nil && *l.End < l.Start {
			return nil, fmt.Errorf("%s line %d: end %s before start %s", name, n, *l.End, l.Start)
		}
		if l.Scope != "" && l.Scope != ScopeFabric {
			return nil, fmt.Errorf("%s line %d: scope %q (only %q is written in labels)", name, n, l.Scope, ScopeFabric)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// LoadLabels reads a labels file.
func LoadLabels(path string) ([]Label, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	defer f.Close()
	return ParseLabels(f, path)
}
