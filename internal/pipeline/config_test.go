package pipeline

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestConfigMismatchAcrossInstances replays the misconfig scenario (config
// on the trace lines, through the inventory) with one processor, again,
// and with three that each own a share of the partitions but read every
// node's configuration: the same events twice over, the same
// config_mismatch incidents and revisions with three instances (decided
// at each instance's own watermark), none twice, and the cnp_ecn_imbalance
// the ECN settings cause naming them.
func TestConfigMismatchAcrossInstances(t *testing.T) {
	const dir = "../../test/scenarios/misconfig/"
	topo, err := schemas.LoadTopology(dir + "topology.json")
	if err != nil {
		t.Fatal(err)
	}
	var runs [][]string
	var first bytes.Buffer
	for i, procs := range []int{1, 1, 3} {
		var out bytes.Buffer
		if _, err := Run(t.Context(), Config{Log: quiet, Source: traceSource(t, dir+"trace.jsonl.gz"), Topology: topo,
			EventsOut: &out, Processors: procs}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = out
		} else if i == 1 && !bytes.Equal(first.Bytes(), out.Bytes()) {
			t.Error("two replays of the same trace wrote different events")
		}
		var got []string
		opened := map[string]int{}
		for _, ev := range eventLines(t, out.Bytes()) {
			switch {
			case ev.Type == "config_mismatch":
				got = append(got, fmt.Sprintf("%s %s r%d", ev.ID, ev.State, ev.Revision))
				if ev.State == schemas.StateOpen {
					opened[ev.Subject.Node]++
				}
			case ev.Type == schemas.TypeCNPECNImbalance && ev.Cause != nil:
				got = append(got, fmt.Sprintf("%s caused by %s", ev.ID, ev.Cause.ID))
			}
		}
		slices.Sort(got)
		got = slices.Compact(got)
		for node, n := range opened {
			if n != 1 {
				t.Errorf("%d processors: %d config_mismatch incidents on %s", procs, n, node)
			}
		}
		if len(opened) != 4 {
			t.Errorf("%d processors: config_mismatch on %v, want the 4 misconfigured ports", procs, opened)
		}
		runs = append(runs, got)
	}
	if !slices.Equal(runs[0], runs[2]) {
		t.Errorf("one processor:\n%q\nthree:\n%q", runs[0], runs[2])
	}
	causes := 0
	for _, s := range runs[0] {
		if bytes.Contains([]byte(s), []byte("caused by config_mismatch/")) {
			causes++
		}
	}
	if causes < 2 {
		t.Errorf("%d cnp_ecn_imbalance revisions name a config_mismatch, want both incidents: %q", causes, runs[0])
	}
}
