package helm_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

const (
	chartDir  = "idgen"
	release   = "ids"
	namespace = "idgen-test"
	// The oldest Kubernetes the chart supports (Chart.yaml kubeVersion):
	// the preStop sleep handler needs 1.30.
	kubeVersion = "v1.30.0"
)

// objects is one render's Kubernetes objects, by name, each decoded
// strictly into its API type.
type objects struct {
	deployments     map[string]*appsv1.Deployment
	services        map[string]*corev1.Service
	pdbs            map[string]*policyv1.PodDisruptionBudget
	secrets         map[string]*corev1.Secret
	serviceAccounts map[string]*corev1.ServiceAccount
	serviceMonitors map[string]*monitoringv1.ServiceMonitor
	rules           map[string]*monitoringv1.PrometheusRule
	notes           string
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// readValues parses a values overlay as `helm install -f` does.
func readValues(t *testing.T, overlay string) chartutil.Values {
	t.Helper()
	v, err := chartutil.ReadValues([]byte(overlay))
	if err != nil {
		t.Fatalf("values %q: %v", overlay, err)
	}
	return v
}

// render renders the chart with a values overlay as `helm install` would
// (schema validation included) against kubeVersion. cluster answers the
// templates' lookups; nil answers nothing, as `helm template` does.
func render(t *testing.T, overlay string, cluster engine.ClientProvider) (map[string]string, error) {
	t.Helper()
	ch := loadChart(t)
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	caps.KubeVersion = *kv
	vals, err := chartutil.ToRenderValues(ch, readValues(t, overlay),
		chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true, Revision: 1}, caps)
	if err != nil {
		return nil, err
	}
	// Strict: a template that reads a value the chart does not have
	// fails instead of rendering it empty.
	// The SDK has no strict engine with a client, so renders that
	// answer lookups are not strict; every value set is also rendered
	// without one.
	if cluster != nil {
		return engine.RenderWithClientProvider(ch, vals, cluster)
	}
	return engine.Engine{Strict: true}.Render(ch, vals)
}

