package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The processor's flags are checked before it connects anywhere: a wrong
// command line fails at once, with no NATS to wait for (the --nats address
// below has nothing listening, and ConnectWait would wait for it).
func TestProcessorFlagsCheckedBeforeConnecting(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"instance past instances", []string{"--instance", "2", "--instances", "2"}, "--instance 2 of --instances 2"},
		{"no instances", []string{"--instances", "0"}, "want 0 <= instance < instances"},
		{"negative instance", []string{"--instance", "-1"}, "want 0 <= instance < instances"},
		{"group with instance", []string{"--group", "g", "--instance", "0"}, "--group shares the partitions"},
		{"group with instances", []string{"--group", "g", "--instances", "3"}, "drop --instance and --instances"},
		{"missing topology", []string{"--topology", "/nonexistent/topology.json"}, "/nonexistent/topology.json"},
		{"unknown detector setting", []string{"--config", writeConfig(t, "processor:\n  detectors:\n    link_flap:\n      stable_aftr: 2m\n")}, "unknown detector setting: link_flap.stable_aftr"},
		{"NaN detector setting", []string{"--config", writeConfig(t, "processor:\n  detectors:\n    cnp_ecn_imbalance:\n      min_marked: NaN\n")}, "cnp_ecn_imbalance.min_marked"},
		{"malformed --nats", []string{"--nats", "htp:/foo"}, `--nats "htp:/foo": scheme "htp"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			root := newRoot()
			root.SetArgs(append([]string{"processor", "--nats", "nats://127.0.0.1:1"}, tc.args...))
			root.SetOut(new(strings.Builder))
			err := root.ExecuteContext(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("processor %v: %v, want an error with %q", tc.args, err, tc.want)
			}
			if ctx.Err() != nil {
				t.Fatalf("processor %v waited for NATS instead of refusing its flags", tc.args)
			}
		})
	}
}
