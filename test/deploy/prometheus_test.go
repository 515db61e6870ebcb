package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

var (
	promtoolOnce sync.Once
	promtoolPath string
	promtoolWhy  string
)

// promtool finds promtool, installing Debian's prometheus package (which
// ships it) when it is missing and the test runs as root on a system with
// apt-get; otherwise the test is skipped with the reason.
func promtool(t *testing.T) string {
	t.Helper()
	promtoolOnce.Do(func() {
		if p, err := exec.LookPath("promtool"); err == nil {
			promtoolPath = p
			return
		}
		if os.Geteuid() != 0 {
			promtoolWhy = "promtool is not installed and the test is not root: apt-get install prometheus"
			return
		}
		apt, err := exec.LookPath("apt-get")
		if err != nil {
			promtoolWhy = "promtool is not installed and there is no apt-get to install Debian's prometheus package"
			return
		}
		env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		install := exec.Command(apt, "install", "-y", "--no-install-recommends", "prometheus")
		install.Env = env
		if out, err := install.CombinedOutput(); err != nil {
			// The package lists may be missing on a fresh machine.
			update := exec.Command(apt, "update")
			update.Env = env
			if uout, uerr := update.CombinedOutput(); uerr != nil {
				promtoolWhy = "apt-get update failed: " + lastLine(uout)
				return
			}
			install = exec.Command(apt, "install", "-y", "--no-install-recommends", "prometheus")
			install.Env = env
			if out, err = install.CombinedOutput(); err != nil {
				promtoolWhy = "apt-get install prometheus failed: " + lastLine(out)
				return
			}
		}
		if p, err := exec.LookPath("promtool"); err == nil {
			promtoolPath = p
			return
		}
		promtoolWhy = "Debian's prometheus package installed no promtool"
	})
	if promtoolPath == "" {
		t.Skip(promtoolWhy)
	}
	return promtoolPath
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

func TestPrometheusRulesPromtool(t *testing.T) {
	pt := promtool(t)
	dir := filepath.Join(root(t), "deploy", "prometheus")
	for _, args := range [][]string{{"check", "rules", "rules.yml"}, {"test", "rules", "rules_test.yml"}} {
		cmd := exec.Command(pt, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

var metricRef = regexp.MustCompile(`\brdmawatch_[a-z0-9_]+`)

// TestPrometheusMetricsContract checks the metric names the rules read
// against the contract in the file's comments, and the contract against
// Prometheus' naming conventions, so the roles and the rules agree on one
// list of names.
func TestPrometheusMetricsContract(t *testing.T) {
	path := filepath.Join(root(t), "deploy", "prometheus", "rules.yml")
	contract, err := ParseMetricsContract(path)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]Metric{}
	for _, m := range contract {
		if _, dup := known[m.Name]; dup {
			t.Errorf("line %d: %s is listed twice", m.Line, m.Name)
		}
		known[m.Name] = m
		switch {
		case m.Type == "counter" && !strings.HasSuffix(m.Name, "_total"):
			t.Errorf("line %d: counter %s must end in _total", m.Line, m.Name)
		case m.Type != "counter" && strings.HasSuffix(m.Name, "_total"):
			t.Errorf("line %d: %s %s must not end in _total", m.Line, m.Type, m.Name)
		case m.Type == "histogram" && !strings.HasSuffix(m.Name, "_seconds") && !strings.HasSuffix(m.Name, "_bytes"):
			t.Errorf("line %d: histogram %s must be in a base unit (_seconds, _bytes)", m.Line, m.Name)
		case strings.Contains(m.Name, "_ms") || strings.Contains(m.Name, "milli") || strings.Contains(m.Name, "_kb") || strings.Contains(m.Name, "_mb"):
			t.Errorf("line %d: %s: use base units (seconds, bytes)", m.Line, m.Name)
		}
	}
	for _, want := range []string{"rdmawatch_build_info", "rdmawatch_ready", "rdmawatch_dead_letters_total"} {
		if _, ok := known[want]; !ok {
			t.Errorf("the contract lacks %s, which every role exports", want)
		}
	}

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			alerts++
			if r.Alert == "" || r.Expr == "" {
				t.Errorf("group %s: a rule without alert name or expression", g.Name)
			}
			if sev := r.Labels["severity"]; sev != "warning" && sev != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, sev)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs a summary and a description", r.Alert)
			}
			for _, name := range metricRef.FindAllString(r.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				if _, ok := known[name]; !ok {
					if _, ok := known[base]; !ok || known[base].Type != "histogram" {
						t.Errorf("%s reads %s, which the metrics contract does not list", r.Alert, name)
					}
				}
			}
		}
	}
	// The alerts the operators were promised.
	want := []string{"RdmawatchCollectorDown", "RdmawatchProcessorLagGrowing", "RdmawatchSinkBacklog", "RdmawatchSinkInsertErrors", "RdmawatchDeadLetters"}
	for _, w := range want {
		if !strings.Contains(string(b), "alert: "+w+"\n") {
			t.Errorf("rules.yml has no alert %s", w)
		}
	}
	if alerts < len(want) {
		t.Errorf("%d alerts parsed", alerts)
	}
}