// mustDecode renders and decodes, failing the test on any error.
func mustDecode(t *testing.T, overlay string, cluster engine.ClientProvider) objects {
	t.Helper()
	out, err := render(t, overlay, cluster)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return decode(t, out)
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decode decodes every rendered document strictly into its API type:
// unknown fields and duplicate keys are errors, as the API server's
// strict field validation makes them.
func decode(t *testing.T, rendered map[string]string) objects {
	t.Helper()
	o := objects{
		deployments:     map[string]*appsv1.Deployment{},
		services:        map[string]*corev1.Service{},
		pdbs:            map[string]*policyv1.PodDisruptionBudget{},
		secrets:         map[string]*corev1.Secret{},
		serviceAccounts: map[string]*corev1.ServiceAccount{},
		serviceMonitors: map[string]*monitoringv1.ServiceMonitor{},
		rules:           map[string]*monitoringv1.PrometheusRule{},
	}
	for _, file := range slices.Sorted(maps.Keys(rendered)) {
		if strings.HasSuffix(file, "NOTES.txt") {
			o.notes = rendered[file]
			continue
		}
		for i, doc := range docSep.Split(rendered[file], -1) {
			var head struct {
				APIVersion string            `json:"apiVersion"`
				Kind       string            `json:"kind"`
				Metadata   metav1.ObjectMeta `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s document %d: %v\n%s", file, i, err, doc)
			}
			if head.Kind == "" && head.APIVersion == "" {
				if strings.TrimSpace(stripComments(doc)) != "" {
					t.Fatalf("%s document %d has no kind:\n%s", file, i, doc)
				}
				continue
			}
			into := o.slot(t, schema.FromAPIVersionAndKind(head.APIVersion, head.Kind), head.Metadata.Name)
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("%s: %s %s: %v\n%s", file, head.Kind, head.Metadata.Name, err, doc)
			}
			if head.Metadata.Namespace != "" {
				t.Errorf("%s %s sets metadata.namespace: helm install -n decides", head.Kind, head.Metadata.Name)
			}
			checkMeta(t, head.Kind, head.Metadata)
		}
	}
	return o
}

// slot returns a new typed object for gvk, recorded under name.
func (o objects) slot(t *testing.T, gvk schema.GroupVersionKind, name string) runtime.Object {
	t.Helper()
	put := func(m any, v runtime.Object) runtime.Object {
		switch m := m.(type) {
		case map[string]*appsv1.Deployment:
			m[name] = v.(*appsv1.Deployment)
		case map[string]*corev1.Service:
			m[name] = v.(*corev1.Service)
		case map[string]*policyv1.PodDisruptionBudget:
			m[name] = v.(*policyv1.PodDisruptionBudget)
		case map[string]*corev1.Secret:
			m[name] = v.(*corev1.Secret)
		case map[string]*corev1.ServiceAccount:
			m[name] = v.(*corev1.ServiceAccount)
		case map[string]*monitoringv1.ServiceMonitor:
			m[name] = v.(*monitoringv1.ServiceMonitor)
		case map[string]*monitoringv1.PrometheusRule:
			m[name] = v.(*monitoringv1.PrometheusRule)
		}
		return v
	}
	if name == "" {
		t.Fatalf("%s without a name", gvk.Kind)
	}
	switch gvk {
	case appsv1.SchemeGroupVersion.WithKind("Deployment"):
		return put(o.deployments, &appsv1.Deployment{})
	case corev1.SchemeGroupVersion.WithKind("Service"):
		return put(o.services, &corev1.Service{})
	case policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"):
		return put(o.pdbs, &policyv1.PodDisruptionBudget{})
	case corev1.SchemeGroupVersion.WithKind("Secret"):
		return put(o.secrets, &corev1.Secret{})
	case corev1.SchemeGroupVersion.WithKind("ServiceAccount"):
		return put(o.serviceAccounts, &corev1.ServiceAccount{})
	case monitoringv1.SchemeGroupVersion.WithKind("ServiceMonitor"):
		return put(o.serviceMonitors, &monitoringv1.ServiceMonitor{})
	case monitoringv1.SchemeGroupVersion.WithKind("PrometheusRule"):
		return put(o.rules, &monitoringv1.PrometheusRule{})
	}
	t.Fatalf("unexpected %s", gvk)
	return nil
}

// checkMeta checks what strict decoding cannot and the API server would
// refuse: names (a Service's is a DNS-1035 label, used in DNS names;
// the others' DNS-1123 subdomains) and label keys and values.
func checkMeta(t *testing.T, kind string, m metav1.ObjectMeta) {
	t.Helper()
	isName := validation.IsDNS1123Subdomain
	if kind == "Service" {
		isName = validation.IsDNS1035Label
	}
	for _, msg := range isName(m.Name) {
		t.Errorf("%s name %q: %s", kind, m.Name, msg)
	}
	checkLabels(t, kind+" "+m.Name, m.Labels)
}

func checkLabels(t *testing.T, what string, l map[string]string) {
	t.Helper()
	for k, v := range l {
		for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
			t.Errorf("%s: label %s=%q: %s", what, k, v, msg)
		}
	}
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

// cluster answers the chart's lookups of Secrets from objects "in the
// cluster", as the API server would on `helm upgrade`.
type cluster map[string]*corev1.Secret // by namespace/name

func (c cluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	if apiVersion != "v1" || kind != "Secret" {
		return nil, false, fmt.Errorf("the chart looked up %s %s: only v1 Secrets are expected", apiVersion, kind)
	}
	return secrets{c: c}, true, nil
}

// secrets implements the Get that lookup calls; the embedded interface
// is nil, so any other call panics, which would show a lookup the test
// does not expect.
type secrets struct {
	dynamic.NamespaceableResourceInterface
	c  cluster
	ns string
}

func (s secrets) Namespace(ns string) dynamic.ResourceInterface { s.ns = ns; return s }

func (s secrets) Get(_ context.Context, name string, _ metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	sec, ok := s.c[s.ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	// As the API server returns it: data only, base64 in JSON.
	stored := sec.DeepCopy()
	for k, v := range stored.StringData {
		if stored.Data == nil {
			stored.Data = map[string][]byte{}
		}
		stored.Data[k] = []byte(v)
	}
	stored.StringData = nil
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stored)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: u}, nil
}
