package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// validateCases are settings a command refuses at its start, with what the
// error must say: the flag and the value.
var validateCases = []struct {
	name string
	path []string
	file string // the command's section of a file
	want string
}{
	{"collector source", []string{"collector"}, "source: disk", `--source "disk": want sysfs or sim`},
	{"collector interval", []string{"collector"}, "interval: 50ms", "--interval 50ms: must be at least 100ms"},
	{"collector in flight", []string{"collector"}, "max-in-flight: 0", "--max-in-flight 0: want 1 or more"},
	{"collector sim scenario", []string{"collector"}, "source: sim\n  sim-scenario: nope", `--sim-scenario "nope"`},
	{"collector sim fault", []string{"collector"}, "source: sim\n  inject: [nofault@+1m:a/b/1]", "--inject"},
	{"processor instances", []string{"processor"}, "instance: 2\n  instances: 2", "--instance 2 of --instances 2"},
	{"processor member ttl", []string{"processor"}, "member-ttl: 0s", "--member-ttl 0s: want a positive duration"},
	{"processor group with instances", []string{"processor"}, "group: g\n  instances: 2", "--group shares the partitions"},
	{"sink batch rows", []string{"sink"}, "batch-rows: -1", "--batch-rows -1: want 0 (the default) or more"},
	{"sink lookback under delay", []string{"sink"}, "rollup-delay: 10m\n  rollup-lookback: 1m", "rollup lookback 1m0s < rollup delay 10m0s + 1m"},
	{"sink cluster path", []string{"sink"}, "cluster: c\n  cluster-zookeeper-path: ''", "--cluster-zookeeper-path \"\": cluster mode"},
	{"alert resend", []string{"alert"}, "webhook: [h=http://127.0.0.1:1/]\n  resend-interval: 0s", "--resend-interval 0s: want a positive duration"},
	{"alert retry", []string{"alert"}, "webhook: [h=http://127.0.0.1:1/]\n  retry-min: 2m\n  retry-max: 1m", "--retry-min 2m0s is above --retry-max 1m0s"},
	{"alert label", []string{"alert"}, "webhook: [h=http://127.0.0.1:1/]\n  label: [fabric]", `--label "fabric": want name=value`},
	{"alert no target", []string{"alert"}, "subject: rdmawatch.events.>", "no target"},
	{"events tail since", []string{"events", "tail"}, "since: yesterday", `--since`},
	{"deadletter ls limit", []string{"deadletter", "ls"}, "limit: -1", "--limit -1: want 0 (all) or more"},
	{"deadletter metrics textfile", []string{"deadletter", "metrics"}, "textfile: out.txt", `--textfile "out.txt"`},
	{"query format", []string{"query"}, "format: xml", `--format "xml": want table, json or csv`},
	{"query from", []string{"query"}, "from: soon", `--from "soon"`},
	{"postmortem to", []string{"postmortem"}, "to: later", `--to "later"`},
	{"retention raw", []string{"retention"}, "raw: -1h", "--raw -1h0m0s: want 0 (forever) or more"},
	{"rollup from", []string{"rollup"}, "from: never", `--from "never"`},
	{"streams apply replicas", []string{"streams", "apply"}, "replicas: -1", "--replicas -1"},
	{"streams apply max age", []string{"streams", "apply"}, "max-age: [NOPE=1h]", `--max-age "NOPE=1h": unknown stream`},
}

// TestValidateAtStart: each command refuses bad settings before it runs,
// with the flag and the value named, wherever the value came from (here
// the file).
func TestValidateAtStart(t *testing.T) {
	clearEnv(t)
	t.Setenv("RDMAWATCH_CLICKHOUSE", "clickhouse://127.0.0.1:1/db")
	for _, tc := range validateCases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, strings.Join(tc.path, " ")+":\n  "+tc.file+"\n")
			root := newRoot()
			c, _, err := root.Find(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			c.Run, c.RunE = nil, func(c *cobra.Command, _ []string) error {
				t.Errorf("%s ran with settings it should refuse", c.CommandPath())
				return nil
			}
			root.SetArgs(append([]string{"--config", path}, tc.path...))
			root.SetOut(io.Discard)
			err = root.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestConfigCheckRunsValidate: config check refuses what a command would
// refuse at its start, naming the file and the section.
func TestConfigCheckRunsValidate(t *testing.T) {
	clearEnv(t)
	t.Setenv("RDMAWATCH_CLICKHOUSE", "clickhouse://127.0.0.1:1/db")
	for _, tc := range validateCases {
		t.Run(tc.name, func(t *testing.T) {
			section := strings.Join(tc.path, " ")
			path := writeConfig(t, "log-level: info\n"+section+":\n  "+tc.file+"\n")
			root := newRoot()
			root.SetArgs([]string{"config", "check", path})
			root.SetOut(io.Discard)
			err := root.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path+": section "+section+": ") {
				t.Errorf("config check: %v, want an error naming %s, section %s and %q", err, path, section, tc.want)
			}
		})
	}
}

// TestConfigCheckGlobalsAndGood: a bad global value is refused once, and a
// good file passes.
func TestConfigCheckGlobalsAndGood(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct{ name, body, want string }{
		{"log format", "log-format: xml\ncollector:\n  interval: 5s\nprocessor:\n  warmup: 1h\n", `--log-format "xml": want text or json`},
		{"wait", "wait: 0s\n", "--wait 0s: want a positive duration"},
		{"role nats", "nats: htp:/x\ncollector:\n  interval: 5s\n", `section collector: --nats "htp:/x"`},
		{"sink without clickhouse", "sink:\n  batch-rows: 100\n", "section sink: no ClickHouse DSN"},
		{"good", "nats: nats://n:4222\nclickhouse: clickhouse://c:9000/db\ncollector:\n  interval: 5s\nsink:\n  batch-rows: 100\nalert:\n  webhook: [oncall=https://hooks.example/x]\nprocessor:\n  detectors:\n    link_flap:\n      stable_after: 2m\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.body)
			root := newRoot()
			var out strings.Builder
			root.SetOut(&out)
			root.SetArgs([]string{"config", "check", path})
			err := root.Execute()
			if tc.want == "" {
				if err != nil || !strings.Contains(out.String(), "all known and valid") {
					t.Errorf("config check: %v\n%s", err, out.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("config check: %v, want %q", err, tc.want)
			}
			if n := strings.Count(err.Error(), tc.want); n != 1 {
				t.Errorf("config check says %q %d times:\n%v", tc.want, n, err)
			}
		})
	}
}
