package helm_test

import (
	"log"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// A DSN for the value sets that do not test the store.
const dsn = "store: {dsn: 'postgres://idgen:pw@db:5432/idgen?sslmode=require'}\n"

// valueSets are the configurations every test below renders: both modes
// and both, probes over HTTP and gRPC, Secrets of the user's or
// generated, TLS, monitoring.
var valueSets = []struct {
	name, values string
	modes        []string
}{
	{"segment", dsn, []string{"segment"}},
	{"snowflake", dsn + "mode: snowflake\n", []string{"snowflake"}},
	{"both", dsn + "mode: both\n", []string{"segment", "snowflake"}},
	{"grpc-probes", dsn + "mode: both\nprobes: {type: grpc}\n", []string{"segment", "snowflake"}},
	{"external-secrets", `
store: {existingSecret: idgen-db, existingSecretKey: url}
auth:
  existingSecret: idgen-tokens
  apiTokens: {enabled: true, key: api}
  metricsToken: {enabled: true}
`, []string{"segment"}},
	{"generated-secrets", dsn + `
auth:
  apiTokens:
    enabled: true
    clients:
      - {name: orders, tags: [order, invoice]}
      - {name: batch, tags: ["*"]}
  metricsToken: {enabled: true}
`, []string{"segment"}},
	{"tls", dsn + `
mode: both
tls:
  enabled: true
  secretName: idgen-cert
  clientCA: {enabled: true, secretName: clients-ca}
auth: {metricsToken: {enabled: true}}
metrics:
  serviceMonitor: {enabled: true, tlsCA: {secretName: idgen-ca}, serverName: idgen, clientCertSecret: prometheus-client}
`, []string{"segment", "snowflake"}},
	{"headless", dsn + `
mode: both
service: {headless: {enabled: true}}
`, []string{"segment", "snowflake"}},
	{"monitoring", dsn + `
mode: both
metrics:
  serviceMonitor: {enabled: true, labels: {release: prometheus}}
  prometheusRule: {enabled: true, labels: {release: prometheus}}
serviceAccount: {create: true}
topologySpreadConstraints:
  - {maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
podDisruptionBudget: {minAvailable: 2}
`, []string{"segment", "snowflake"}},
}

// TestLint runs the chart's linters as `helm lint --strict -f VALUES`
// does, for every value set: warnings fail too.
func TestLint(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			l := lint.AllWithKubeVersion(chartDir, readValues(t, vs.values), namespace, kv)
			for _, m := range l.Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
}

// TestDefaults: on its own values, which name no database, the chart
// lints (helm lint, also --strict, notes the missing store and passes),
// while rendering it, as helm template and helm install do, stops with
// one line that names both ways to give one. The check of lint's
// messages would pass for a linter that reports nothing, hence the
// note's text too.
func TestDefaults(t *testing.T) {
	var logged strings.Builder
	log.SetOutput(&logged)
	defer log.SetOutput(dropLines{w: os.Stderr, containing: []byte("found symbolic link in path: ")})
	l := lint.AllWithKubeVersion(chartDir, nil, namespace, nil)
	for _, m := range l.Messages {
		if m.Severity > support.InfoSev {
			t.Errorf("helm lint on the defaults: %s", m)
		}
	}
	if !strings.Contains(logged.String(), "[INFO] Fail: no database: set store.dsn") {
		t.Errorf("helm lint on the defaults noted nothing about the store:\n%s", logged.String())
	}

	_, err := render(t, "", nil)
	if err == nil {
		t.Fatal("the defaults rendered without a database")
	}
	msg := err.Error()
	for _, want := range []string{"store.dsn", "store.existingSecret", "postgres://"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %s", msg, want)
		}
	}
	if strings.Contains(msg, "\n") || strings.Contains(msg, "oneOf") {
		t.Errorf("want one plain line, got %q", msg)
	}
}

func TestRender(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			o := mustDecode(t, vs.values, nil)
			if len(o.deployments) != len(vs.modes) {
				t.Fatalf("%d Deployments, want one per mode %v", len(o.deployments), vs.modes)
			}
			for _, mode := range vs.modes {
				checkMode(t, o, mode)
			}
			checkSeparate(t, o)
			checkHelmTest(t, o, vs.modes)
			if o.notes == "" || !strings.Contains(o.notes, "/id/order") {
				t.Errorf("NOTES.txt has no first request:\n%s", o.notes)
			}
		})
	}
}

