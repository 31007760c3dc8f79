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
	pods            map[string]*corev1.Pod // helm test
	serviceMonitors map[string]*monitoringv1.ServiceMonitor
	rules           map[string]*monitoringv1.PrometheusRule
	metas           []meta // every object's, in order
	notes           string
}

type meta struct {
	kind string
	metav1.ObjectMeta
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

// decode decodes every rendered document strictly into its API type
// (decodeAll) and checks the names and labels, failing the test on any
// error.
func decode(t *testing.T, rendered map[string]string) objects {
	t.Helper()
	o, err := decodeAll(rendered)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range o.metas {
		checkMeta(t, m.kind, m.ObjectMeta)
	}
	return o
}

// decodeAll decodes every rendered document strictly into its API type:
// unknown fields and duplicate keys are errors, as the API server's
// strict field validation makes them.
func decodeAll(rendered map[string]string) (objects, error) {
	o := objects{
		deployments:     map[string]*appsv1.Deployment{},
		services:        map[string]*corev1.Service{},
		pdbs:            map[string]*policyv1.PodDisruptionBudget{},
		secrets:         map[string]*corev1.Secret{},
		serviceAccounts: map[string]*corev1.ServiceAccount{},
		pods:            map[string]*corev1.Pod{},
		serviceMonitors: map[string]*monitoringv1.ServiceMonitor{},
		rules:           map[string]*monitoringv1.PrometheusRule{},
	}
	for _, file := range slices.Sorted(maps.Keys(rendered)) {
		if strings.HasSuffix(file, "NOTES.txt") {
			o.notes = rendered[file]
			continue
		}
		for i, doc := range docSep.Split(rendered[file], -1) {
			var fields map[string]any
			if err := yaml.Unmarshal([]byte(doc), &fields); err != nil {
				return o, fmt.Errorf("%s document %d: %w\n%s", file, i, err, doc)
			}
			if len(fields) == 0 { // empty, or comments only
				continue
			}
			var head struct {
				APIVersion string            `json:"apiVersion"`
				Kind       string            `json:"kind"`
				Metadata   metav1.ObjectMeta `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil || head.Kind == "" || head.Metadata.Name == "" {
				return o, fmt.Errorf("%s document %d: no kind or name (%v):\n%s", file, i, err, doc)
			}
			if head.Metadata.Namespace != "" {
				return o, fmt.Errorf("%s %s sets metadata.namespace: helm install -n decides", head.Kind, head.Metadata.Name)
			}
			into := o.slot(schema.FromAPIVersionAndKind(head.APIVersion, head.Kind), head.Metadata.Name)
			if into == nil {
				return o, fmt.Errorf("%s: unexpected %s/%s", file, head.APIVersion, head.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				return o, fmt.Errorf("%s: %s %s: %w\n%s", file, head.Kind, head.Metadata.Name, err, doc)
			}
			o.metas = append(o.metas, meta{head.Kind, head.Metadata})
		}
	}
	return o, nil
}

// slot returns a new typed object for gvk, recorded under name, or nil
// for a kind the chart does not make.
func (o objects) slot(gvk schema.GroupVersionKind, name string) any {
	switch gvk {
	case appsv1.SchemeGroupVersion.WithKind("Deployment"):
		return add(o.deployments, name)
	case corev1.SchemeGroupVersion.WithKind("Service"):
		return add(o.services, name)
	case policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"):
		return add(o.pdbs, name)
	case corev1.SchemeGroupVersion.WithKind("Secret"):
		return add(o.secrets, name)
	case corev1.SchemeGroupVersion.WithKind("ServiceAccount"):
		return add(o.serviceAccounts, name)
	case corev1.SchemeGroupVersion.WithKind("Pod"):
		return add(o.pods, name)
	case monitoringv1.SchemeGroupVersion.WithKind("ServiceMonitor"):
		return add(o.serviceMonitors, name)
	case monitoringv1.SchemeGroupVersion.WithKind("PrometheusRule"):
		return add(o.rules, name)
	}
	return nil
}

func add[T any](m map[string]*T, name string) *T {
	v := new(T)
	m[name] = v
	return v
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
