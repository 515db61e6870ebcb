package main

import (
	"strings"
	"testing"
)

// TestRoleInbox: each role's command connects with the inbox prefix its
// user in deploy/nats/rdmawatch-auth.conf may receive on.
func TestRoleInbox(t *testing.T) {
	for _, tc := range []struct {
		args string
		want string
	}{
		{"collector --node gpu-007", "_INBOX_rdmawatch.collector.gpu-007"},
		{"collector --node gpu-007.pod-a", "_INBOX_rdmawatch.collector.gpu-007%2Epod-a"},
		{"collector --source sim --node gpu-007", "_INBOX_rdmawatch.sim"},
		{"processor", "_INBOX_rdmawatch.processor"},
		{"sink", "_INBOX_rdmawatch.sink"},
		{"alert", "_INBOX_rdmawatch.alert"},
		{"events tail", "_INBOX_rdmawatch.reader"},
	} {
		cmd, rest, err := newRoot().Find(strings.Fields(tc.args))
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		if got := roleInbox(cmd); got != tc.want {
			t.Errorf("rdmawatch %s: inbox %q, want %q", tc.args, got, tc.want)
		}
	}
}
