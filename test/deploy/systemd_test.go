package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// unitFile is a parsed systemd unit: section -> key -> values in order
// (a key may repeat: ExecStart= in a oneshot unit, SystemCallFilter=).
type unitFile map[string]map[string][]string

func (u unitFile) get(section, key string) []string { return u[section][key] }

func (u unitFile) one(section, key string) (string, bool) {
	v := u[section][key]
	if len(v) != 1 {
		return "", false
	}
	return v[0], true
}

// knownKeys are the keys the shipped units may use. Without
// systemd-analyze, this is what catches a misspelt key.
var knownKeys = map[string][]string{
	"Unit": {"Description", "Documentation", "Wants", "Requires", "After", "Before", "StartLimitIntervalSec", "StartLimitBurst", "ConditionPathExists"},
	"Service": {"Type", "RemainAfterExit", "User", "Group", "DynamicUser", "EnvironmentFile", "Environment", "ExecStart", "ExecStartPre",
		"Restart", "RestartSec", "TimeoutStopSec", "StateDirectory", "StateDirectoryMode", "ReadOnlyPaths", "ReadWritePaths",
		"NoNewPrivileges", "CapabilityBoundingSet", "AmbientCapabilities", "ProtectSystem", "ProtectHome", "PrivateTmp",
		"PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups",
		"ProtectClock", "ProtectHostname", "RestrictNamespaces", "RestrictRealtime", "RestrictSUIDSGID", "LockPersonality",
		"MemoryDenyWriteExecute", "SystemCallArchitectures", "SystemCallFilter", "SystemCallErrorNumber", "UMask",
		"RestrictAddressFamilies", "Nice", "TimeoutStartSec"},
	"Timer":   {"OnCalendar", "RandomizedDelaySec", "Persistent", "AccuracySec", "Unit"},
	"Install": {"WantedBy"},
}

func parseUnit(data []byte) (unitFile, error) {
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
			continue
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			if _, ok := knownKeys[section]; !ok {
				return nil, fmt.Errorf("line %d: unknown section [%s]", n, section)
			}
			u[section] = map[string][]string{}
			continue
		case strings.HasSuffix(line, "\\"):
			return nil, fmt.Errorf("line %d: continuation lines are not used in the shipped units", n)
		}
		if section == "" {
			return nil, fmt.Errorf("line %d: %q before any section", n, line)
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not Key=Value", n, line)
		}
		if !slices.Contains(knownKeys[section], key) {
			return nil, fmt.Errorf("line %d: unknown key %s in [%s]", n, key, section)
		}
		u[section][key] = append(u[section][key], value)
	}
	return u, sc.Err()
}

// roleUnits maps each shipped unit to the command it must run.
var roleUnits = map[string][]string{
	"rdmawatch-collector.service": {"collector"},
	"rdmawatch-processor.service": {"processor"},
	"rdmawatch-sink.service":      {"sink"},
	"rdmawatch-alert.service":     {"alert"},
	"rdmawatch-setup.service":     {"streams apply", "migrate"},
	"rdmawatch-retention.service": {"retention"},
}

// timedUnits are the oneshot units a timer starts, by their timer. They
// have no [Install] of their own: the timer is what is enabled.
var timedUnits = map[string]string{
	"rdmawatch-retention.timer": "rdmawatch-retention.service",
}

// unitEnv is the environment file of each unit, by role: retention drops
// partitions (DDL), which only the admin's credentials may.
var unitEnv = map[string]string{"retention": "setup"}

func TestSystemdUnits(t *testing.T) {
	dir := filepath.Join(root(t), "deploy", "systemd")
	files, _ := filepath.Glob(filepath.Join(dir, "*.service"))
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	for name := range roleUnits {
		if !slices.Contains(names, name) {
			t.Errorf("deploy/systemd has no %s", name)
		}
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			u, err := parseUnit(b)
			if err != nil {
				t.Fatal(err)
			}
			checkUnit(t, dir, name, u)
		})
	}
}

// TestSystemdTimers checks each timer: it starts a shipped oneshot unit,
// runs on a calendar, catches up on a run missed while the machine was off,
// and is what gets enabled.
func TestSystemdTimers(t *testing.T) {
	dir := filepath.Join(root(t), "deploy", "systemd")
	files, _ := filepath.Glob(filepath.Join(dir, "*.timer"))
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	for name := range timedUnits {
		if !slices.Contains(names, name) {
			t.Errorf("deploy/systemd has no %s", name)
		}
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			want, ok := timedUnits[name]
			if !ok {
				t.Fatalf("unexpected timer %s: add it to timedUnits", name)
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			u, err := parseUnit(b)
			if err != nil {
				t.Fatal(err)
			}
			unit, ok := u.one("Timer", "Unit")
			if !ok {
				unit = strings.TrimSuffix(name, ".timer") + ".service"
			}
			if unit != want {
				t.Errorf("starts %s, want %s", unit, want)
			}
			if _, err := os.Stat(filepath.Join(dir, unit)); err != nil {
				t.Errorf("the unit it starts: %v", err)
			}
			if cal, ok := u.one("Timer", "OnCalendar"); !ok || cal == "" {
				t.Errorf("[Timer] OnCalendar=%q, want one calendar", u.get("Timer", "OnCalendar"))
			}
			if got, _ := u.one("Timer", "Persistent"); got != "true" && got != "yes" {
				t.Errorf("[Timer] Persistent=%q, want true: a run missed while the machine was off is made up at boot", got)
			}
			if got, _ := u.one("Install", "WantedBy"); got != "timers.target" {
				t.Errorf("[Install] WantedBy=%q, want timers.target", got)
			}
		})
	}
}

