package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The subset of the Kubernetes API the manifests use. Decoding is strict
// (unknown fields are errors), so a misspelt key such as readOnlly fails the
// test instead of being ignored by the check and then by the cluster.
type (
	k8sMeta struct {
		Name        string            `yaml:"name"`
		Namespace   string            `yaml:"namespace"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	}
	k8sHeader struct {
		APIVersion string  `yaml:"apiVersion"`
		Kind       string  `yaml:"kind"`
		Metadata   k8sMeta `yaml:"metadata"`
	}
	k8sConfigMap struct {
		k8sHeader `yaml:",inline"`
		Data      map[string]string `yaml:"data"`
	}
	k8sSecret struct {
		k8sHeader  `yaml:",inline"`
		Type       string            `yaml:"type"`
		StringData map[string]string `yaml:"stringData"`
		Data       map[string]string `yaml:"data"`
	}
	k8sKustomization struct {
		APIVersion string   `yaml:"apiVersion"`
		Kind       string   `yaml:"kind"`
		Namespace  string   `yaml:"namespace"`
		Resources  []string `yaml:"resources"`
		Images     []struct {
			Name    string `yaml:"name"`
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
		} `yaml:"images"`
	}
	k8sWorkload struct {
		k8sHeader `yaml:",inline"`
		Spec      k8sWorkloadSpec `yaml:"spec"`
	}
	// k8sWorkloadSpec is the spec of a Deployment, DaemonSet or Job, and a
	// CronJob's job template.
	k8sWorkloadSpec struct {
		Replicas *int `yaml:"replicas"`
		Strategy *struct {
			Type string `yaml:"type"`
		} `yaml:"strategy"`
		UpdateStrategy *struct {
			Type          string `yaml:"type"`
			RollingUpdate *struct {
				MaxUnavailable any `yaml:"maxUnavailable"`
			} `yaml:"rollingUpdate"`
		} `yaml:"updateStrategy"`
		Selector *struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		BackoffLimit            *int `yaml:"backoffLimit"`
		TTLSecondsAfterFinished *int `yaml:"ttlSecondsAfterFinished"`
		ActiveDeadlineSeconds   *int `yaml:"activeDeadlineSeconds"`
		Template                struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     k8sPodSpec
		} `yaml:"template"`
	}
	k8sCronJob struct {
		k8sHeader `yaml:",inline"`
		Spec      struct {
			Schedule                   string `yaml:"schedule"`
			TimeZone                   string `yaml:"timeZone"`
			ConcurrencyPolicy          string `yaml:"concurrencyPolicy"`
			Suspend                    *bool  `yaml:"suspend"`
			StartingDeadlineSeconds    *int   `yaml:"startingDeadlineSeconds"`
			SuccessfulJobsHistoryLimit *int   `yaml:"successfulJobsHistoryLimit"`
			FailedJobsHistoryLimit     *int   `yaml:"failedJobsHistoryLimit"`
			JobTemplate                struct {
				Metadata k8sMeta         `yaml:"metadata"`
				Spec     k8sWorkloadSpec `yaml:"spec"`
			} `yaml:"jobTemplate"`
		} `yaml:"spec"`
	}
	k8sService struct {
		k8sHeader `yaml:",inline"`
		Spec      struct {
			Type                     string            `yaml:"type"`
			ClusterIP                string            `yaml:"clusterIP"`
			PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
			Selector                 map[string]string `yaml:"selector"`
			Ports                    []struct {
				Name       string `yaml:"name"`
				Protocol   string `yaml:"protocol"`
				Port       int    `yaml:"port"`
				TargetPort any    `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	k8sLabelSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	// k8sServiceMonitor is the Prometheus Operator's
	// monitoring.coreos.com/v1 ServiceMonitor, the fields the manifests use
	// and those its comment tells to add (TLS, basic auth).
	k8sServiceMonitor struct {
		k8sHeader `yaml:",inline"`
		Spec      struct {
			JobLabel          string           `yaml:"jobLabel"`
			Selector          k8sLabelSelector `yaml:"selector"`
			NamespaceSelector struct {
				Any        bool     `yaml:"any"`
				MatchNames []string `yaml:"matchNames"`
			} `yaml:"namespaceSelector"`
			Endpoints []struct {
				Port          string           `yaml:"port"`
				Path          string           `yaml:"path"`
				Scheme        string           `yaml:"scheme"`
				Interval      string           `yaml:"interval"`
				ScrapeTimeout string           `yaml:"scrapeTimeout"`
				TLSConfig     map[string]any   `yaml:"tlsConfig"`
				BasicAuth     map[string]any   `yaml:"basicAuth"`
				Relabelings   []map[string]any `yaml:"relabelings"`
			} `yaml:"endpoints"`
		} `yaml:"spec"`
	}
	k8sPDB struct {
		k8sHeader `yaml:",inline"`
		Spec      struct {
			MinAvailable   any              `yaml:"minAvailable"`
			MaxUnavailable any              `yaml:"maxUnavailable"`
			Selector       k8sLabelSelector `yaml:"selector"`
		} `yaml:"spec"`
	}
	k8sPodSpec struct {
		HostNetwork                   bool             `yaml:"hostNetwork"`
		DNSPolicy                     string           `yaml:"dnsPolicy"`
		RestartPolicy                 string           `yaml:"restartPolicy"`
		AutomountServiceAccountToken  *bool            `yaml:"automountServiceAccountToken"`
		TerminationGracePeriodSeconds *int             `yaml:"terminationGracePeriodSeconds"`
		Tolerations                   []map[string]any `yaml:"tolerations"`
		SecurityContext               *struct {
			RunAsNonRoot   *bool  `yaml:"runAsNonRoot"`
			RunAsUser      *int64 `yaml:"runAsUser"`
			RunAsGroup     *int64 `yaml:"runAsGroup"`
			FSGroup        *int64 `yaml:"fsGroup"`
			SeccompProfile *struct {
				Type string `yaml:"type"`
			} `yaml:"seccompProfile"`
		} `yaml:"securityContext"`
		InitContainers []k8sContainer `yaml:"initContainers"`
		Containers     []k8sContainer `yaml:"containers"`
		Volumes        []k8sVolume    `yaml:"volumes"`
	}
	k8sContainer struct {
		Name    string   `yaml:"name"`
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		EnvFrom []struct {
			ConfigMapRef *struct {
				Name string `yaml:"name"`
			} `yaml:"configMapRef"`
			SecretRef *struct {
				Name string `yaml:"name"`
			} `yaml:"secretRef"`
		} `yaml:"envFrom"`
		Env []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				FieldRef *struct {
					FieldPath string `yaml:"fieldPath"`
				} `yaml:"fieldRef"`
				SecretKeyRef    *k8sKeyRef `yaml:"secretKeyRef"`
				ConfigMapKeyRef *k8sKeyRef `yaml:"configMapKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		LivenessProbe   *k8sProbe `yaml:"livenessProbe"`
		ReadinessProbe  *k8sProbe `yaml:"readinessProbe"`
		Resources       map[string]map[string]string
		SecurityContext *struct {
			AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
			Privileged               *bool  `yaml:"privileged"`
			RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
			RunAsUser                *int64 `yaml:"runAsUser"`
			Capabilities             *struct {
				Drop []string `yaml:"drop"`
				Add  []string `yaml:"add"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name             string `yaml:"name"`
			MountPath        string `yaml:"mountPath"`
			ReadOnly         bool   `yaml:"readOnly"`
			MountPropagation string `yaml:"mountPropagation"`
		} `yaml:"volumeMounts"`
	}
	k8sKeyRef struct {
		Name string `yaml:"name"`
		Key  string `yaml:"key"`
	}
	k8sProbe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port any    `yaml:"port"`
		} `yaml:"httpGet"`
		InitialDelaySeconds int `yaml:"initialDelaySeconds"`
		PeriodSeconds       int `yaml:"periodSeconds"`
		FailureThreshold    int `yaml:"failureThreshold"`
	}
	k8sVolume struct {
		Name     string `yaml:"name"`
		HostPath *struct {
			Path string `yaml:"path"`
			Type string `yaml:"type"`
		} `yaml:"hostPath"`
		EmptyDir *struct {
			SizeLimit string `yaml:"sizeLimit"`
			Medium    string `yaml:"medium"`
		} `yaml:"emptyDir"`
		Secret *struct {
			SecretName string       `yaml:"secretName"`
			Items      []k8sKeyPath `yaml:"items"`
		} `yaml:"secret"`
		ConfigMap *struct {
			Name  string       `yaml:"name"`
			Items []k8sKeyPath `yaml:"items"`
		} `yaml:"configMap"`
	}
	k8sKeyPath struct {
		Key  string `yaml:"key"`
		Path string `yaml:"path"`
	}
)