const prefix = release + "-idgen-"

// checkMode checks one mode's Deployment, Service and PodDisruptionBudget
// for what docs/deploy.md promises.
func checkMode(t *testing.T, o objects, mode string) {
	t.Helper()
	name := prefix + mode
	d, svc, pdb := o.deployments[name], o.services[name], o.pdbs[name]
	if d == nil || svc == nil || pdb == nil {
		t.Fatalf("%s: want a Deployment, a Service and a PodDisruptionBudget of that name", name)
	}
	pod := d.Spec.Template
	podLabels := labels.Set(pod.Labels)
	checkLabels(t, name+" pod template", pod.Labels)
	sel := func(what string, s map[string]string) {
		if len(s) == 0 || !labels.SelectorFromSet(s).Matches(podLabels) {
			t.Errorf("%s: %s selector %v does not match the pod labels %v", name, what, s, pod.Labels)
		}
	}
	sel("Deployment", d.Spec.Selector.MatchLabels)
	sel("Service", svc.Spec.Selector)
	sel("PodDisruptionBudget", pdb.Spec.Selector.MatchLabels)
	if pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil {
		t.Errorf("%s: PodDisruptionBudget sets neither maxUnavailable nor minAvailable", name)
	}
	if r := d.Spec.Replicas; r == nil || *r < 2 {
		t.Errorf("%s: replicas = %v, want at least 2", name, r)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("%s: rollingUpdate.maxUnavailable must be 0", name)
	}

	ps := pod.Spec
	if sc := ps.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("%s: pod securityContext must set runAsNonRoot and a non-zero runAsUser", name)
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken must be false", name)
	}
	if sa := ps.ServiceAccountName; sa != "default" && o.serviceAccounts[sa] == nil {
		t.Errorf("%s: serviceAccountName %q is neither default nor rendered", name, sa)
	}
	if len(ps.TopologySpreadConstraints) == 0 {
		t.Errorf("%s: no topologySpreadConstraints", name)
	}
	for _, c := range ps.TopologySpreadConstraints {
		if c.LabelSelector == nil || !labels.SelectorFromSet(c.LabelSelector.MatchLabels).Matches(podLabels) {
			t.Errorf("%s: topologySpreadConstraint on %s does not select the pods", name, c.TopologyKey)
		}
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", name, len(ps.Containers))
	}
	c := ps.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("%s: env %s set twice", name, e.Name)
		}
		env[e.Name] = e
	}
	if got := env["IDGEN_MODE"].Value; got != mode {
		t.Errorf("%s: IDGEN_MODE = %q, want %q", name, got, mode)
	}
	if _, ok := env["IDGEN_STORE"]; !ok {
		t.Errorf("%s: no IDGEN_STORE", name)
	}
	for n, e := range env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		checkSecretRef(t, o, name+" env "+n, e.ValueFrom.SecretKeyRef)
	}

	// The grace period covers the preStop pause and the drain.
	drain, err := time.ParseDuration(env["IDGEN_SHUTDOWN_TIMEOUT"].Value)
	if err != nil {
		t.Errorf("%s: IDGEN_SHUTDOWN_TIMEOUT: %v", name, err)
	}
	if _, err := time.ParseDuration(env["IDGEN_LEASE_TTL"].Value); err != nil {
		t.Errorf("%s: IDGEN_LEASE_TTL: %v", name, err)
	}
	var preStop time.Duration
	if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
		preStop = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
	} else {
		t.Errorf("%s: no preStop sleep", name)
	}
	if g := ps.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= preStop+drain {
		t.Errorf("%s: terminationGracePeriodSeconds = %v, want more than preStop %v + drain %v", name, g, preStop, drain)
	}

	// Two container ports: http, and grpc for grpc-go's own transport.
	if len(c.Ports) != 2 || c.Ports[0].Name != "http" || c.Ports[1].Name != "grpc" {
		t.Fatalf("%s: ports = %+v, want http and grpc", name, c.Ports)
	}
	port, grpcPort := c.Ports[0].ContainerPort, c.Ports[1].ContainerPort
	if got := env["IDGEN_ADDR"].Value; got != ":"+strconv.Itoa(int(port)) {
		t.Errorf("%s: IDGEN_ADDR = %q, want :%d (the container port)", name, got, port)
	}
	if got := env["IDGEN_GRPC_ADDR"].Value; got != ":"+strconv.Itoa(int(grpcPort)) {
		t.Errorf("%s: IDGEN_GRPC_ADDR = %q, want :%d (the grpc container port)", name, got, grpcPort)
	}
	tls := env["IDGEN_TLS_CERT"].Value != ""
	scheme := corev1.URISchemeHTTP
	if tls {
		scheme = corev1.URISchemeHTTPS
	}
	checkProbes(t, name, c, grpcPort, scheme)
	checkTLS(t, name, ps, c, env)
	names := map[string]string{}
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.String() != p.Name {
			t.Errorf("%s: Service port %s targets %s, want the container port of its name", name, p.Name, p.TargetPort.String())
		}
		if p.AppProtocol == nil {
			t.Errorf("%s: Service port %s has no appProtocol", name, p.Name)
			continue
		}
		names[p.Name] = *p.AppProtocol
	}
	want := map[string]string{"http": "http", "grpc": "kubernetes.io/h2c"}
	if tls {
		want = map[string]string{"http": "https", "grpc": "https"}
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("%s: Service ports (name: appProtocol) %v, want %v", name, names, want)
	}

	sc := c.SecurityContext
	switch {
	case sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: readOnlyRootFilesystem must be true", name)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: allowPrivilegeEscalation must be false", name)
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL"):
		t.Errorf("%s: must drop ALL capabilities", name)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
			t.Errorf("%s: no %s request", name, r)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		if e := env["GOMEMLIMIT"]; e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil || e.ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
			t.Errorf("%s: GOMEMLIMIT must follow the memory limit", name)
		}
	}
}

