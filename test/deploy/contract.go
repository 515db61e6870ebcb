// Package deploy checks what rdmawatch ships for operators against the code:
// the documentation in docs/, the systemd units, the container image recipe,
// the Kubernetes manifests and the Prometheus rules. Its tests are part of
// `go test ./...`; each fails when a shipped file drifts from the code or
// from what it promises.
//
// The package also exports the metrics contract of deploy/prometheus/rules.yml
// so a role's own tests can check that the names it registers are the ones
// the rules read.
package deploy

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Metric is one line of the metrics contract in the comments of
// deploy/prometheus/rules.yml.
type Metric struct {
	Name   string
	Labels []string
	// Type is counter, gauge or histogram.
	Type string
	Line int
}

// contractLine is "#   rdmawatch_name{label,label}   type[: note]".
var contractLine = regexp.MustCompile(`^#\s+(rdmawatch_[a-z0-9_]+)(?:\{([a-z_,]*)\})?\s+(counter|gauge|histogram)\b`)

// ParseMetricsContract reads the metric names, labels and types listed in the
// comments of a rules file.
func ParseMetricsContract(path string) ([]Metric, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Metric
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		m := contractLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		out = append(out, Metric{Name: m[1], Labels: labels, Type: m[3], Line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no metrics contract found in its comments", path)
	}
	return out, nil
}

// RepoRoot finds the repository root (the directory holding go.mod) from
// the working directory up.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