// manifests is everything in deploy/kubernetes, decoded.
type manifests struct {
	configMaps map[string]k8sConfigMap
	secrets    map[string]k8sSecret
	workloads  map[string]k8sWorkload // by kind/name; a CronJob's job template as CronJob/name
	cronJobs   map[string]k8sCronJob
	services   map[string]k8sService
	monitors   []k8sServiceMonitor
	pdbs       map[string]k8sPDB
	namespaces []string
	kust       *k8sKustomization
	files      []string
}

// strictDecode decodes one YAML document into v, refusing unknown fields.
func strictDecode(doc *yaml.Node, v any) error {
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(v)
}

func loadManifests(t *testing.T, dir string) manifests {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Fatalf("no manifests in %s", dir)
	}
	m := newManifests()
	for _, f := range files {
		m.files = append(m.files, filepath.Base(f))
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var doc yaml.Node
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: document %d: %v", filepath.Base(f), i, err)
			}
			if err := m.add(&doc); err != nil {
				t.Errorf("%s: document %d: %v", filepath.Base(f), i, err)
			}
		}
	}
	return m
}

func newManifests() manifests {
	return manifests{configMaps: map[string]k8sConfigMap{}, secrets: map[string]k8sSecret{}, workloads: map[string]k8sWorkload{},
		cronJobs: map[string]k8sCronJob{}, services: map[string]k8sService{}, pdbs: map[string]k8sPDB{}}
}

