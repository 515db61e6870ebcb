package natsutil

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

// TestSecretFileReadableWarns: a seed file group or others can read is
// used, with one WARN naming the file however often the options are built
// (a role retries its first connection); a 0600 file says nothing.
func TestSecretFileReadableWarns(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		mode  os.FileMode
		warns int
	}{
		{name: "0600", mode: 0o600, warns: 0},
		{name: "0400", mode: 0o400, warns: 0},
		{name: "0640 group", mode: 0o640, warns: 1},
		{name: "0644 world", mode: 0o644, warns: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "user.nk")
			if err := os.WriteFile(path, seed, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			o := ConnectOptions{URL: "nats://127.0.0.1:1", NKey: path, Log: slog.New(slog.NewTextHandler(&logs, nil))}
			for range 3 {
				if _, err := o.natsOptions(); err != nil {
					t.Fatalf("natsOptions: %v", err)
				}
			}
			if n := strings.Count(logs.String(), "level=WARN"); n != tc.warns {
				t.Fatalf("%d warnings, want %d:\n%s", n, tc.warns, logs.String())
			}
			if tc.warns > 0 && (!strings.Contains(logs.String(), path) || !strings.Contains(logs.String(), "nats nkey seed file is accessible by group or others")) {
				t.Errorf("the warning does not name the file:\n%s", logs.String())
			}
		})
	}
}