// checkProbes: readiness on /readyz or grpc.health.v1 on the container
// port; liveness and startup on /healthz, never on readiness.
func checkProbes(t *testing.T, name string, c corev1.Container, port int32, scheme corev1.URIScheme) {
	t.Helper()
	httpProbe := func(what string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http" || p.HTTPGet.Scheme != scheme {
			t.Errorf("%s: %s probe must GET %s on port http over %s, got %+v", name, what, path, scheme, p)
		}
	}
	switch r := c.ReadinessProbe; {
	case r == nil:
		t.Errorf("%s: no readiness probe", name)
	case r.GRPC != nil:
		// The kubelet's gRPC probe takes a port number, not a name, and
		// speaks no TLS.
		if r.GRPC.Port != port {
			t.Errorf("%s: gRPC readiness probe on port %d, want the grpc container port %d", name, r.GRPC.Port, port)
		}
		if r.GRPC.Service != nil && *r.GRPC.Service != "" {
			t.Errorf("%s: gRPC readiness probe asks for service %q, want \"\" (follows readiness)", name, *r.GRPC.Service)
		}
		if scheme == corev1.URISchemeHTTPS {
			t.Errorf("%s: gRPC probe with TLS on: the kubelet's gRPC probe cannot speak TLS", name)
		}
	default:
		httpProbe("readiness", r, "/readyz")
	}
	httpProbe("liveness", c.LivenessProbe, "/healthz")
	httpProbe("startup", c.StartupProbe, "/healthz")
}

// checkTLS: the certificate files idgen is told about are in mounted
// Secrets, mounted whole (no subPath) so that renewals reach the pod.
func checkTLS(t *testing.T, name string, ps corev1.PodSpec, c corev1.Container, env map[string]corev1.EnvVar) {
	t.Helper()
	vols := map[string]corev1.Volume{}
	for _, v := range ps.Volumes {
		vols[v.Name] = v
	}
	for _, n := range []string{"IDGEN_TLS_CERT", "IDGEN_TLS_KEY", "IDGEN_TLS_CLIENT_CA"} {
		path := env[n].Value
		if path == "" {
			continue
		}
		found := false
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(path, m.MountPath+"/") {
				found = true
				if m.SubPath != "" || !m.ReadOnly {
					t.Errorf("%s: %s mounted with subPath or writable", name, m.Name)
				}
				if v, ok := vols[m.Name]; !ok || v.Secret == nil || v.Secret.SecretName == "" {
					t.Errorf("%s: %s=%s is not in a mounted Secret", name, n, path)
				}
			}
		}
		if !found {
			t.Errorf("%s: %s=%s is under no volume mount", name, n, path)
		}
	}
	if (env["IDGEN_TLS_CERT"].Value == "") != (env["IDGEN_TLS_KEY"].Value == "") {
		t.Errorf("%s: IDGEN_TLS_CERT and IDGEN_TLS_KEY go together", name)
	}
}

