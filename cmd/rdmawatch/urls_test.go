package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestCheckURLs(t *testing.T) {
	for _, tc := range []struct {
		name, flag, value string
		list              bool
		schemes           []string
		want              string // error text; empty: valid
	}{
		{name: "nats", flag: "--nats", value: "nats://127.0.0.1:4222", list: true, schemes: natsSchemes},
		{name: "nats list with tls and credentials", flag: "--nats", value: "tls://u:pw@a:4222, nats://b:4222", list: true, schemes: natsSchemes},
		{name: "nats bare host:port", flag: "--nats", value: "nats-0:4222", list: true, schemes: natsSchemes},
		{name: "nats typo", flag: "--nats", value: "htp:/foo", list: true, schemes: natsSchemes, want: `--nats "htp:/foo": `},
		{name: "nats wrong scheme", flag: "--nats", value: "http://a:4222", list: true, schemes: natsSchemes, want: `scheme "http"; want nats://, tls://`},
		{name: "nats port too large", flag: "--nats", value: "nats://a:70000", list: true, schemes: natsSchemes, want: `port "70000": want 1-65535`},
		{name: "nats second of a list", flag: "--nats", value: "nats://a:4222,nats//b", list: true, schemes: natsSchemes, want: `--nats "nats//b"`},
		{name: "nats no host", flag: "--nats", value: "nats://:4222", list: true, schemes: natsSchemes, want: "no host"},
		{name: "clickhouse", flag: "--clickhouse", value: "clickhouse://u:pw@127.0.0.1:9000/default?secure=true", schemes: clickhouseSchemes},
		{name: "clickhouse http", flag: "--clickhouse", value: "http://127.0.0.1:8123", schemes: clickhouseSchemes, want: `--clickhouse "http://127.0.0.1:8123": scheme "http"`},
		{name: "clickhouse no scheme", flag: "--clickhouse", value: "127.0.0.1:9000", schemes: clickhouseSchemes, want: "no scheme"},
		{name: "password not shown", flag: "--clickhouse", value: "clickhous://u:secret@h:9000", schemes: clickhouseSchemes, want: "u:xxxxx@h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkURLs(tc.flag, tc.value, tc.list, tc.schemes...)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%s: %v", tc.value, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: %v, want an error with %q", tc.value, err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// TestOneShotCommandsGiveUp: a one-shot command whose NATS does not answer
// fails after --wait with one line naming it; a malformed address fails at
// once.
func TestOneShotCommandsGiveUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		want   string
		atMost time.Duration
	}{
		{name: "streams check, nothing listening", args: []string{"streams", "check", "--nats", "nats://127.0.0.1:1", "--wait", "2s"},
			want: "nats nats://127.0.0.1:1 not reachable within 2s", atMost: 8 * time.Second},
		{name: "events tail, nothing listening", args: []string{"events", "tail", "--follow=false", "--nats", "nats://127.0.0.1:1", "--wait", "2s"},
			want: "not reachable within 2s", atMost: 8 * time.Second},
		{name: "streams apply, malformed URL", args: []string{"streams", "apply", "--nats", "htp:/foo"},
			want: `--nats "htp:/foo"`, atMost: time.Second},
		{name: "retention, malformed DSN", args: []string{"retention", "--clickhouse", "clickhose://h:9000"},
			want: `--clickhouse "clickhose://h:9000": scheme "clickhose"`, atMost: time.Second},
		{name: "no wait", args: []string{"streams", "check", "--wait", "0s"}, want: "--wait 0s", atMost: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			root := newRoot()
			root.SetArgs(append(tc.args, "--log-level", "error"))
			root.SetOut(new(strings.Builder))
			began := time.Now()
			err := root.ExecuteContext(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v: %v, want an error with %q", tc.args, err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("more than one line: %q", err)
			}
			if took := time.Since(began); took > tc.atMost {
				t.Errorf("%v gave up after %s, want at most %s", tc.args, took, tc.atMost)
			}
		})
	}
}

// TestSkipVerifyWarnsOnce: a DSN that turns certificate verification off is
// accepted with one WARN, however often the command asks for ClickHouse.
func TestSkipVerifyWarnsOnce(t *testing.T) {
	for _, tc := range []struct {
		dsn   string
		warns int
	}{
		{dsn: "clickhouse://u:pw@h:9440/default?secure=true", warns: 0},
		{dsn: "clickhouse://u:pw@h:9440/default?secure=true&skip_verify=true", warns: 1},
		{dsn: "clickhouse://h:9440/default?skip_verify=1", warns: 1},
		{dsn: "clickhouse://h:9440/default?skip_verify=false", warns: 0},
	} {
		t.Run(tc.dsn, func(t *testing.T) {
			var logs strings.Builder
			l, err := newLogger(&logs, "text", slog.LevelInfo)
			if err != nil {
				t.Fatal(err)
			}
			g := &global{clickhouse: tc.dsn, log: l}
			for range 3 {
				if err := g.requireClickHouse(); err != nil {
					t.Fatal(err)
				}
			}
			if n := strings.Count(logs.String(), "level=WARN msg=\"--clickhouse has skip_verify=true"); n != tc.warns {
				t.Fatalf("%d warnings, want %d:\n%s", n, tc.warns, logs.String())
			}
			if strings.Contains(logs.String(), ":pw@") {
				t.Errorf("the warning shows the password:\n%s", logs.String())
			}
		})
	}
}