func (m *manifests) add(doc *yaml.Node) error {
	var h struct {
		Kind string `yaml:"kind"`
	}
	if err := doc.Decode(&h); err != nil {
		return err
	}
	switch h.Kind {
	case "Namespace":
		var v k8sHeader
		if err := strictDecode(doc, &v); err != nil {
			return fmt.Errorf("Namespace: %w", err)
		}
		m.namespaces = append(m.namespaces, v.Metadata.Name)
	case "ConfigMap":
		var v k8sConfigMap
		if err := strictDecode(doc, &v); err != nil {
			return fmt.Errorf("ConfigMap: %w", err)
		}
		m.configMaps[v.Metadata.Name] = v
	case "Secret":
		var v k8sSecret
		if err := strictDecode(doc, &v); err != nil {
			return fmt.Errorf("Secret: %w", err)
		}
		m.secrets[v.Metadata.Name] = v
	case "Kustomization":
		var v k8sKustomization
		if err := strictDecode(doc, &v); err != nil {
			return fmt.Errorf("Kustomization: %w", err)
		}
		m.kust = &v
	case "Deployment", "DaemonSet", "Job":
		var v k8sWorkload
		if err := strictDecode(doc, &v); err != nil {
			return fmt.Errorf("%s: %w", h.Kind, err)
		}
		m.workloads[h.Kind+"/"+v.Metadata.Name] = v
	case "CronJob":
		var v k8sCronJob
		if err := strictDecode(doc, &v); err != nil {
			return fmt.Errorf("CronJob: %w", err)
		}
		m.cronJobs[v.Metadata.Name] = v
		// Its pods are checked as every workload's are.
		m.workloads["CronJob/"+v.Metadata.Name] = k8sWorkload{k8sHeader: v.k8sHeader, Spec: v.Spec.JobTemplate.Spec}
	case "Service":
		var v k8sService
		if err := strictDecode(doc, &v); err != nil {
			return fmt.Errorf("Service: %w", err)
		}
		m.services[v.Metadata.Name] = v
	case "ServiceMonitor":
		var v k8sServiceMonitor
		if err := strictDecode(doc, &v); err != nil {
			return fmt.Errorf("ServiceMonitor: %w", err)
		}
		m.monitors = append(m.monitors, v)
	case "PodDisruptionBudget":
		var v k8sPDB
		if err := strictDecode(doc, &v); err != nil {
			return fmt.Errorf("PodDisruptionBudget: %w", err)
		}
		m.pdbs[v.Metadata.Name] = v
	default:
		return fmt.Errorf("unexpected kind %q", h.Kind)
	}
	return nil
}

