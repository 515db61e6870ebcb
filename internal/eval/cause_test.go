package eval

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestCauseAccuracy(t *testing.T) {
	t0 := schemas.MillisOf(time.Date(2026, 5, 2, 6, 0, 0, 0, time.UTC))
	origin := schemas.Subject{Node: "r01n02", Device: "mlx5_0", Port: 1}
	victim := schemas.Subject{Node: "r02n01", Device: "mlx5_0", Port: 1}
	starve := &schemas.Cause{ID: "receive_starvation/r01n02/mlx5_0/1/1", Type: schemas.TypeReceiveStarvation, Subject: origin}
	ev := func(typ string, s schemas.Subject, state string, c *schemas.Cause) schemas.Event {
		return schemas.Event{ID: typ + "/" + s.String(), Type: typ, State: state, Scope: "port", Subject: s, Start: t0 + 60_000, DetectedAt: t0 + 90_000, Cause: c}
	}
	label := func(typ string, s schemas.Subject, c *schemas.LabelCause) schemas.Label {
		return schemas.Label{Type: typ, Start: t0 + 60_000, Subject: s, Cause: c}
	}
	cases := []struct {
		name   string
		events []schemas.Event
		labels []schemas.Label
		want   CauseScore
	}{
		{"a cause named in an update counts",
			[]schemas.Event{ev("pfc_storm", origin, "open", nil), ev("pfc_storm", origin, "update", starve)},
			[]schemas.Label{label("pfc_storm", origin, &schemas.LabelCause{Type: schemas.TypeReceiveStarvation, Subject: origin})},
			CauseScore{1, 1, 1}},
		{"no cause named",
			[]schemas.Event{ev("pfc_storm", origin, "open", nil)},
			[]schemas.Label{label("pfc_storm", origin, &schemas.LabelCause{Type: schemas.TypeReceiveStarvation, Subject: origin})},
			CauseScore{1, 0, 0}},
		{"a cause on the wrong node",
			[]schemas.Event{ev("retransmissions", victim, "open", starve)},
			[]schemas.Label{label("retransmissions", victim, &schemas.LabelCause{Type: schemas.TypeReceiveStarvation, Subject: victim})},
			CauseScore{1, 0, 0}},
		{"labels without a cause do not count",
			[]schemas.Event{ev("pfc_storm", origin, "open", starve)},
			[]schemas.Label{label("pfc_storm", origin, nil)},
			CauseScore{0, 0, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := Evaluate(c.events, c.labels, Options{Interval: 5 * time.Second})
			if rep.All.CauseScore != c.want {
				t.Fatalf("cause score %+v, want %+v", rep.All.CauseScore, c.want)
			}
			var b bytes.Buffer
			rep.WriteText(&b)
			if c.want.CauseLabels > 0 && !strings.Contains(b.String(), "cause accuracy") {
				t.Errorf("text report lacks the cause accuracy:\n%s", b.String())
			}
		})
	}
}
