package eval

import (
	"fmt"
	"io"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// CauseScore is the cause accuracy of docs/formats.md: of the matched labels that name
// a cause, the share whose incident's cause names an incident of that type
// on that node.
type CauseScore struct {
	CauseLabels   int     `json:"cause_labels"`
	CauseRight    int     `json:"cause_right"`
	CauseAccuracy float64 `json:"cause_accuracy"`
}

// scoreCause counts one matched label.
func (c *CauseScore) scoreCause(in *Incident, l *schemas.Label) {
	if l.Cause == nil {
		return
	}
	c.CauseLabels++
	if in.Cause != nil && in.Cause.Type == l.Cause.Type && in.Cause.Subject.Node == l.Cause.Subject.Node {
		c.CauseRight++
	}
}

func (c *CauseScore) add(o CauseScore) {
	c.CauseLabels += o.CauseLabels
	c.CauseRight += o.CauseRight
}

func (c *CauseScore) finishCause() {
	c.CauseAccuracy = 1
	if c.CauseLabels > 0 {
		c.CauseAccuracy = float64(c.CauseRight) / float64(c.CauseLabels)
	}
}

// writeCauses prints the cause accuracy of the types whose labels name
// causes.
func (rep *Report) writeCauses(w io.Writer) {
	for _, r := range append(rep.Types, rep.All) {
		if r.CauseLabels > 0 {
			fmt.Fprintf(w, "cause accuracy %-20s %d/%d = %.3f\n", r.Type, r.CauseRight, r.CauseLabels, r.CauseAccuracy)
		}
	}
}

// lastCause is the cause an incident's events named last.
func lastCause(prev *schemas.Cause, ev *schemas.Event) *schemas.Cause {
	if ev.Cause != nil {
		return ev.Cause
	}
	return prev
}
