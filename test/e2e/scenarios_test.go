package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// TestScenarioLibrary replays every scenario in test/scenarios through the
// binary and scores it against its labels: every fault found once, nothing
// else raised (healthy scenarios have no labels, so any incident fails).
func TestScenarioLibrary(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "scenarios", "*", "labels.jsonl"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	for _, l := range dirs {
		name := filepath.Base(filepath.Dir(l))
		if _, err := os.Stat(filepath.Join(filepath.Dir(l), "topology.json")); err != nil {
			t.Fatalf("%s has no topology.json", name)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			evs, _ := replay(t, name)
			checkLifecycle(t, incidents(evs))
			rep := checkAgainstLabels(t, name, evs)
			t.Logf("%s: %d labels, %d incidents, precision %.3f recall %.3f", name, rep.All.Labels, rep.All.Incidents, rep.All.Precision, rep.All.Recall)
		})
	}
}
