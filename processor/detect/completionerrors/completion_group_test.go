package completionerrors

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/processor/internal/detecttest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestCompletionErrorsGroup: one application fault is one incident, the
// requester its subject and the responders that count the same errors at
// the same moment its affected ports.
func TestCompletionErrorsGroup(t *testing.T) {
	req := detecttest.PortA
	resp := make([]schemas.PortID, 4)
	for i := range resp {
		resp[i] = schemas.PortID{Node: fmt.Sprintf("host-r%d", i), Device: "mlx5_0", Port: 1}
	}
	// counters per 5 s of the requester and each responder during the fault
	badRkeyReq := []any{"req_remote_access_errors", 60, "req_cqe_error", 60, "req_cqe_flush_error", 480}
	badRkeyResp := func(i int) []any { return []any{"resp_remote_access_errors", 10 + 5*i} }
	cases := []struct {
		name string
		// kv is what port i (0: the requester, 1-4 the responders)
		// counts in the fault; nil: not monitored.
		kv           func(i int, sec float64) []any
		monitored    func(i int) bool
		wantSubject  schemas.PortID
		wantAffected []string
		incidents    int
	}{
		{
			name: "bad rkey: the requester and four responders are one incident",
			kv: func(i int, sec float64) []any {
				if i == 0 {
					return badRkeyReq
				}
				return badRkeyResp(i - 1)
			},
			wantSubject: req, wantAffected: []string{"host-r0", "host-r1", "host-r2", "host-r3"}, incidents: 1,
		},
		{
			name: "responders first by a sample: still the requester's incident",
			kv: func(i int, sec float64) []any {
				if i == 0 {
					if sec < 605 {
						return nil
					}
					return badRkeyReq
				}
				return badRkeyResp(i - 1)
			},
			wantSubject: req, wantAffected: []string{"host-r0", "host-r1", "host-r2", "host-r3"}, incidents: 1,
		},
		{
			name: "responder-only: the requester is not monitored; one incident names the responders",
			kv: func(i int, sec float64) []any {
				if i == 0 {
					return nil
				}
				return []any{"resp_local_length_error", 10 + 5*i, "resp_cqe_error", 10 + 5*i}
			},
			monitored:   func(i int) bool { return i != 0 },
			wantSubject: resp[3], wantAffected: []string{"host-r0", "host-r1", "host-r2"}, incidents: 1,
		},
		{
			name: "a requester alone",
			kv: func(i int, sec float64) []any {
				if i == 0 {
					return badRkeyReq
				}
				return nil
			},
			wantSubject: req, incidents: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := detecttest.NewHarness(t, New())
			ports := append([]schemas.PortID{req}, resp...)
			for sec := 0.0; sec < 1500; sec += 5 {
				for i, id := range ports {
					if c.monitored != nil && !c.monitored(i) {
						continue
					}
					var kv []any
					if sec >= 600 && sec < 900 {
						kv = c.kv(i, sec)
					}
					// the responders' samples are read up to 4 s later
					h.Feed(detecttest.Sample(id, sec+float64(len(ports)-i-1), "ACTIVE", detecttest.Traffic(1_000_000, kv...)...))
				}
			}
			opens := map[string]*schemas.Event{}
			affected := map[string]bool{}
			var last *schemas.Event
			for _, ev := range h.Events {
				if ev.State == schemas.StateOpen {
					opens[ev.ID] = ev
				}
				for _, a := range ev.Affected {
					affected[a.Node] = true
					if a.Counter == "" || a.FirstSeen == 0 {
						t.Errorf("affected %+v lacks its counter or onset", a)
					}
				}
				last = ev
			}
			if len(opens) != c.incidents {
				for _, ev := range h.Events {
					t.Logf("%s %s %s %v", ev.State, ev.Subject, ev.Summary, ev.Affected)
				}
				t.Fatalf("%d incidents, want %d", len(opens), c.incidents)
			}
			for _, o := range opens {
				if o.Subject != c.wantSubject.Subject() {
					t.Errorf("subject %s, want %s", o.Subject, c.wantSubject)
				}
			}
			var got []string
			for n := range affected {
				got = append(got, n)
			}
			if len(got) != len(c.wantAffected) {
				t.Errorf("affected %v, want %v", got, c.wantAffected)
			}
			for _, n := range c.wantAffected {
				if !affected[n] {
					t.Errorf("affected %v lack %s", got, n)
				}
			}
			if last.State != schemas.StateResolved {
				t.Errorf("last state %s, want resolved", last.State)
			}
			if len(c.wantAffected) > 0 {
				for _, ev := range h.Events {
					if ev.State != schemas.StateResolved && len(ev.Affected) == len(c.wantAffected) && ev.Affected[0].RatePerS > 0 {
						if !strings.Contains(ev.Summary, "count") {
							t.Errorf("summary %q does not name the responders", ev.Summary)
						}
						return
					}
				}
				for _, ev := range h.Events {
					t.Logf("%s %s %s %v", ev.State, ev.Subject, ev.Summary, ev.Affected)
				}
				t.Errorf("no event lists every affected responder with its rate")
			}
		})
	}
}
