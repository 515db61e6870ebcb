package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelpHidesSecretDefaults: with secrets in the RDMAWATCH_* variables
// that give flags their defaults, no command's usage text shows them.
func TestHelpHidesSecretDefaults(t *testing.T) {
	secrets := map[string]string{
		"RDMAWATCH_NATS":         "nats://rdmawatch-sink:NatsS3cretPw@nats.example:4222",
		"RDMAWATCH_CLICKHOUSE":   "clickhouse://rdmawatch_sink:ChS3cretPw@ch.example:9000/rdmawatch",
		"RDMAWATCH_ALERTMANAGER": "am=https://amuser:AmS3cretPw@am.example:9093",
		"RDMAWATCH_WEBHOOK":      "hook=https://hooks.example/services/T000/B000/B7QHf3kTz9WxLm2NpR4sVd8Y?token=WhS3cretTok",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	root := newRootOf(&global{})
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		n++
		usage := c.UsageString()
		for _, s := range []string{"NatsS3cretPw", "ChS3cretPw", "AmS3cretPw", "WhS3cretTok", "B7QHf3kTz9WxLm2NpR4sVd8Y"} {
			if strings.Contains(usage, s) {
				t.Errorf("%s --help shows %s", c.CommandPath(), s)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if n < 15 {
		t.Errorf("walked %d commands: want every subcommand", n)
	}
	if !strings.Contains(root.Commands()[0].Root().UsageString(), "nats.example") {
		t.Errorf("the masked default lost its host: %s", root.UsageString())
	}
}