func TestKubernetesManifests(t *testing.T) {
	dir := filepath.Join(root(t), "deploy", "kubernetes")
	m := loadManifests(t, dir)

	for _, want := range []string{"DaemonSet/rdmawatch-collector", "Deployment/rdmawatch-processor", "Deployment/rdmawatch-sink", "Deployment/rdmawatch-alert", "Job/rdmawatch-setup", "CronJob/rdmawatch-retention"} {
		if _, ok := m.workloads[want]; !ok {
			t.Errorf("no %s in deploy/kubernetes", want)
		}
	}
	if !slices.Contains(m.namespaces, "rdmawatch") {
		t.Error("no Namespace rdmawatch")
	}

	for key, w := range m.workloads {
		t.Run(key, func(t *testing.T) {
			checkWorkload(t, m, key, w)
		})
	}
	for name, cj := range m.cronJobs {
		t.Run("CronJob/"+name+"/schedule", func(t *testing.T) {
			checkCronJob(t, cj)
		})
	}
	t.Run("services", func(t *testing.T) {
		checkServices(t, m)
	})
	t.Run("servicemonitor", func(t *testing.T) {
		checkServiceMonitors(t, m)
	})
	t.Run("disruption budgets", func(t *testing.T) {
		checkPDBs(t, m)
	})

	t.Run("kustomization", func(t *testing.T) {
		if m.kust == nil {
			t.Fatal("no kustomization.yaml")
		}
		var want []string
		for _, f := range m.files {
			if f != "kustomization.yaml" {
				want = append(want, f)
			}
		}
		got := append([]string(nil), m.kust.Resources...)
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("kustomization resources %v, want every manifest of the directory %v", got, want)
		}
	})
}

