package altgen_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmawatch/rdmawatch/internal/eval"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestRegressions replays the cases the sweep once failed on (cut out of
// altgen traces by testdata/trim.py, see testdata/README.md) and requires
// every label found once, nothing else raised (a case without labels is a
// healthy one: any incident fails it), and every storm's affected
// nodes right (affected-F1 at least minAffectedF1 each).
func TestRegressions(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "*", "labels.jsonl"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no regression cases under testdata: %v", err)
	}
	const minAffectedF1 = 0.85
	for _, l := range dirs {
		dir := filepath.Dir(l)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			evs, labels, _, err := replayDir(t.Context(), dir)
			if err != nil {
				t.Fatal(err)
			}
			iv, err := eval.TraceInterval(traceOf(t, dir))
			if err != nil {
				t.Fatal(err)
			}
			var sum eval.Sum
			rep := sum.Add(filepath.Base(dir), evs, labels, eval.Options{Interval: iv})
			for _, m := range rep.Misses {
				t.Errorf("missed %s %s from %s", m.Label.Type, m.Label.Subject, m.Label.Start)
			}
			for _, fa := range rep.FalseAlarms {
				t.Errorf("false alarm (fragment %v): %s %s: %s", fa.Fragment, fa.Incident.Type, fa.Incident.Subject, fa.Incident.Summary)
			}
			for _, in := range eval.Incidents(evs) {
				if in.Type != schemas.TypePFCStorm {
					continue
				}
				for i := range labels {
					if eval.Matches(in, &labels[i], iv) {
						if f := eval.AffectedF1(in, &labels[i]); f < minAffectedF1 {
							t.Errorf("pfc_storm %s: affected-F1 %.3f < %.2f: got %v, want %v", in.Subject, f, minAffectedF1, in.AffectedNodes, labels[i].Affected)
						}
					}
				}
			}
		})
	}
}

func traceOf(t *testing.T, dir string) string {
	for _, n := range []string{"trace.jsonl.gz", "trace.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return filepath.Join(dir, n)
		}
	}
	t.Fatalf("%s has no trace", dir)
	return ""
}
