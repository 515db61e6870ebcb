package sim

import (
	"bytes"
	"compress/gzip"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// go test ./sim -run TestScenarios -update rewrites test/scenarios.
var update = flag.Bool("update", false, "rewrite the checked-in scenarios under test/scenarios")

const scenarioDir = "../test/scenarios"

// The checked-in scenarios are exactly what the generator writes today.
func TestScenarios(t *testing.T) {
	wantLabels := map[string]map[string]int{
		"example-fleet":       {schemas.TypeLinkFlap: 1, schemas.TypeCounterSaturated: 1},
		"healthy-noisy":       {},
		"flap-and-saturation": {schemas.TypeLinkFlap: 1, schemas.TypeCounterSaturated: 1},
	}
	for _, s := range Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			dir := filepath.Join(scenarioDir, s.Name)
			if *update {
				if _, err := WriteFiles(s.Config, dir, s.Gzip); err != nil {
					t.Fatal(err)
				}
			}
			files, sum, err := Files(s.Config, s.Gzip)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range files {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatalf("%v (run go test ./sim -run TestScenarios -update)", err)
				}
				if len(got) > 2_200_000 {
					t.Errorf("%s is %d bytes: keep checked-in traces small", name, len(got))
				}
				if strings.HasSuffix(name, ".gz") {
					// Compare the content: gzip's bytes may change with the Go release.
					got, want = gunzip(t, got), gunzip(t, want)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s/%s differs from the generator (run go test ./sim -run TestScenarios -update)", dir, name)
				}
			}
			count, lines := map[string]int{}, 0
			for _, l := range strings.Split(string(files["labels.jsonl"]), "\n") {
				for _, typ := range []string{schemas.TypeLinkFlap, schemas.TypeCounterSaturated} {
					if strings.Contains(l, `"type":"`+typ+`"`) {
						count[typ]++
					}
				}
				if l != "" {
					lines++
				}
			}
			if len(count) != len(wantLabels[s.Name]) || sum.Labels != lines {
				t.Errorf("labels %v (summary says %d, file has %d lines), want %v", count, sum.Labels, lines, wantLabels[s.Name])
			}
			for typ, n := range wantLabels[s.Name] {
				if count[typ] != n {
					t.Errorf("%d %s labels, want %d", count[typ], typ, n)
				}
			}
		})
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
