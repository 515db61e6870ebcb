package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A filter flag the query does not read is refused by name before anything
// connects (the --clickhouse address has nothing listening); one it reads
// gets as far as the connection.
func TestQueryRefusesFlagsItDoesNotTake(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" = no refusal: fails later, connecting
	}{
		{[]string{"storm_spread", "--type", "ber_drift"}, "query storm_spread does not take --type (it takes --from, --to, --node, --event)"},
		{[]string{"cnp_balance", "--limit", "3"}, "query cnp_balance does not take --limit"},
		{[]string{"leaf_capacity", "--device", "mlx5_0", "--port", "1"}, "does not take --device, --port"},
		{[]string{"events", "--limit", "3", "--severity", "critical"}, "query events does not take --limit ("},
		{[]string{"saturation_flaps", "--limit", "3"}, ""},
		{[]string{"ber_trend", "--limit", "3", "--node", "gpu-1"}, ""},
		{[]string{"events", "--type", "ber_drift", "--state", "open"}, ""},
		{[]string{"causes", "--layer", "physical"}, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			root := newRoot()
			root.SetArgs(append(append([]string{"query"}, tc.args...), "--clickhouse", "clickhouse://127.0.0.1:1/default", "--from", "1h"))
			root.SetOut(new(strings.Builder))
			root.SetErr(new(strings.Builder))
			err := root.ExecuteContext(ctx)
			switch {
			case err == nil:
				t.Fatal("no error (nothing listens on the --clickhouse address)")
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("%v, want %q", err, tc.want)
			case tc.want == "" && strings.Contains(err.Error(), "does not take"):
				t.Fatalf("refused a flag the query reads: %v", err)
			}
		})
	}
}