// checkSecretRef: a referenced key exists in a rendered Secret, or the
// Secret is the user's (not rendered, so not checked here).
func checkSecretRef(t *testing.T, o objects, what string, ref *corev1.SecretKeySelector) {
	t.Helper()
	s, ok := o.secrets[ref.Name]
	if !ok {
		if strings.HasPrefix(ref.Name, prefix) {
			t.Errorf("%s: Secret %s is the chart's but not rendered", what, ref.Name)
		}
		return
	}
	if _, ok := s.Data[ref.Key]; !ok {
		t.Errorf("%s: Secret %s has no key %q", what, ref.Name, ref.Key)
	}
}

// checkSeparate: with both modes, each Service (and headless Service)
// and budget selects its own mode's pods only, so /id/{tag} behind a
// Service answers in one mode.
func checkSeparate(t *testing.T, o objects) {
	t.Helper()
	for dn, d := range o.deployments {
		pods := labels.Set(d.Spec.Template.Labels)
		for sn, s := range o.services {
			if sn != dn && sn != dn+"-headless" && labels.SelectorFromSet(s.Spec.Selector).Matches(pods) {
				t.Errorf("Service %s selects the pods of %s", sn, dn)
			}
		}
		for pn, p := range o.pdbs {
			if pn != dn && labels.SelectorFromSet(p.Spec.Selector.MatchLabels).Matches(pods) {
				t.Errorf("PodDisruptionBudget %s selects the pods of %s", pn, dn)
			}
		}
	}
}

// checkHelmTest: `helm test` asks each mode's Service for /readyz on its
// HTTP port, from a pod as locked down as the server's; with TLS there is
// no test pod (idgen health cannot trust a private CA).
func checkHelmTest(t *testing.T, o objects, modes []string) {
	t.Helper()
	p := o.pods[release+"-idgen-test-readyz"]
	tls := false
	for _, d := range o.deployments {
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			tls = tls || e.Name == "IDGEN_TLS_CERT"
		}
	}
	if tls {
		if len(o.pods) != 0 {
			t.Errorf("with TLS: test pods %v, want none", slices.Collect(maps.Keys(o.pods)))
		}
		return
	}
	if p == nil || p.Annotations["helm.sh/hook"] != "test" || p.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Fatalf("want a helm test pod that runs once, got %+v", p)
	}
	if len(p.Spec.Containers) != len(modes) {
		t.Fatalf("test pod: %d containers, want one per mode", len(p.Spec.Containers))
	}
	for i, c := range p.Spec.Containers {
		svc := o.services[prefix+modes[i]]
		if svc == nil {
			t.Fatalf("no Service %s", prefix+modes[i])
		}
		url := "http://" + svc.Name + ":" + strconv.Itoa(int(svc.Spec.Ports[0].Port)) + "/readyz"
		if len(c.Args) < 3 || c.Args[0] != "health" || c.Args[1] != "--url" || c.Args[2] != url {
			t.Errorf("test container %s: args %v, want health --url %s", c.Name, c.Args, url)
		}
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("test container %s: root file system not read-only", c.Name)
		}
	}
	if sc := p.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("test pod may run as root")
	}
}

func TestExternalSecrets(t *testing.T) {
	o := mustDecode(t, valuesOf(t, "external-secrets"), nil)
	if len(o.secrets) != 0 {
		t.Errorf("with existing Secrets the chart must make none, made %v", slices.Collect(maps.Keys(o.secrets)))
	}
	c := o.deployments[prefix+"segment"].Spec.Template.Spec.Containers[0]
	want := map[string][2]string{
		"IDGEN_STORE":         {"idgen-db", "url"},
		"IDGEN_ADMIN_TOKEN":   {"idgen-tokens", "admin-token"},
		"IDGEN_API_TOKENS":    {"idgen-tokens", "api"},
		"IDGEN_METRICS_TOKEN": {"idgen-tokens", "metrics-token"},
	}
	for _, e := range c.Env {
		w, ok := want[e.Name]
		if !ok {
			continue
		}
		delete(want, e.Name)
		if r := e.ValueFrom; r == nil || r.SecretKeyRef == nil || r.SecretKeyRef.Name != w[0] || r.SecretKeyRef.Key != w[1] {
			t.Errorf("%s: want secretKeyRef %s/%s, got %+v", e.Name, w[0], w[1], e.ValueFrom)
		}
	}
	if len(want) != 0 {
		t.Errorf("env lacks %v", want)
	}
}

