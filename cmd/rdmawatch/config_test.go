package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rdmawatch.yml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigErrorsNameFileLineAndKey(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"typo in a section", "nats: nats://n:4222\ncollector:\n  interval: 5s\n  intervall: 3s\n", `:4: unknown key "intervall": not a flag of collector`},
		{"unknown command", "colector:\n  interval: 5s\n", `:2: section "colector" is not a command`},
		{"unknown global", "natz: x\n", `:1: unknown key "natz": not a global flag`},
		{"bad value", "processor:\n  instances: two\n", `:2: key "instances": `},
		{"not yaml", "collector: [\n", "rdmawatch.yml"},
		{"list where a value is", "collector:\n  interval:\n    - {a: 1}\n", `:3: key "interval": a list of plain values only`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.body)
			root := newRoot()
			root.SetArgs([]string{"config", "check", path})
			root.SetOut(new(strings.Builder))
			err := root.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("config check: %v, want an error naming %s and %q", err, path, tc.want)
			}
		})
	}
}

// TestConfigPrecedence: flags win over RDMAWATCH_<FLAG>, which wins over the
// file's command section, then its top level, then the default.
func TestConfigPrecedence(t *testing.T) {
	path := writeConfig(t, "log-level: debug\ncollector:\n  interval: 5s\n  node: from-file\n")
	for _, tc := range []struct {
		name      string
		flag, env string
		file      bool
		want      string
	}{
		{"default", "", "", false, "10s"},
		{"file", "", "", true, "5s"},
		{"env over file", "", "7s", true, "7s"},
		{"flag over env", "9s", "7s", true, "9s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("RDMAWATCH_INTERVAL", tc.env)
			}
			root := newRoot()
			c, _, err := root.Find([]string{"collector"})
			if err != nil {
				t.Fatal(err)
			}
			if tc.flag != "" {
				if err := c.Flags().Set("interval", tc.flag); err != nil {
					t.Fatal(err)
				}
			}
			p := ""
			if tc.file {
				p = path
			}
			if err := applyConfig(root, c, p); err != nil {
				t.Fatal(err)
			}
			if got := c.Flags().Lookup("interval").Value.String(); got != tc.want {
				t.Errorf("interval %s, want %s", got, tc.want)
			}
			// A value from the environment or the file counts as given,
			// as one from the command line: commands ask Changed.
			if got, want := c.Flags().Changed("interval"), tc.name != "default"; got != want {
				t.Errorf("Changed(interval) %v, want %v", got, want)
			}
			if tc.file {
				if got := c.Flags().Lookup("node").Value.String(); got != "from-file" {
					t.Errorf("node %q, want the section's", got)
				}
				if got := c.Flags().Lookup("log-level").Value.String(); got != "debug" {
					t.Errorf("log-level %q from the top level", got)
				}
			}
		})
	}
}

func TestConfigPrintMasksSecrets(t *testing.T) {
	path := writeConfig(t, "nats: nats://col-a:COLAPW@nats-1:4222\nclickhouse: clickhouse://sink:CHPW@ch:9000/rdmawatch\n")
	root := newRoot()
	var out strings.Builder
	root.SetOut(&out)
	root.SetArgs([]string{"--config", path, "config", "print", "sink"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "COLAPW") || strings.Contains(out.String(), "CHPW") || !strings.Contains(out.String(), "nats-1:4222") {
		t.Errorf("config print:\n%s", out.String())
	}
}

func TestConfigDetectorSettings(t *testing.T) {
	good := writeConfig(t, "processor:\n  detectors:\n    link_flap:\n      stable_after: 2m\n")
	s, err := detectorSettings(good)
	if err != nil || s["link_flap"]["stable_after"] != "2m" {
		t.Fatalf("settings %v, %v", s, err)
	}
	for body, want := range map[string]string{
		"processor:\n  detectors:\n    link_flap:\n      stable_aftr: 2m\n":  `:4: processor.detectors: unknown detector setting: link_flap.stable_aftr`,
		"processor:\n  detectors:\n    link_flop:\n      stable_after: 2m\n": `:4: processor.detectors: unknown detector: detector "link_flop"`,
		"processor:\n  detectors:\n    link_flap:\n      stable_after: x\n":  `:4: processor.detectors: link_flap.stable_after: "x"`,
	} {
		path := writeConfig(t, body)
		root := newRoot()
		root.SetArgs([]string{"config", "check", path})
		root.SetOut(new(strings.Builder))
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config check:\n%s\n%v, want %q", body, err, want)
		}
	}
}

// TestConfigNotYAML: a TOML or INI file, a list or a lone value is refused
// with the line and what the file should look like.
func TestConfigNotYAML(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"toml section", "[collector]\nspeed = 30\n", "looks like TOML or INI"},
		{"toml keys", "# settings\nnats = \"nats://h:4222\"\n", "looks like TOML or INI"},
		{"list", "- nats: x\n", "found a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readConfigFile(writeConfig(t, tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), ":1:") && !strings.Contains(err.Error(), ":2:") {
				t.Errorf("%v, want %q with the line", err, tc.want)
			}
		})
	}
}
