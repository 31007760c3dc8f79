package kubernetes_test

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// manifest is one file's objects.
type manifest struct {
	secret  *corev1.Secret
	deploy  *appsv1.Deployment
	service *corev1.Service
	pdb     *policyv1.PodDisruptionBudget
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// load decodes every document of path strictly into its API type.
func load(t *testing.T, path string) manifest {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	for i, doc := range docSep.Split(string(raw), -1) {
		if len(bytes.TrimSpace([]byte(stripComments(doc)))) == 0 {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("%s document %d: %v", path, i, err)
		}
		gvk := schema.FromAPIVersionAndKind(head.APIVersion, head.Kind)
		var into any
		switch gvk {
		case corev1.SchemeGroupVersion.WithKind("Secret"):
			m.secret = &corev1.Secret{}
			into = m.secret
		case appsv1.SchemeGroupVersion.WithKind("Deployment"):
			m.deploy = &appsv1.Deployment{}
			into = m.deploy
		case corev1.SchemeGroupVersion.WithKind("Service"):
			m.service = &corev1.Service{}
			into = m.service
		case policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"):
			m.pdb = &policyv1.PodDisruptionBudget{}
			into = m.pdb
		default:
			t.Fatalf("%s document %d: unexpected %s", path, i, gvk)
		}
		// Strict: unknown fields and duplicate keys are errors, as
		// kubectl's server-side field validation would make them.
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s: %s: %v", path, gvk.Kind, err)
		}
	}
	if m.secret == nil || m.deploy == nil || m.service == nil || m.pdb == nil {
		t.Fatalf("%s: want a Secret, a Deployment, a Service and a PodDisruptionBudget", path)
	}
	return m
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func TestManifests(t *testing.T) {
	for _, mode := range []string{"segment", "snowflake"} {
		t.Run(mode, func(t *testing.T) {
			m := load(t, "idgen-"+mode+".yaml")
			checkDeployment(t, m, mode)
		})
	}
}

func checkDeployment(t *testing.T, m manifest, mode string) {
	d := m.deploy
	pod := d.Spec.Template
	podLabels := labels.Set(pod.Labels)

	// Every selector picks exactly this Deployment's pods.
	sel := func(what string, s map[string]string) {
		if len(s) == 0 || !labels.SelectorFromSet(s).Matches(podLabels) {
			t.Errorf("%s selector %v does not match the pod labels %v", what, s, pod.Labels)
		}
	}
	sel("Deployment", d.Spec.Selector.MatchLabels)
	sel("Service", m.service.Spec.Selector)
	sel("PodDisruptionBudget", m.pdb.Spec.Selector.MatchLabels)
	if m.pdb.Spec.MaxUnavailable == nil && m.pdb.Spec.MinAvailable == nil {
		t.Error("PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
	}

	if r := d.Spec.Replicas; r == nil || *r < 2 {
		t.Errorf("replicas = %v, want at least 2 so that a drain keeps one serving", r)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Error("rollingUpdate.maxUnavailable must be 0: a new pod is ready before an old one stops")
	}

	ps := pod.Spec
	if sc := ps.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Error("pod securityContext must set runAsNonRoot: true and a non-zero runAsUser")
	}
	if len(ps.TopologySpreadConstraints) == 0 {
		t.Error("no topologySpreadConstraints")
	}
	for _, c := range ps.TopologySpreadConstraints {
		if c.LabelSelector == nil || !labels.SelectorFromSet(c.LabelSelector.MatchLabels).Matches(podLabels) {
			t.Errorf("topologySpreadConstraint on %s does not select the pods", c.TopologyKey)
		}
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(ps.Containers))
	}
	c := ps.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if !strings.HasPrefix(e.Name, "IDGEN_") {
			t.Errorf("env %s: idgen reads only IDGEN_* variables", e.Name)
		}
		env[e.Name] = e
	}
	if env["IDGEN_MODE"].Value != mode {
		t.Errorf("IDGEN_MODE = %q, want %q", env["IDGEN_MODE"].Value, mode)
	}
	for _, name := range []string{"IDGEN_STORE", "IDGEN_ADMIN_TOKEN"} {
		ref := env[name].ValueFrom
		if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != m.secret.Name {
			t.Errorf("%s must come from the Secret %s", name, m.secret.Name)
			continue
		}
		if _, ok := m.secret.StringData[ref.SecretKeyRef.Key]; !ok {
			t.Errorf("%s: the Secret has no key %q", name, ref.SecretKeyRef.Key)
		}
	}

	// The grace period covers the preStop pause and the drain.
	drain, err := time.ParseDuration(env["IDGEN_SHUTDOWN_TIMEOUT"].Value)
	if err != nil {
		t.Errorf("IDGEN_SHUTDOWN_TIMEOUT: %v; set it so that the grace period can be checked against it", err)
	}
	var preStop time.Duration
	if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
		preStop = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
	} else {
		t.Error("no preStop sleep: pods would stop serving before the endpoint removal has spread")
	}
	if g := ps.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= preStop+drain {
		t.Errorf("terminationGracePeriodSeconds = %v, want more than preStop %v + drain %v", g, preStop, drain)
	}
	if mode == "snowflake" {
		if _, err := time.ParseDuration(env["IDGEN_LEASE_TTL"].Value); err != nil {
			t.Errorf("IDGEN_LEASE_TTL: %v", err)
		}
	}

	// Probes on the routes the server serves, on the named port.
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("ports = %+v, want one named http on 8080", c.Ports)
	}
	probe := func(what string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe must GET %s on port http", what, path)
		}
	}
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("liveness", c.LivenessProbe, "/healthz")
	if m.service.Spec.Ports[0].TargetPort.String() != "http" {
		t.Error("the Service must target the port named http")
	}

	sc := c.SecurityContext
	switch {
	case sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("container securityContext.readOnlyRootFilesystem must be true")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("container securityContext.allowPrivilegeEscalation must be false")
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL"):
		t.Error("container must drop ALL capabilities")
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
			t.Errorf("no %s request", r)
		}
	}
}

// TestStrictDecoding makes sure the check above would catch a typo: a
// misspelt field must fail to decode.
func TestStrictDecoding(t *testing.T) {
	raw, err := os.ReadFile("idgen-segment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(raw), "readinessProbe:", "readynessProbe:", 1)
	for _, doc := range docSep.Split(bad, -1) {
		if !strings.Contains(doc, "kind: Deployment") {
			continue
		}
		err := yaml.UnmarshalStrict([]byte(doc), &appsv1.Deployment{})
		if err == nil || !strings.Contains(err.Error(), "readynessProbe") {
			t.Fatalf("misspelt field: err = %v, want an unknown-field error", err)
		}
		return
	}
	t.Fatal("idgen-segment.yaml: no Deployment")
}