// TestGeneratedSecrets: tokens long enough for idgen, an API token
// specification built from the per-client tokens, and tokens kept across
// upgrades (lookup) but fresh on a new install.
func TestGeneratedSecrets(t *testing.T) {
	values := valuesOf(t, "generated-secrets")
	first := mustDecode(t, values, nil)
	name := prefix + "auth"
	s := first.secrets[name]
	if s == nil {
		t.Fatalf("no Secret %s", name)
	}
	orders, batch := string(s.Data["api-token-orders"]), string(s.Data["api-token-batch"])
	for k, v := range s.Data {
		if len(v) < 16 {
			t.Errorf("%s: %d characters, idgen wants at least 16", k, len(v))
		}
	}
	if spec, want := string(s.Data["api-tokens"]), orders+"=order,invoice;"+batch+"=*"; spec != want {
		t.Errorf("api-tokens = %q, want %q", spec, want)
	}
	store := first.secrets[prefix+"store"]
	if store == nil || !strings.HasPrefix(string(store.Data["store-dsn"]), "postgres://") {
		t.Errorf("store Secret: %+v", store)
	}

	// An upgrade: the Secret is in the cluster, lookup finds it.
	inCluster := cluster{namespace + "/" + name: s}
	again := mustDecode(t, values, inCluster).secrets[name]
	if !reflect.DeepEqual(again.Data, s.Data) {
		t.Errorf("tokens changed across an upgrade:\n%v\n%v", s.Data, again.Data)
	}
	// A new client on upgrade gets a token, the others keep theirs.
	added := strings.Replace(values, "clients:\n", "clients:\n      - {name: billing, tags: [invoice]}\n", 1)
	more := mustDecode(t, added, inCluster).secrets[name]
	if string(more.Data["api-token-orders"]) != orders || len(more.Data["api-token-billing"]) < 16 {
		t.Errorf("adding a client: orders %q -> %q, billing %q", orders, more.Data["api-token-orders"], more.Data["api-token-billing"])
	}
	// A fresh install (nothing to look up) draws new tokens: the check
	// above would pass for constant tokens otherwise.
	fresh := mustDecode(t, values, cluster{}).secrets[name]
	for k := range s.Data {
		if string(fresh.Data[k]) == string(s.Data[k]) {
			t.Errorf("%s: same token in two installs", k)
		}
	}
}

func TestTLS(t *testing.T) {
	o := mustDecode(t, valuesOf(t, "tls"), nil)
	ps := o.deployments[prefix+"snowflake"].Spec.Template.Spec
	env := map[string]string{}
	for _, e := range ps.Containers[0].Env {
		env[e.Name] = e.Value
	}
	secretOf := map[string]string{} // mount path -> Secret
	for _, m := range ps.Containers[0].VolumeMounts {
		for _, v := range ps.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				secretOf[m.MountPath] = v.Secret.SecretName
			}
		}
	}
	for n, want := range map[string]string{"IDGEN_TLS_CERT": "idgen-cert", "IDGEN_TLS_KEY": "idgen-cert", "IDGEN_TLS_CLIENT_CA": "clients-ca"} {
		if got := secretOf[filepath.Dir(env[n])]; got != want {
			t.Errorf("%s=%s is in Secret %q, want %q", n, env[n], got, want)
		}
	}
	if filepath.Base(env["IDGEN_TLS_CLIENT_CA"]) != "ca.crt" || filepath.Base(env["IDGEN_TLS_CERT"]) != "tls.crt" {
		t.Errorf("file names: %v", env)
	}
	sm := o.serviceMonitors[release+"-idgen"]
	if sm == nil || len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor: %+v", sm)
	}
	ep := sm.Spec.Endpoints[0]
	tc := ep.TLSConfig
	switch {
	case ep.Scheme == nil || *ep.Scheme != "https":
		t.Errorf("ServiceMonitor scheme %v, want https", ep.Scheme)
	case tc == nil || tc.CA.Secret == nil || tc.CA.Secret.Name != "idgen-ca":
		t.Errorf("ServiceMonitor must check the server against idgen-ca: %+v", tc)
	case tc.Cert.Secret == nil || tc.Cert.Secret.Name != "prometheus-client" || tc.KeySecret == nil || tc.KeySecret.Name != "prometheus-client":
		t.Errorf("ServiceMonitor must present prometheus-client for mutual TLS: %+v", tc)
	case ep.Authorization == nil || ep.Authorization.Credentials == nil || ep.Authorization.Credentials.Name != prefix+"auth" || ep.Authorization.Credentials.Key != "metrics-token":
		t.Errorf("ServiceMonitor must present the metrics token: %+v", ep.Authorization)
	}
	if !strings.Contains(o.notes, "https://") || !strings.Contains(o.notes, "--cert") {
		t.Errorf("NOTES.txt must give an HTTPS request and mention the client certificate:\n%s", o.notes)
	}
}

