package schemas

import (
	"os"
	"strings"
	"testing"
)

func TestParseLabels(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
		n                 int
	}{
		{"storm", `{"type":"pfc_storm","start":"2026-03-14T00:00:06.000Z","end":null,"subject":{"node":"host-a","device":"mlx5_0","port":1},"affected":[{"node":"host-b","first_seen":"2026-03-14T00:00:10.030Z"}]}`, "", 1},
		{"fabric", `{"type":"cnp_ecn_imbalance","start":"2026-03-14T00:00:06Z","end":"2026-03-14T00:10:00Z","subject":{},"scope":"fabric"}` + "\n\n", "", 1},
		{"ber", `{"type":"ber_drift","start":"2026-03-14T00:00:06Z","end":null,"subject":{"node":"a","device":"mlx5_0","port":1},"critical_at":"2026-03-14T00:40:00Z"}`, "", 1},
		{"not json", `{"type":`, "line 1", 0},
		{"no type", `{"start":"2026-03-14T00:00:06Z"}`, "missing \"type\"", 0},
		{"bad time", `{"type":"x","start":"soon"}`, "line 1", 0},
		{"end before start", `{"type":"x","start":"2026-03-14T00:00:06Z","end":"2026-03-14T00:00:05Z"}`, "before start", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ls, err := ParseLabels(strings.NewReader(tc.in), "l.jsonl")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(ls) != tc.n {
				t.Fatalf("%d labels, err %v", len(ls), err)
			}
		})
	}
	ls, _ := ParseLabels(strings.NewReader(tests[0].in), "x")
	if ls[0].End != nil || ls[0].Affected[0].Node != "host-b" || ls[0].Fabric() {
		t.Errorf("parsed %+v", ls[0])
	}
}

func FuzzParseLabels(f *testing.F) {
	if data, err := os.ReadFile("../test/fixtures/examples/labels.jsonl"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`{"type":"x","start":"2026-03-14T00:00:06Z","end":null,"subject":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ls, err := ParseLabels(strings.NewReader(string(data)), "fuzz")
		if err != nil {
			return
		}
		for _, l := range ls {
			if l.Type == "" || l.Start == 0 || (l.End != nil && *l.End < l.Start) {
				t.Fatalf("accepted invalid label %+v", l)
			}
		}
	})
}
