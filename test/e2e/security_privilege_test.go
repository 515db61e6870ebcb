package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/nats-io/nats.go"

	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// Passwords of the least-privilege tests: nothing else in the output may
// look like them (security_secrets_test greps for them).
const (
	natsAdminPW     = "NatsAdm1nPw"
	natsCollectorPW = "NatsC0llPw"
	natsProcessorPW = "NatsPr0cPw"
	natsSinkPW      = "NatsS1nkPw"
	natsAlertPW     = "NatsAl3rtPw"
	chAdminPW       = "ChAdm1nPw"
	chSinkPW        = "ChS1nkPw"
	chReaderPW      = "ChR3aderPw"
)

// securedNATS runs nats-server with deploy/nats/rdmawatch-auth.conf
// included verbatim, passwords from the environment as the file says.
func securedNATS(t *testing.T, port int) *natsProc {
	t.Helper()
	for k, v := range map[string]string{
		"RDMAWATCH_NATS_ADMIN_PASSWORD":     natsAdminPW,
		"RDMAWATCH_NATS_COLLECTOR_PASSWORD": natsCollectorPW,
		"RDMAWATCH_NATS_PROCESSOR_PASSWORD": natsProcessorPW,
		"RDMAWATCH_NATS_SINK_PASSWORD":      natsSinkPW,
		"RDMAWATCH_NATS_ALERT_PASSWORD":     natsAlertPW,
	} {
		t.Setenv(k, v)
	}
	auth, err := os.ReadFile("../../deploy/nats/rdmawatch-auth.conf")
	if err != nil {
		t.Fatal(err)
	}
	return startNATS(t, port, "jetstream { store_dir: %STORE% }\ninclude ./rdmawatch-auth.conf\n",
		map[string]string{"rdmawatch-auth.conf": string(auth)})
}

func natsAs(port int, user, pw string) string { return "RDMAWATCH_NATS=" + natsURLAs(port, user, pw) }

func natsURLAs(port int, user, pw string) string {
	return fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", user, pw, port)
}

// securedClickHouse runs a private ClickHouse with rdmawatch's users
// (deploy/clickhouse/rdmawatch-users.xml through local.sh).
func securedClickHouse(t *testing.T, tcp, http int, env ...string) (admin, sink, reader string) {
	t.Helper()
	privateClickHouse(t, tcp, http, append([]string{"RDMAWATCH_CH_USERS=1",
		"RDMAWATCH_CH_ADMIN_PASSWORD=" + chAdminPW, "RDMAWATCH_CH_SINK_PASSWORD=" + chSinkPW,
		"RDMAWATCH_CH_READER_PASSWORD=" + chReaderPW}, env...)...)
	dsn := func(user, pw string) string {
		return fmt.Sprintf("clickhouse://%s:%s@127.0.0.1:%d/rdmawatch", user, pw, tcp)
	}
	return dsn("rdmawatch_admin", chAdminPW), dsn("rdmawatch_sink", chSinkPW), dsn("rdmawatch_reader", chReaderPW)
}