// TestMonitoring: the ServiceMonitor finds both modes' Services under the
// job name the rules expect, and the PrometheusRule carries exactly the
// groups of deploy/prometheus/idgen-rules.yml, which promtool tests.
func TestMonitoring(t *testing.T) {
	o := mustDecode(t, valuesOf(t, "monitoring"), nil)
	sm := o.serviceMonitors[release+"-idgen"]
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	if sm.Labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v lack release: prometheus", sm.Labels)
	}
	if len(o.services) != 2 {
		t.Fatalf("%d Services, want 2", len(o.services))
	}
	for n, s := range o.services {
		if !labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(s.Labels)) {
			t.Errorf("ServiceMonitor does not select Service %s", n)
		}
		if job := s.Labels[sm.Spec.JobLabel]; job != "idgen" {
			t.Errorf("Service %s: job label %q = %q, want idgen (IdgenInstanceDown names job=\"idgen\")", n, sm.Spec.JobLabel, job)
		}
		if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == sm.Spec.Endpoints[0].Port }) {
			t.Errorf("Service %s has no port %q", n, sm.Spec.Endpoints[0].Port)
		}
	}

	pr := o.rules[release+"-idgen"]
	if pr == nil {
		t.Fatal("no PrometheusRule")
	}
	want := promRules(t, filepath.Join("..", "prometheus", "idgen-rules.yml"))
	if len(want) == 0 || len(want[0].Rules) < 10 {
		t.Fatalf("deploy/prometheus/idgen-rules.yml: %d groups", len(want))
	}
	if !reflect.DeepEqual(pr.Spec.Groups, want) {
		a, _ := yaml.Marshal(pr.Spec.Groups)
		b, _ := yaml.Marshal(want)
		t.Errorf("the PrometheusRule's groups differ from deploy/prometheus/idgen-rules.yml:\n--- rendered\n%s\n--- file\n%s", a, b)
	}
	for _, r := range pr.Spec.Groups[0].Rules {
		if r.Alert != "" && !strings.Contains(r.Annotations["summary"], "{{ $labels.") {
			t.Errorf("%s: summary %q lost its Prometheus template", r.Alert, r.Annotations["summary"])
		}
	}
	for _, d := range o.deployments {
		ps := d.Spec.Template.Spec
		if ps.ServiceAccountName != release+"-idgen" {
			t.Errorf("%s: serviceAccountName %q, want the chart's", d.Name, ps.ServiceAccountName)
		}
		if c := ps.TopologySpreadConstraints; len(c) != 1 || c[0].MaxSkew != 2 {
			t.Errorf("%s: topologySpreadConstraints %+v, want the one given", d.Name, c)
		}
	}
	for n, p := range o.pdbs {
		if p.Spec.MinAvailable == nil || p.Spec.MinAvailable.IntValue() != 2 || p.Spec.MaxUnavailable != nil {
			t.Errorf("%s: want minAvailable 2 alone, got %+v", n, p.Spec)
		}
	}
}

