package natsutil

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

var update = flag.Bool("update", false, "rewrite deploy/nats/*.json from the code")

// TestDeployStreamConfigsMatchCode keeps deploy/nats/*.json (for
// `nats stream add --config FILE`) equal to what the code creates.
func TestDeployStreamConfigsMatchCode(t *testing.T) {
	for _, cfg := range schemas.Streams(schemas.StreamOptions{}) {
		want, err := json.MarshalIndent(cfg, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		path := filepath.Join("..", "..", "deploy", "nats", strings.ToLower(cfg.Name)+".json")
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run: go test ./internal/natsutil -run DeployStream -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from schemas.%s config; run: go test ./internal/natsutil -run DeployStream -update", path, cfg.Name)
		}
	}
}
