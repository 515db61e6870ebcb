package natsutil

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

func TestInboxPrefix(t *testing.T) {
	tests := []struct {
		role, node, want string
	}{
		{RoleProcessor, "", "_INBOX_rdmawatch.processor"},
		{RoleSink, "ignored", "_INBOX_rdmawatch.sink"},
		{RoleAlert, "", "_INBOX_rdmawatch.alert"},
		{RoleSim, "", "_INBOX_rdmawatch.sim"},
		{RoleReader, "", "_INBOX_rdmawatch.reader"},
		{RoleAdmin, "", "_INBOX_rdmawatch.admin"},
		{RoleCollector, "gpu-001", "_INBOX_rdmawatch.collector.gpu-001"},
		// The node is one token, encoded as in its subjects: a dotted or
		// wildcard host name cannot reach into another node's inbox.
		{RoleCollector, "gpu-017.pod-a", "_INBOX_rdmawatch.collector.gpu-017%2Epod-a"},
		{RoleCollector, "*", "_INBOX_rdmawatch.collector.%2A"},
		{RoleCollector, ">", "_INBOX_rdmawatch.collector.%3E"},
		{RoleCollector, "", "_INBOX_rdmawatch.collector._"},
	}
	for _, tt := range tests {
		got := InboxPrefix(tt.role, tt.node)
		if got != tt.want {
			t.Errorf("InboxPrefix(%q, %q) = %q, want %q", tt.role, tt.node, got, tt.want)
		}
		if err := checkInboxPrefix(got); err != nil {
			t.Errorf("InboxPrefix(%q, %q): %v", tt.role, tt.node, err)
		}
	}
}

func TestConnectInboxPrefixInvalid(t *testing.T) {
	for _, p := range []string{"_INBOX.>", "_INBOX.*.x", "a.", ".a", "a..b", "a b"} {
		_, err := Connect(ConnectOptions{URL: "nats://127.0.0.1:1", InboxPrefix: p})
		if err == nil || !strings.Contains(err.Error(), "nats inbox prefix "+`"`+p+`"`) {
			t.Errorf("inbox prefix %q: %v, want an error naming the prefix", p, err)
		}
	}
}

// TestConnectInboxPrefix: against a server whose user may receive on its
// own prefix only, a connection with that InboxPrefix gets its JetStream
// replies and one without it (nats.go's _INBOX) gets none.
func TestConnectInboxPrefix(t *testing.T) {
	prefix := InboxPrefix(RoleProcessor, "")
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
		Users: []*server.User{{Username: "role", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"$JS.API.INFO"}},
			Subscribe: &server.SubjectPermission{Allow: []string{prefix + ".>"}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	url := strings.Replace(s.ClientURL(), "nats://", "nats://role:pw@", 1)

	for _, tc := range []struct {
		name, prefix string
		ok           bool
	}{
		{"own prefix", prefix, true},
		{"nats.go default", "", false},
		{"another role's", InboxPrefix(RoleSink, ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := Connect(ConnectOptions{URL: url, InboxPrefix: tc.prefix})
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err = js.AccountInfo(ctx)
			if tc.ok && err != nil {
				t.Errorf("account info with inbox %q: %v", tc.prefix, err)
			}
			if !tc.ok && err == nil {
				t.Errorf("account info with inbox %q answered: the user may not receive there", tc.prefix)
			}
		})
	}
}