// TestRulesLink: the chart's rules file is a link to the promtool-tested
// one, so that `helm package` and the PrometheusRule see the same text.
// A copy would pass TestMonitoring only until one of the two changes.
func TestRulesLink(t *testing.T) {
	link := filepath.Join(chartDir, "files", "idgen-rules.yml")
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatalf("%s must be a symbolic link to deploy/prometheus/idgen-rules.yml: %v", link, err)
	}
	got, err := filepath.Abs(filepath.Join(filepath.Dir(link), target))
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs(filepath.Join("..", "prometheus", "idgen-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("%s -> %s, want %s", link, got, want)
	}
	if _, err := os.Stat(link); err != nil {
		t.Errorf("%s: %v", link, err)
	}
}

// promRules decodes a Prometheus rule file strictly into the Prometheus
// Operator's groups: a field the operator does not know fails here.
func promRules(t *testing.T, path string) []monitoringv1.RuleGroup {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f.Groups
}

// TestStrictDecoding makes sure decode would catch a typo in a template
// or a kind it does not know.
func TestStrictDecoding(t *testing.T) {
	out, err := render(t, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{"readinessProbe:", "readynessProbe:", `unknown field "readynessProbe"`},
		{"kind: PodDisruptionBudget", "kind: PodDisruptionBudgets", "unexpected policy/v1/PodDisruptionBudgets"},
		{"  selector:\n", "  selector:\n  selector:\n", `"selector" already set`},
	} {
		bad := maps.Clone(out)
		changed := false
		for file, s := range bad {
			if strings.Contains(s, tc.from) {
				bad[file] = strings.Replace(s, tc.from, tc.to, 1)
				changed = true
				break
			}
		}
		if !changed {
			t.Fatalf("nothing rendered contains %q", tc.from)
		}
		if _, err := decodeAll(bad); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q -> %q: err = %v, want %q", tc.from, tc.to, err, tc.want)
		}
	}
}

// valuesOf returns the value set of that name.
func valuesOf(t *testing.T, name string) string {
	t.Helper()
	for _, vs := range valueSets {
		if vs.name == name {
			return vs.values
		}
	}
	t.Fatalf("no value set %q", name)
	return ""
}

// TestDocsExample renders the values example of docs/deploy.md (Helm), so
// that the documented install keeps working.
func TestDocsExample(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Helm\n")
	if !ok {
		t.Fatal("docs/deploy.md has no Helm section")
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatal("docs/deploy.md, Helm: no yaml block")
	}
	values, _, _ := strings.Cut(block, "```")
	o := mustDecode(t, values, nil)
	for _, mode := range []string{"segment", "snowflake"} {
		checkMode(t, o, mode)
	}
	if len(o.serviceMonitors) != 1 || len(o.rules) != 1 {
		t.Errorf("want a ServiceMonitor and a PrometheusRule, got %d and %d", len(o.serviceMonitors), len(o.rules))
	}
	if s := o.secrets[prefix+"auth"]; s == nil || len(s.Data["api-token-orders"]) == 0 {
		t.Errorf("no generated token for the client orders: %v", s)
	}
}

// TestLintCIValues: helm lint passes on each of the chart's own ci/
// values files, the ones chart-testing installs.
func TestLintCIValues(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("ci/ values files: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			l := lint.AllWithKubeVersion(chartDir, readValues(t, string(b)), namespace, kv)
			for _, m := range l.Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
}

// TestMutualTLSProbes: under mutual TLS the probes are plain HTTPS GETs of
// /readyz and /healthz, which idgen answers without a client certificate
// (cmd/idgen's TestServe_MutualTLSProbes shows it with curl), and no
// probe is a gRPC one, which the kubelet sends without TLS.
func TestMutualTLSProbes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "ci", "mtls-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	o := mustDecode(t, string(b), nil)
	if len(o.deployments) != 2 {
		t.Fatalf("%d Deployments, want both modes'", len(o.deployments))
	}
	for name, d := range o.deployments {
		c := d.Spec.Template.Spec.Containers[0]
		for probe, want := range map[*corev1.Probe]string{c.ReadinessProbe: "/readyz", c.LivenessProbe: "/healthz", c.StartupProbe: "/healthz"} {
			if probe == nil || probe.HTTPGet == nil || probe.GRPC != nil || probe.Exec != nil {
				t.Fatalf("%s: probe %+v, want an HTTPS GET of %s", name, probe, want)
			}
			if probe.HTTPGet.Path != want || probe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
				t.Errorf("%s: probe %s %s, want HTTPS %s", name, probe.HTTPGet.Scheme, probe.HTTPGet.Path, want)
			}
		}
	}
}