func checkWorkload(t *testing.T, m manifests, key string, w k8sWorkload) {
	if w.Metadata.Namespace != "rdmawatch" {
		t.Errorf("namespace %q, want rdmawatch", w.Metadata.Namespace)
	}
	spec := w.Spec.Template.Spec
	if w.Kind != "Job" && w.Kind != "CronJob" && (w.Spec.Selector == nil || !subset(w.Spec.Selector.MatchLabels, w.Spec.Template.Metadata.Labels)) {
		t.Error("the selector does not select the pod template's labels")
	}
	sc := spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		t.Error("pod runs as uid 0")
	}
	if sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != "RuntimeDefault" {
		t.Error("pod has no RuntimeDefault seccomp profile")
	}
	volumes := map[string]k8sVolume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
		if v.Secret != nil {
			if _, ok := m.secrets[v.Secret.SecretName]; !ok {
				t.Errorf("volume %s: Secret %q is not in deploy/kubernetes", v.Name, v.Secret.SecretName)
			}
		}
		if v.ConfigMap != nil {
			if _, ok := m.configMaps[v.ConfigMap.Name]; !ok {
				t.Errorf("volume %s: ConfigMap %q is not in deploy/kubernetes", v.Name, v.ConfigMap.Name)
			}
		}
		if v.HostPath != nil && w.Kind != "DaemonSet" {
			t.Errorf("volume %s: only the collector may mount a host path", v.Name)
		}
	}
	containers := append(append([]k8sContainer(nil), spec.InitContainers...), spec.Containers...)
	if len(spec.Containers) == 0 {
		t.Fatal("no containers")
	}
	for _, c := range containers {
		// The one exception: the collector's init container that gives
		// the spool's host directory to the collector user (the image is
		// scratch, with no chown; a hostPath is created root-owned).
		spoolOwner := w.Kind == "DaemonSet" && c.Name == "spool-owner" && c.Image == "busybox:1.36"
		if spoolOwner {
			cs := c.SecurityContext
			if cs == nil || cs.Capabilities == nil || !slices.Equal(cs.Capabilities.Drop, []string{"ALL"}) || !slices.Equal(cs.Capabilities.Add, []string{"CHOWN", "FOWNER"}) ||
				cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation {
				t.Errorf("container %s: must drop ALL, add only CHOWN and FOWNER, no privilege escalation", c.Name)
			}
			for _, vm := range c.VolumeMounts {
				if vm.Name != "spool" {
					t.Errorf("container %s mounts %s: only the spool", c.Name, vm.Name)
				}
			}
			continue
		}
		if !strings.HasPrefix(c.Image, "rdmawatch") {
			t.Errorf("container %s: image %q, want the rdmawatch image", c.Name, c.Image)
		}
		cs := c.SecurityContext
		switch {
		case cs == nil:
			t.Errorf("container %s: no securityContext", c.Name)
		default:
			if cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation {
				t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
			}
			if cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem {
				t.Errorf("container %s: readOnlyRootFilesystem is not true", c.Name)
			}
			if cs.Privileged != nil && *cs.Privileged {
				t.Errorf("container %s: privileged", c.Name)
			}
			if cs.Capabilities == nil || !slices.Equal(cs.Capabilities.Drop, []string{"ALL"}) || len(cs.Capabilities.Add) > 0 {
				t.Errorf("container %s: capabilities must drop ALL and add none", c.Name)
			}
		}
		for _, vm := range c.VolumeMounts {
			v, ok := volumes[vm.Name]
			if !ok {
				t.Errorf("container %s mounts volume %q, which the pod does not define", c.Name, vm.Name)
				continue
			}
			if v.HostPath != nil && !vm.ReadOnly && !(vm.Name == "spool" && strings.HasPrefix(v.HostPath.Path, "/var/lib/rdmawatch/")) {
				t.Errorf("container %s: host path %s is mounted writable", c.Name, v.HostPath.Path)
			}
			if (v.Secret != nil || v.ConfigMap != nil) && !vm.ReadOnly {
				t.Errorf("container %s: %s is mounted writable", c.Name, vm.Name)
			}
		}
		for _, ef := range c.EnvFrom {
			if ef.ConfigMapRef != nil {
				if _, ok := m.configMaps[ef.ConfigMapRef.Name]; !ok {
					t.Errorf("container %s: envFrom ConfigMap %q is not defined", c.Name, ef.ConfigMapRef.Name)
				}
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				s, ok := m.secrets[e.ValueFrom.SecretKeyRef.Name]
				if _, has := s.StringData[e.ValueFrom.SecretKeyRef.Key]; !ok || !has {
					t.Errorf("container %s: env %s reads Secret %s key %s, which is not defined", c.Name, e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
				}
			}
		}
	}

	switch w.Kind {
	case "DaemonSet": // the collector
		if !spec.HostNetwork {
			t.Error("the collector needs hostNetwork: ethtool statistics live in the host's network namespace")
		}
		if spec.DNSPolicy != "ClusterFirstWithHostNet" {
			t.Errorf("dnsPolicy %q with hostNetwork, want ClusterFirstWithHostNet to resolve the NATS service", spec.DNSPolicy)
		}
		c := spec.Containers[0]
		if !slices.Equal(c.Args, []string{"collector"}) {
			t.Errorf("args %q, want [collector]", c.Args)
		}
		sys := false
		for _, vm := range c.VolumeMounts {
			if v := volumes[vm.Name]; v.HostPath != nil && v.HostPath.Path == "/sys" {
				sys = vm.MountPath == "/sys" && vm.ReadOnly
			}
		}
		if !sys {
			t.Error("the host's /sys is not mounted read-only at /sys")
		}
		if !envFromField(c, "RDMAWATCH_NODE", "spec.nodeName") {
			t.Error("RDMAWATCH_NODE does not come from spec.nodeName")
		}
		checkProbes(t, c)
	case "Deployment":
		c := spec.Containers[0]
		role := strings.TrimPrefix(w.Metadata.Name, "rdmawatch-")
		if len(c.Args) == 0 || c.Args[0] != role {
			t.Errorf("args %q, want the role %q first", c.Args, role)
		}
		checkProbes(t, c)
	case "Job":
		var cmds []string
		for _, c := range containers {
			cmds = append(cmds, strings.Join(c.Args, " "))
		}
		if len(spec.InitContainers) != 1 || cmds[0] != "streams apply" || !strings.HasPrefix(cmds[len(cmds)-1], "migrate") {
			t.Errorf("setup job runs %q, want `streams apply` (init) then `migrate`", cmds)
		}
		if spec.RestartPolicy != "OnFailure" && spec.RestartPolicy != "Never" {
			t.Errorf("restartPolicy %q", spec.RestartPolicy)
		}
	case "CronJob":
		if spec.RestartPolicy != "OnFailure" && spec.RestartPolicy != "Never" {
			t.Errorf("restartPolicy %q, want OnFailure or Never", spec.RestartPolicy)
		}
		// The command itself is checked against the binary by
		// TestShippedCommandsAreReal.
		if w.Metadata.Name == "rdmawatch-retention" && (len(spec.Containers) != 1 || len(spec.Containers[0].Args) == 0 || spec.Containers[0].Args[0] != "retention") {
			t.Errorf("the retention CronJob does not run `rdmawatch retention`")
		}
	}
}

