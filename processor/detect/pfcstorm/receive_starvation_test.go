package pfcstorm

import (
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/processor/detect/receivestarvation"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestStormOriginStarvation runs the storm of TestPFCStorm with the origin
// dropping what it cannot drain (out_of_buffer), on each kind of pause
// counter: drops that begin with the port's own pause storm are the
// storm's evidence, not a receive_starvation of its own, whether the port
// pauses per priority or with 802.3x global pause; a receiver that starved
// before it began pausing is its own incident and the storm's cause.
func TestStormOriginStarvation(t *testing.T) {
	const iv = 5 * time.Second
	const from, to, n = 20, 60, 90
	tests := []struct {
		name string
		// starveFrom: the interval host-a starts dropping.
		starveFrom int
		wantStarve bool
	}{
		{"drops begin with the storm: the storm's, no starvation", from, false},
		{"a starving receiver before the storm: its own incident, the storm's cause", from - 10, true},
	}
	for _, tt := range tests {
		for _, names := range namings {
			t.Run(names.name+"/"+tt.name, func(t *testing.T) {
				r := newPFCRig(t, iv)
				r.pauseNames = names.counters
				r.withDetectors(receivestarvation.New())
				storm := stormPlan(from, to, -1, false, -1)
				r.run(iv, n, func(h string, k int) reading {
					rd := storm(h, k)
					if h == "host-a" && k >= tt.starveFrom && k < to {
						rd.oobPerS = 5000
					}
					return rd
				})
				var starve, storms []*schemas.Event
				for _, ev := range r.events {
					switch ev.Type {
					case schemas.TypeReceiveStarvation:
						starve = append(starve, ev)
					case schemas.TypePFCStorm:
						storms = append(storms, ev)
					}
				}
				for _, l := range summaries(r.events) {
					t.Log(l)
				}
				// The storm is found as without the drops: origin host-a,
				// its victims affected.
				stormRig := &rig{events: storms}
				testPFCStormIncident(t, stormRig, iv, from, 2, false, []string{"host-b", "host-c"})
				if !tt.wantStarve {
					if len(starve) != 0 {
						t.Errorf("the storm's origin is also a receive_starvation: %v", summaries(starve))
					}
					for _, ev := range storms {
						if ev.Cause != nil {
							t.Errorf("storm with a cause %+v", ev.Cause)
						}
					}
					return
				}
				if len(starve) == 0 || starve[0].State != schemas.StateOpen || starve[0].Subject != portOf("host-a").Subject() {
					t.Fatalf("no receive_starvation on host-a: %v", summaries(starve))
				}
				opens := 0
				for _, ev := range starve {
					if ev.State == schemas.StateOpen {
						opens++
					}
				}
				if opens != 1 {
					t.Errorf("%d receive_starvation opens, want 1", opens)
				}
				linked := false
				for _, ev := range storms {
					if ev.Cause != nil {
						linked = true
						if ev.Cause.Type != schemas.TypeReceiveStarvation || ev.Cause.ID != starve[0].ID {
							t.Errorf("storm cause %+v, want %s", ev.Cause, starve[0].ID)
						}
					}
				}
				if !linked {
					t.Error("the storm does not name the starving receiver as its cause")
				}
			})
		}
	}
}
