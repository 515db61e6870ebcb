package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelpHidesSecretsOfTheEnvironment: with secrets in the RDMAWATCH_*
// variables, `--help` of no command shows them: help is answered before
// the environment reaches the flags, and no default comes from it. Each
// command's help names the variables instead.
func TestHelpHidesSecretsOfTheEnvironment(t *testing.T) {
	secrets := map[string]string{
		"RDMAWATCH_NATS":         "nats://rdmawatch-sink:NatsS3cretPw@nats.example:4222",
		"RDMAWATCH_CLICKHOUSE":   "clickhouse://u:s3cret@h:9000/db",
		"RDMAWATCH_ALERTMANAGER": "am=https://amuser:AmS3cretPw@am.example:9093",
		"RDMAWATCH_WEBHOOK":      "hook=https://hooks.example/services/T000/B000/B7QHf3kTz9WxLm2NpR4sVd8Y?token=WhS3cretTok",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(newRoot(), nil)
	if len(paths) < 15 {
		t.Errorf("walked %d commands: want every subcommand", len(paths))
	}
	for _, path := range paths {
		name := strings.Join(append([]string{"rdmawatch"}, path...), " ")
		t.Run(name, func(t *testing.T) {
			root := newRoot()
			var out strings.Builder
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(append(append([]string(nil), path...), "--help"))
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"s3cret", "NatsS3cretPw", "AmS3cretPw", "WhS3cretTok", "B7QHf3kTz9WxLm2NpR4sVd8Y"} {
				if strings.Contains(out.String(), s) {
					t.Errorf("%s --help shows %s:\n%s", name, s, out.String())
				}
			}
			if !strings.Contains(out.String(), "(env RDMAWATCH_") {
				t.Errorf("%s --help names no variable:\n%s", name, out.String())
			}
		})
	}
	// The sink's help shows the built-in default and names the variable.
	root := newRoot()
	var out strings.Builder
	root.SetOut(&out)
	root.SetArgs([]string{"sink", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "(env RDMAWATCH_CLICKHOUSE)") || !strings.Contains(out.String(), `(default "nats://127.0.0.1:4222")`) {
		t.Errorf("sink --help:\n%s", out.String())
	}
}