func checkUnit(t *testing.T, dir, name string, u unitFile) {
	want, ok := roleUnits[name]
	if !ok {
		t.Fatalf("unexpected unit %s: add it to roleUnits", name)
	}
	role := strings.TrimSuffix(strings.TrimPrefix(name, "rdmawatch-"), ".service")
	var cmds []string
	for _, e := range u.get("Service", "ExecStart") {
		cmds = append(cmds, strings.TrimPrefix(e, "/usr/local/bin/rdmawatch "))
	}
	if !slices.Equal(cmds, want) {
		t.Errorf("ExecStart runs %q, want /usr/local/bin/rdmawatch %q", cmds, want)
	}
	env := role
	if e, ok := unitEnv[role]; ok {
		env = e
	}
	expect := map[string]string{
		"User":                  "rdmawatch",
		"EnvironmentFile":       "/etc/rdmawatch/" + env + ".env",
		"NoNewPrivileges":       "yes",
		"ProtectSystem":         "strict",
		"ProtectHome":           "yes",
		"PrivateTmp":            "yes",
		"PrivateDevices":        "yes",
		"CapabilityBoundingSet": "",
		"AmbientCapabilities":   "",
		"Restart":               "always",
	}
	// Storage yields the CPU to detection (docs/deploying.md, "CPU
	// priorities"); the others keep the default.
	nice := "0"
	if role == "sink" {
		nice = "10"
	}
	if got, ok := u.one("Service", "Nice"); (ok || nice != "0") && got != nice {
		t.Errorf("[Service] Nice=%q, want %s", u.get("Service", "Nice"), nice)
	}
	timed := slices.Contains(slices.Collect(maps.Values(timedUnits)), name)
	if role == "setup" || timed {
		// A oneshot unit may not use Restart=always: it retries on failure.
		expect["Type"] = "oneshot"
		expect["Restart"] = "on-failure"
	}
	if timed && slices.Contains(u.get("Service", "RemainAfterExit"), "yes") {
		t.Error("RemainAfterExit=yes: the unit would stay active after its first run and its timer could not start it again")
	}
	for key, v := range expect {
		if got, ok := u.one("Service", key); !ok || got != v {
			t.Errorf("[Service] %s=%q, want exactly one %s=%s", key, u.get("Service", key), key, v)
		}
	}
	if role == "collector" {
		if !slices.Contains(u.get("Service", "ReadOnlyPaths"), "/sys") {
			t.Error("the collector does not have ReadOnlyPaths=/sys")
		}
		if !strings.Contains(strings.Join(u.get("Service", "StateDirectory"), " "), "rdmawatch/collector") {
			t.Error("the collector has no StateDirectory for its spool")
		}
	}
	switch got, _ := u.one("Install", "WantedBy"); {
	case timed && len(u["Install"]) > 0:
		t.Errorf("[Install] %v: a unit its timer starts is not enabled itself", u["Install"])
	case !timed && got != "multi-user.target":
		t.Errorf("[Install] WantedBy=%q, want multi-user.target", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "env", env+".env")); err != nil {
		t.Errorf("no example environment file: %v", err)
	}
}

func TestSystemdParserRejects(t *testing.T) {
	for _, c := range []struct{ name, src string }{
		{"misspelt key", "[Service]\nRestrat=always\n"},
		{"unknown section", "[Servce]\nRestart=always\n"},
		{"key before section", "Restart=always\n"},
		{"not key=value", "[Service]\nRestart always\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := parseUnit([]byte(c.src)); err == nil {
				t.Errorf("parseUnit accepted %q", c.src)
			}
		})
	}
}

// TestSystemdAnalyzeVerify runs systemd's own checker on the units. The
// binary path is pointed at /bin/true in a copy, since verify refuses a unit
// whose ExecStart does not exist; every warning about our units fails the
// test (verify exits 0 on unknown keys and only prints them).
func TestSystemdAnalyzeVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd); the unit files were still checked by TestSystemdUnits' parser")
	}
	src := filepath.Join(root(t), "deploy", "systemd")
	files, _ := filepath.Glob(filepath.Join(src, "*.service"))
	timers, _ := filepath.Glob(filepath.Join(src, "*.timer"))
	files = append(files, timers...)
	tmp := t.TempDir()
	var args []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte("ExecStart=/usr/local/bin/rdmawatch"), []byte("ExecStart=/bin/true"))
		dst := filepath.Join(tmp, filepath.Base(f))
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, dst)
	}
	cmd := exec.Command(sa, append([]string{"verify", "--man=no"}, args...)...)
	out, err := cmd.CombinedOutput()
	var ours []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "rdmawatch-") {
			ours = append(ours, l)
		}
	}
	if err != nil || len(ours) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, strings.Join(ours, "\n"))
	}
}
