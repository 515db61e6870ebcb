package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// metricsServices maps the Service of each role that serves /metrics to
// the workload it selects. The Service names are the Prometheus job names
// deploy/prometheus/rules.yml reads: the Prometheus Operator names a
// ServiceMonitor's job after the Service.
var metricsServices = map[string]string{
	"rdmawatch-collector": "DaemonSet/rdmawatch-collector",
	"rdmawatch-processor": "Deployment/rdmawatch-processor",
	"rdmawatch-sink":      "Deployment/rdmawatch-sink",
	"rdmawatch-alert":     "Deployment/rdmawatch-alert",
}

// listenPort is the port of --listen in every role's manifest
// (RDMAWATCH_LISTEN=$(POD_IP):9464).
const listenPort = 9464

// selected lists the long-running workloads (not Jobs) whose pods carry
// every label of sel, sorted; none for an empty selector.
func (m manifests) selected(sel map[string]string) []string {
	var out []string
	for key, w := range m.workloads {
		if w.Kind == "Job" || w.Kind == "CronJob" {
			continue
		}
		if subset(sel, w.Spec.Template.Metadata.Labels) {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// checkCronJob: a schedule cron reads, and never two runs at once (two
// retention runs would list and drop the same partitions).
func checkCronJob(t *testing.T, cj k8sCronJob) {
	if cj.Metadata.Namespace != "rdmawatch" {
		t.Errorf("namespace %q, want rdmawatch", cj.Metadata.Namespace)
	}
	if s := cj.Spec.Schedule; len(strings.Fields(s)) != 5 && !strings.HasPrefix(s, "@") {
		t.Errorf("schedule %q: want five cron fields or a @macro", s)
	}
	if cj.Spec.ConcurrencyPolicy != "Forbid" {
		t.Errorf("concurrencyPolicy %q, want Forbid: a slow run must not overlap the next", cj.Spec.ConcurrencyPolicy)
	}
	if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		t.Error("shipped suspended")
	}
	if d := cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds; d == nil || *d <= 0 || *d >= 86400 {
		t.Errorf("activeDeadlineSeconds %v: want a bound below a day, so a hung run ends before the next", d)
	}
}

// checkServices: each role's metrics Service selects that role's pods and
// reaches the port its --listen serves.
func checkServices(t *testing.T, m manifests) {
	for name, want := range metricsServices {
		svc, ok := m.services[name]
		if !ok {
			t.Errorf("no Service %s (the Prometheus job name rules.yml reads) for %s", name, want)
			continue
		}
		if got := m.selected(svc.Spec.Selector); !slices.Equal(got, []string{want}) {
			t.Errorf("Service %s selects %v, want the pods of %s", name, got, want)
		}
	}
	for name, svc := range m.services {
		if svc.Metadata.Namespace != "rdmawatch" {
			t.Errorf("Service %s: namespace %q, want rdmawatch", name, svc.Metadata.Namespace)
		}
		if _, ok := metricsServices[name]; !ok {
			t.Errorf("unexpected Service %s: add it to metricsServices", name)
			continue
		}
		// Headless: Prometheus scrapes every pod, and a pod that is not
		// ready too (RdmawatchNotReady reads its rdmawatch_ready 0).
		if svc.Spec.ClusterIP != "None" {
			t.Errorf("Service %s: clusterIP %q, want None (headless: one target per pod)", name, svc.Spec.ClusterIP)
		}
		if !svc.Spec.PublishNotReadyAddresses {
			t.Errorf("Service %s: publishNotReadyAddresses is not true: a role that is not ready would not be scraped", name)
		}
		if len(svc.Spec.Ports) == 0 {
			t.Errorf("Service %s has no ports", name)
		}
		for _, key := range m.selected(svc.Spec.Selector) {
			c := m.workloads[key].Spec.Template.Spec.Containers[0]
			for _, p := range svc.Spec.Ports {
				if got := containerPort(c, p.TargetPort); got != listenPort {
					t.Errorf("Service %s port %s: targetPort %v is port %d of %s, want its --listen port %d", name, p.Name, p.TargetPort, got, key, listenPort)
				}
			}
			if !listensOn(c, listenPort) {
				t.Errorf("%s does not set RDMAWATCH_LISTEN to port %d, which its Service reaches", key, listenPort)
			}
		}
	}
}

// containerPort resolves a Service's targetPort (a number or a port name)
// in a container; 0 when it does not resolve.
func containerPort(c k8sContainer, target any) int {
	switch v := target.(type) {
	case int:
		for _, p := range c.Ports {
			if p.ContainerPort == v {
				return v
			}
		}
	case string:
		for _, p := range c.Ports {
			if p.Name == v {
				return p.ContainerPort
			}
		}
	}
	return 0
}

func listensOn(c k8sContainer, port int) bool {
	for _, e := range c.Env {
		if e.Name == "RDMAWATCH_LISTEN" && strings.HasSuffix(e.Value, ":"+strconv.Itoa(port)) {
			return true
		}
	}
	return false
}

// jobMatcher finds the job label matchers of the rules: job="x", job=~"re".
var jobMatcher = regexp.MustCompile(`\bjob\s*(=~|=)\s*"([^"]+)"`)

// checkServiceMonitors: the ServiceMonitor selects every metrics Service,
// scrapes the port they name, and gives the jobs the names the alert rules
// read.
func checkServiceMonitors(t *testing.T, m manifests) {
	if len(m.monitors) == 0 {
		t.Fatal("no ServiceMonitor")
	}
	covered := map[string]bool{}
	for _, sm := range m.monitors {
		name := sm.Metadata.Name
		if sm.APIVersion != "monitoring.coreos.com/v1" {
			t.Errorf("ServiceMonitor %s: apiVersion %q, want monitoring.coreos.com/v1", name, sm.APIVersion)
		}
		if sm.Metadata.Namespace != "rdmawatch" {
			t.Errorf("ServiceMonitor %s: namespace %q, want rdmawatch", name, sm.Metadata.Namespace)
		}
		if !sm.Spec.NamespaceSelector.Any && !slices.Contains(sm.Spec.NamespaceSelector.MatchNames, "rdmawatch") {
			t.Errorf("ServiceMonitor %s: namespaceSelector %v does not take the rdmawatch namespace", name, sm.Spec.NamespaceSelector.MatchNames)
		}
		// The job is the Service's name only without a jobLabel.
		if sm.Spec.JobLabel != "" {
			t.Errorf("ServiceMonitor %s: jobLabel %q: the jobs would not be named after the Services, as rules.yml expects", name, sm.Spec.JobLabel)
		}
		if len(sm.Spec.Selector.MatchLabels) == 0 {
			t.Errorf("ServiceMonitor %s: empty selector", name)
			continue
		}
		var services []string
		for sname, svc := range m.services {
			if subset(sm.Spec.Selector.MatchLabels, svc.Metadata.Labels) {
				services = append(services, sname)
				covered[sname] = true
			}
		}
		if len(sm.Spec.Endpoints) == 0 {
			t.Errorf("ServiceMonitor %s has no endpoints", name)
		}
		for _, ep := range sm.Spec.Endpoints {
			if ep.Path != "" && ep.Path != "/metrics" {
				t.Errorf("ServiceMonitor %s: path %q, want /metrics", name, ep.Path)
			}
			if ep.Scheme != "" && ep.Scheme != "http" && ep.Scheme != "https" {
				t.Errorf("ServiceMonitor %s: scheme %q", name, ep.Scheme)
			}
			for _, sname := range services {
				found := false
				for _, p := range m.services[sname].Spec.Ports {
					found = found || p.Name == ep.Port
				}
				if !found {
					t.Errorf("ServiceMonitor %s: endpoint port %q is not a port of Service %s", name, ep.Port, sname)
				}
			}
		}
	}
	for sname := range metricsServices {
		if !covered[sname] {
			t.Errorf("no ServiceMonitor selects Service %s", sname)
		}
	}

	// The job names of the alert rules are Service names, and each role's
	// Service is read by some rule.
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "prometheus", "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	matchers := jobMatcher.FindAllStringSubmatch(string(b), -1)
	if len(matchers) == 0 {
		t.Fatal("rules.yml has no job matchers: the pattern is broken")
	}
	read := map[string]bool{}
	for _, mt := range matchers {
		re, err := regexp.Compile("^(?:" + mt[2] + ")$")
		if mt[1] == "=" {
			re, err = regexp.Compile("^" + regexp.QuoteMeta(mt[2]) + "$")
		}
		if err != nil {
			t.Errorf("rules.yml: %s: %v", mt[0], err)
			continue
		}
		hit := false
		for sname := range metricsServices {
			if re.MatchString(sname) {
				read[sname], hit = true, true
			}
		}
		if !hit {
			t.Errorf("rules.yml reads %s, which no metrics Service is named", mt[0])
		}
	}
	for sname := range metricsServices {
		if !read[sname] {
			t.Errorf("no rule of rules.yml reads job %q", sname)
		}
	}
}

// checkPDBs: the processors and the sinks have a budget, it covers the
// role's pods, and it never holds a node drain: with every pod healthy at
// least one may go.
func checkPDBs(t *testing.T, m manifests) {
	for _, want := range []string{"rdmawatch-processor", "rdmawatch-sink"} {
		pdb, ok := m.pdbs[want]
		if !ok {
			t.Errorf("no PodDisruptionBudget %s", want)
			continue
		}
		if got := m.selected(pdb.Spec.Selector.MatchLabels); !slices.Contains(got, "Deployment/"+want) {
			t.Errorf("PodDisruptionBudget %s selects %v, want the pods of Deployment/%s", want, got, want)
		}
	}
	for name, pdb := range m.pdbs {
		if pdb.Metadata.Namespace != "rdmawatch" {
			t.Errorf("PodDisruptionBudget %s: namespace %q, want rdmawatch", name, pdb.Metadata.Namespace)
		}
		sel := m.selected(pdb.Spec.Selector.MatchLabels)
		if len(sel) == 0 {
			t.Errorf("PodDisruptionBudget %s selects no pods", name)
			continue
		}
		pods := 0
		for _, key := range sel {
			if r := m.workloads[key].Spec.Replicas; r != nil {
				pods += *r
			} else {
				pods++
			}
		}
		if (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil) {
			t.Errorf("PodDisruptionBudget %s: want exactly one of minAvailable and maxUnavailable", name)
			continue
		}
		allowed, err := disruptionsAllowed(pdb, pods)
		if err != nil {
			t.Errorf("PodDisruptionBudget %s: %v", name, err)
		} else if allowed < 1 {
			t.Errorf("PodDisruptionBudget %s allows no eviction of its %d pods: it would hold every drain of their nodes", name, pods)
		}
	}
}

// disruptionsAllowed is how many of pods healthy pods the budget lets go,
// rounding as the disruption controller does (percentages up).
func disruptionsAllowed(pdb k8sPDB, pods int) (int, error) {
	value := func(v any) (int, error) {
		switch x := v.(type) {
		case int:
			return x, nil
		case string:
			pct, ok := strings.CutSuffix(x, "%")
			n, err := strconv.Atoi(pct)
			if !ok || err != nil || n < 0 || n > 100 {
				return 0, fmt.Errorf("%q is neither a count nor a percentage", x)
			}
			return (n*pods + 99) / 100, nil
		}
		return 0, fmt.Errorf("%v (%T) is neither a count nor a percentage", v, v)
	}
	if pdb.Spec.MaxUnavailable != nil {
		return value(pdb.Spec.MaxUnavailable)
	}
	n, err := value(pdb.Spec.MinAvailable)
	return pods - n, err
}
