package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// adminOnlyServer is a JetStream server whose one user may publish
// anything but receive on the admin's inbox prefix only, as
// deploy/nats/rdmawatch-auth.conf would confine a user given just that
// prefix: a command that took its replies elsewhere gets none.
func adminOnlyServer(t *testing.T) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Users: []*server.User{{Username: "admin", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{">"}},
			Subscribe: &server.SubjectPermission{Allow: []string{natsutil.InboxPrefix(natsutil.RoleAdmin, "") + ".>"}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return fmt.Sprintf("nats://admin:pw@127.0.0.1:%d", s.Addr().(*net.TCPAddr).Port)
}

// writeDeadLetters has roles refuse messages the way they do
// (natsutil.DeadLetter on a message fetched from its stream) and returns
// the dead letters' sequences by name.
func writeDeadLetters(t *testing.T, js jetstream.JetStream) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := natsutil.EnsureStreams(ctx, js, schemas.StreamOptions{Memory: true}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	good, err := schemas.EncodeBatch(&schemas.CounterBatch{Node: "gpu-002", BootID: "b", Seq: 1, TimeMs: now, Ports: []schemas.PortSample{{
		Device: "mlx5_0", Port: 1, TimeMs: now, IntervalMs: 10_000,
		Counters: []schemas.CounterDelta{{Name: "port_rcv_data", Source: schemas.SourceCounters, Delta: 42}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[string]uint64{}
	for _, x := range []struct {
		name, subject, role, reason string
		data                        []byte
	}{
		{"poison", schemas.CountersSubject("gpu-001"), "sink", "decode error: msgpack: invalid code c1", append([]byte("not msgpack"), 0x1b, '[', '2', 'J')},
		{"batch", schemas.CountersSubject("gpu-002"), "processor", "implausible time: 3h ahead", good},
		{"inventory", schemas.InventorySubject("gpu-003"), "sink", "ClickHouse refused the row", []byte{0x80}},
	} {
		m := nats.NewMsg(x.subject)
		m.Data = x.data
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		cons, err := js.CreateConsumer(ctx, ack.Stream, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: ack.Sequence})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := natsutil.DeadLetter(ctx, js, x.role, msg, x.reason); err != nil {
			t.Fatal(err)
		}
		str, err := js.Stream(ctx, schemas.StreamDeadLetter)
		if err != nil {
			t.Fatal(err)
		}
		seqs[x.name] = str.CachedInfo().State.LastSeq
	}
	return seqs
}

func runRoot(args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := newRoot()
	var out, errOut strings.Builder
	root.SetArgs(append(args, "--log-level", "error", "--wait", "5s"))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// TestDeadLetterCommand runs `rdmawatch deadletter` as an operator would,
// step by step on one stream (later steps see what redrive changed), as a
// user that may receive on the admin's inbox only.
func TestDeadLetterCommand(t *testing.T) {
	url := adminOnlyServer(t)
	nc, err := nats.Connect(url, nats.CustomInboxPrefix(natsutil.InboxPrefix(natsutil.RoleAdmin, "")))
	if err != nil {
		t.Fatal(err)
	}
	js := natstest.JetStream(t, nc)
	seq := writeDeadLetters(t, js)
	s := func(name string) string { return fmt.Sprint(seq[name]) }
	textfile := filepath.Join(t.TempDir(), "deadletter.prom")

	for _, tc := range []struct {
		name    string
		args    []string
		want    []string // in stdout
		notWant []string
		stderr  string // in stderr
		err     string // error text; empty: success
		check   func(t *testing.T, out string)
	}{
		{name: "ls", args: []string{"deadletter", "ls"}, want: []string{
			"SEQ", "REASON",
			s("poison") + " ", "sink", "RDMAWATCH_COUNTERS/rdmawatch.counters.", ".gpu-001", "decode error: msgpack: invalid code c1",
			s("batch") + " ", "processor", "implausible time: 3h ahead",
			s("inventory") + " ", "RDMAWATCH_INVENTORY/rdmawatch.inventory.gpu-003 ", "ClickHouse refused the row",
		}, check: func(t *testing.T, out string) {
			// SEQ TIME ROLE STREAM/SUBJECT SIZE REASON...: the sizes are the payloads'.
			sizes := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
				f := strings.Fields(line)
				sizes[f[0]] = f[4]
			}
			if sizes[s("poison")] != "15" || sizes[s("inventory")] != "1" || len(sizes) != 3 {
				t.Errorf("sizes by sequence %v", sizes)
			}
		}},
		{name: "ls filtered", args: []string{"deadletter", "ls", "--role", "sink", "--stream", "counters", "--since", "1h", "--until", "now"},
			want: []string{"gpu-001"}, notWant: []string{"gpu-002", "gpu-003"}},
		{name: "ls by reason", args: []string{"deadletter", "ls", "--reason", "CLICKHOUSE"}, want: []string{"gpu-003"}, notWant: []string{"gpu-001", "gpu-002"}},
		{name: "ls limit", args: []string{"deadletter", "ls", "--limit", "1"}, want: []string{"gpu-001"}, notWant: []string{"gpu-002", "gpu-003"}},
		{name: "ls none", args: []string{"deadletter", "ls", "--role", "alert"}, want: []string{"no dead letters match"}, notWant: []string{"SEQ"}},
		{name: "ls json", args: []string{"deadletter", "ls", "--json", "--role", "processor"}, check: func(t *testing.T, out string) {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 1 {
				t.Fatalf("%d lines: %q", len(lines), out)
			}
			var l struct {
				Seq             uint64
				Role, Stream    string
				Subject, Reason string
				Size            int
				Time            time.Time
			}
			if err := json.Unmarshal([]byte(lines[0]), &l); err != nil {
				t.Fatal(err)
			}
			if l.Seq != seq["batch"] || l.Role != "processor" || l.Stream != schemas.StreamCounters || l.Size == 0 ||
				l.Reason != "implausible time: 3h ahead" || time.Since(l.Time) > time.Minute {
				t.Errorf("JSON line %s", lines[0])
			}
		}},
		{name: "ls bad stream", args: []string{"deadletter", "ls", "--stream", "RDMAWATCH_DEADLETTER"}, err: `--stream: stream "RDMAWATCH_DEADLETTER": want one of`},
		{name: "ls bad role", args: []string{"deadletter", "ls", "--role", "sinks"}, err: `--role: role "sinks"`},
		{name: "ls bad time", args: []string{"deadletter", "ls", "--since", "yesterday"}, err: `--since "yesterday"`},
		{name: "ls since after until", args: []string{"deadletter", "ls", "--since", "1h", "--until", "2h"}, err: "is after until"},
		{name: "ls bad limit", args: []string{"deadletter", "ls", "--limit", "-1"}, err: "--limit -1"},

		{name: "show a batch", args: []string{"deadletter", "show", s("batch")}, want: []string{
			"dead letter " + s("batch") + " on rdmawatch.deadletter.processor.RDMAWATCH_COUNTERS",
			"Rdmawatch-Dead-Reason: implausible time: 3h ahead", "Rdmawatch-Dead-Role: processor", "Nats-Msg-Id: dead/processor/RDMAWATCH_COUNTERS/",
			"counters batch:", `"node": "gpu-002"`, `"counter": "counters/port_rcv_data"`, `"delta": 42`,
		}},
		{name: "show poison", args: []string{"deadletter", "show", s("poison")}, want: []string{
			"payload: 15 bytes; it does not decode as a counters batch: decode counter batch",
			"00000000  6e 6f 74 20 6d 73 67 70  61 63 6b 1b 5b 32 4a     |not msgpack.[2J|",
		}, notWant: []string{"\x1b"}},
		{name: "show not a number", args: []string{"deadletter", "show", "abc"}, err: `dead letter "abc": want its sequence`},
		{name: "show missing", args: []string{"deadletter", "show", "999"}, err: "dead letter 999: no such dead letter"},

		{name: "metrics", args: []string{"deadletter", "metrics"}, want: []string{
			"# TYPE rdmawatch_deadletter_messages gauge",
			`rdmawatch_deadletter_messages{role="processor",stream="RDMAWATCH_COUNTERS"} 1`,
			`rdmawatch_deadletter_messages{role="sink",stream="RDMAWATCH_COUNTERS"} 1`,
			`rdmawatch_deadletter_messages{role="sink",stream="RDMAWATCH_INVENTORY"} 1`,
			"# TYPE rdmawatch_deadletter_bytes gauge",
		}},
		{name: "metrics textfile", args: []string{"deadletter", "metrics", "--textfile", textfile}, check: func(t *testing.T, out string) {
			b, err := os.ReadFile(textfile)
			if err != nil || !strings.Contains(string(b), `rdmawatch_deadletter_messages{role="sink",stream="RDMAWATCH_INVENTORY"} 1`) || out != "" {
				t.Errorf("textfile %q, %v; stdout %q", b, err, out)
			}
		}},
		{name: "metrics textfile not .prom", args: []string{"deadletter", "metrics", "--textfile", "x.txt"}, err: `--textfile "x.txt"`},

		{name: "redrive without letters", args: []string{"deadletter", "redrive"}, err: "name dead letters by SEQ"},
		{name: "redrive filters without --all-matching", args: []string{"deadletter", "redrive", "--role", "sink"}, err: "select with --all-matching only"},
		{name: "redrive everything unfiltered", args: []string{"deadletter", "redrive", "--all-matching"}, err: "name at least one of"},
		{name: "redrive both", args: []string{"deadletter", "redrive", "--all-matching", "--role", "sink", s("batch")}, err: "not both"},
		{name: "redrive bad seq", args: []string{"deadletter", "redrive", "0"}, err: `dead letter "0"`},
		{name: "redrive dry run", args: []string{"deadletter", "redrive", "--dry-run", "--all-matching", "--role", "sink"}, want: []string{
			"would redrive " + s("poison") + " (sink RDMAWATCH_COUNTERS seq 1) to rdmawatch.counters.gpu-001 as redrive/RDMAWATCH_COUNTERS/1",
			"would redrive " + s("inventory") + " (sink RDMAWATCH_INVENTORY seq 1) to rdmawatch.inventory.gpu-003",
		}},
		{name: "ls after the dry run", args: []string{"deadletter", "ls"}, want: []string{"gpu-001", "gpu-002", "gpu-003"}},
		{name: "redrive by seq, one missing", args: []string{"deadletter", "redrive", s("batch"), "999"},
			want:   []string{"redriven " + s("batch") + " (processor RDMAWATCH_COUNTERS seq 2) to rdmawatch.counters.gpu-002: RDMAWATCH_COUNTERS seq 3; dead letter deleted"},
			stderr: "rdmawatch: dead letter 999: no such dead letter", err: "1 of 2 dead letters not redriven"},
		{name: "redrive matching", args: []string{"deadletter", "redrive", "--all-matching", "--stream", "inventory"},
			want: []string{"redriven " + s("inventory") + " (sink RDMAWATCH_INVENTORY seq 1) to rdmawatch.inventory.gpu-003: RDMAWATCH_INVENTORY seq 2"}},
		{name: "ls after redrives", args: []string{"deadletter", "ls"}, want: []string{"gpu-001"}, notWant: []string{"gpu-002", "gpu-003"}},
		{name: "redrive matching nothing", args: []string{"deadletter", "redrive", "--all-matching", "--role", "alert"}, want: []string{"no dead letters match"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := runRoot(append(tc.args, "--nats", url)...)
			if !strings.Contains(errOut, tc.stderr) {
				t.Errorf("%v: stderr %q, want %q in it", tc.args, errOut, tc.stderr)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%v: %v, want an error with %q", tc.args, err, tc.err)
				}
			} else if err != nil {
				t.Fatalf("%v: %v", tc.args, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out, w) {
					t.Errorf("%v: output has %q:\n%s", tc.args, w, out)
				}
			}
			if tc.check != nil {
				tc.check(t, out)
			}
		})
	}
}

// TestDeadLetterGivesUp: every subcommand is a one-shot command: an
// unreachable NATS fails it after --wait with one line naming the server.
func TestDeadLetterGivesUp(t *testing.T) {
	for _, args := range [][]string{
		{"deadletter", "ls"},
		{"deadletter", "show", "1"},
		{"deadletter", "redrive", "1"},
		{"deadletter", "metrics"},
	} {
		t.Run(args[1], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			root := newRoot()
			root.SetArgs(append(args, "--nats", "nats://127.0.0.1:1", "--wait", "1s", "--log-level", "error"))
			root.SetOut(new(strings.Builder))
			began := time.Now()
			err := root.ExecuteContext(ctx)
			if err == nil || !strings.Contains(err.Error(), "nats nats://127.0.0.1:1 not reachable within 1s") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%v: %v, want one line saying NATS was not reachable within 1s", args, err)
			}
			if took := time.Since(began); took > 6*time.Second {
				t.Errorf("%v gave up after %s", args, took)
			}
		})
	}
}