// checkProbes requires liveness on /healthz and readiness on /readyz at the
// --listen port 9464, which the container exposes.
func checkProbes(t *testing.T, c k8sContainer) {
	t.Helper()
	for _, p := range []struct {
		name  string
		probe *k8sProbe
		path  string
	}{{"livenessProbe", c.LivenessProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("container %s: no HTTP %s", c.Name, p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || fmt.Sprint(p.probe.HTTPGet.Port) != "9464" {
			t.Errorf("container %s: %s on %s port %v, want %s port 9464", c.Name, p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port, p.path)
		}
	}
	exposed := false
	for _, p := range c.Ports {
		exposed = exposed || p.ContainerPort == 9464
	}
	if !exposed {
		t.Errorf("container %s does not expose port 9464", c.Name)
	}
}

func envFromField(c k8sContainer, name, field string) bool {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == field {
			return true
		}
	}
	return false
}

func subset(small, big map[string]string) bool {
	if len(small) == 0 {
		return false
	}
	for k, v := range small {
		if big[k] != v {
			return false
		}
	}
	return true
}

// TestKubernetesStrictDecodeCatchesTypos proves the decoding the manifest
// test relies on refuses a misspelt key, in every kind it reads.
func TestKubernetesStrictDecodeCatchesTypos(t *testing.T) {
	for _, c := range []struct{ kind, src, typo string }{
		{"Deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers:\n        - name: c\n          volumeMounts:\n            - {name: sys, mountPath: /sys, readOnlly: true}\n", "readOnlly"},
		{"CronJob", "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: x}\nspec:\n  schedule: '0 3 * * *'\n  concurrencyPolicy: Forbid\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers:\n            - {name: c, args: [retention], imagePullPolicy: Always}\n", "imagePullPolicy"},
		{"Service", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  ports:\n    - {name: metrics, port: 9464, targetPrt: metrics}\n", "targetPrt"},
		{"ServiceMonitor", "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\nspec:\n  endpoints:\n    - {port: metrics, relabellings: []}\n", "relabellings"},
		{"PodDisruptionBudget", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: x}\nspec:\n  maxUnavailible: 1\n", "maxUnavailible"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte(c.src), &doc); err != nil {
				t.Fatal(err)
			}
			m := newManifests()
			if err := m.add(doc.Content[0]); err == nil || !strings.Contains(err.Error(), c.typo) {
				t.Errorf("a misspelt %s was accepted: %v", c.typo, err)
			}
		})
	}
}