// TestSecurityLeastPrivilege runs the pipeline with exactly the shipped
// rights: streams and tables by the admins, then collector, processor and
// sink with their own NATS and ClickHouse users, query as the reader; and
// each forbidden action fails.
func TestSecurityLeastPrivilege(t *testing.T) {
	const natsPort = 14520
	ns := securedNATS(t, natsPort)
	chAdmin, chSink, chReader := securedClickHouse(t, 14580, 14581)
	ctx := ctxT(t, 4*time.Minute)

	admin := []string{"RDMAWATCH_NATS=" + natsURLAs(natsPort, "rdmawatch-admin", natsAdminPW), "RDMAWATCH_CLICKHOUSE=" + chAdmin}
	mustRun(t, admin, "streams", "apply")
	mustRun(t, admin, "migrate")

	collector := startRole(t, "collector", []string{"RDMAWATCH_NATS=" + natsURLAs(natsPort, "rdmawatch-sim", natsCollectorPW)},
		"collector", "--source", "sim", "--sim-nodes", "2", "--sim-interval", "10s", "--speed", "120",
		"--inject", "link_flap@+2m:gpu-001/mlx5_0/1")
	processor := startRole(t, "processor", []string{"RDMAWATCH_NATS=" + natsURLAs(natsPort, "rdmawatch-processor", natsProcessorPW)}, "processor", "--group", "least-privilege")
	sink := startRole(t, "sink", []string{"RDMAWATCH_NATS=" + natsURLAs(natsPort, "rdmawatch-sink", natsSinkPW), "RDMAWATCH_CLICKHOUSE=" + chSink}, "sink")

	// The alert bridge, reading events with its own user, posting to a webhook.
	var hooks atomic.Int64
	var hookBody atomic.Value
	hookSrv := &http.Server{Addr: "127.0.0.1:14525", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hookBody.Store(string(b))
		hooks.Add(1)
	})}
	ln, err := net.Listen("tcp", hookSrv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hookSrv.Serve(ln) }()
	t.Cleanup(func() { hookSrv.Close() })
	alerter := startRole(t, "alert", []string{natsAs(natsPort, "rdmawatch-alert", natsAlertPW)}, "alert", "--webhook", "http://127.0.0.1:14525/hook")

	conn := chtest.Open(t, chAdmin)
	if err := testwait.Poll(2*time.Minute, "rows in every table", func() error {
		for _, table := range []string{"port_samples", "inventory", "events"} {
			if n, err := chtest.Count(ctx, conn, table, ""); err != nil || n == 0 {
				return fmt.Errorf("%s: %d rows, %v", table, n, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("%v\nprocessor:\n%s\nsink:\n%s", err, processor.out.String(), sink.out.String())
	}
	if err := testwait.Poll(time.Minute, "a post from the alert bridge", func() error {
		if hooks.Load() == 0 {
			return errors.New("it posted nothing")
		}
		return nil
	}); err != nil {
		t.Fatalf("%v:\n%s", err, alerter.out.String())
	}
	if b, _ := hookBody.Load().(string); !strings.Contains(b, "link_flap") {
		t.Errorf("webhook body without the link_flap event: %s", b)
	}
	js := adminJS(t, ns.URL, nats.UserInfo("rdmawatch-admin", natsAdminPW))
	st, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := st.Info(ctx); info == nil || info.State.Msgs == 0 {
		t.Errorf("no events on %s", schemas.StreamEvents)
	}
	reader := []string{"RDMAWATCH_CLICKHOUSE=" + chReader}
	if out := mustRun(t, reader, "query", "events", "--from", "24h", "--to", "2099-01-01", "--format", "csv"); !strings.Contains(out, "link_flap") {
		t.Errorf("query events as the reader found no link_flap:\n%s", out)
	}
	for _, r := range []*role{collector, processor, sink, alerter} {
		r.stop()
		if strings.Contains(r.out.String(), "Permissions Violation") {
			t.Errorf("%s hit a permissions violation with its shipped rights:\n%s", r.name, r.out.String())
		}
	}

	// What each role must not do.
	t.Run("collector updates a stream", func(t *testing.T) {
		cjs := adminJS(t, ns.URL, nats.UserInfo("rdmawatch-sim", natsCollectorPW), nats.CustomInboxPrefix(natsutil.InboxPrefix(natsutil.RoleSim, "")))
		cfg := schemas.CountersStream(schemas.StreamOptions{})
		cfg.MaxMsgs = 1
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := cjs.UpdateStream(c, cfg); err == nil {
			t.Error("collector credentials updated the counters stream")
		}
		if err := cjs.DeleteStream(c, schemas.StreamCounters); err == nil {
			t.Error("collector credentials deleted the counters stream")
		}
	})
	t.Run("collector publishes as another node", func(t *testing.T) {
		cjs := adminJS(t, ns.URL, nats.UserInfo("rdmawatch-sim", natsCollectorPW), nats.CustomInboxPrefix(natsutil.InboxPrefix(natsutil.RoleSim, "")))
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := cjs.Publish(c, schemas.CountersSubject("gpu-victim"), []byte("x")); err == nil {
			t.Error("collector credentials published as gpu-victim")
		}
		if _, err := cjs.Publish(c, schemas.InventorySubject("gpu-victim"), []byte("x")); err == nil {
			t.Error("collector credentials published inventory as gpu-victim")
		}
	})
	t.Run("processor and sink change streams", func(t *testing.T) {
		for _, u := range shippedNATSUsers() {
			if u.role == "collector" || u.role == "sim" {
				continue // above
			}
			user := u.user
			// With the role's own inbox: a refusal is the server's, not a
			// reply that could not be received.
			rjs := adminJS(t, ns.URL, nats.UserInfo(user, u.pw), nats.CustomInboxPrefix(u.inbox))
			c, cancel := context.WithTimeout(ctx, time.Second)
			if err := rjs.DeleteStream(c, schemas.StreamEvents); err == nil {
				t.Errorf("%s deleted the events stream", user)
			}
			if _, err := rjs.Publish(c, schemas.CountersSubject("gpu-001"), []byte("x")); err == nil {
				t.Errorf("%s published counters", user)
			}
			cancel()
		}
	})
	t.Run("sink runs DDL", func(t *testing.T) {
		sc := chtest.Open(t, chSink)
		err := sc.Exec(ctx, "CREATE TABLE evil (x UInt8) ENGINE = Memory")
		var exc *ch.Exception
		if !errors.As(err, &exc) || !strings.Contains(err.Error(), "DDL queries are prohibited") {
			t.Errorf("sink user CREATE TABLE: %v, want DDL prohibited", err)
		}
		if err := sc.Exec(ctx, "DROP TABLE port_samples"); err == nil {
			t.Error("sink user dropped port_samples")
		}
	})
	t.Run("reader inserts", func(t *testing.T) {
		rc := chtest.Open(t, chReader)
		err := rc.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES (999)")
		if err == nil || !strings.Contains(err.Error(), "readonly") {
			t.Errorf("reader INSERT: %v, want refused in readonly mode", err)
		}
	})
}
