package helm_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestSchemaRejects: values.schema.json refuses each bad value, with an
// error that points at it, before anything renders.
func TestSchemaRejects(t *testing.T) {
	for _, tc := range []struct {
		name, values, at string
	}{
		{"unknown mode", dsn + "mode: leaf\n", "/mode"},
		{"misspelt key", dsn + "replicas: 3\n", "replicas"},
		{"misspelt nested key", dsn + "probes: {tpye: grpc}\n", "tpye"},
		{"one replica too few", dsn + "replicaCount: 0\n", "/replicaCount"},
		{"replicas as text", dsn + "replicaCount: three\n", "/replicaCount"},
		{"both DSN and Secret", "store: {dsn: 'postgres://db/idgen', existingSecret: db}\n", "/store/existingSecret"},
		{"SQLite in a Deployment", "store: {dsn: 'sqlite:///data/idgen.db'}\n", "/store/dsn"},
		{"name too long", dsn + "fullnameOverride: " + strings.Repeat("n", 54) + "\n", "/fullnameOverride"},
		{"name not a DNS label", dsn + "fullnameOverride: 1d\n", "/fullnameOverride"},
		{"liveness needing two successes", dsn + "probes: {liveness: {successThreshold: 2}}\n", "/probes/liveness"},
		{"unknown probe key", dsn + "probes: {readiness: {path: /x}}\n", "/probes/readiness"},
		{"unknown probe type", dsn + "probes: {type: exec}\n", "/probes/type"},
		{"gRPC probe with TLS", dsn + "probes: {type: grpc}\ntls: {enabled: true, secretName: cert}\n", "/probes/type"},
		{"TLS without a Secret", dsn + "tls: {enabled: true}\n", "/tls"},
		{"mutual TLS without TLS", dsn + "tls: {clientCA: {enabled: true, secretName: ca}}\n", "/tls/enabled"},
		{"mutual TLS, Prometheus without a certificate", dsn + "tls: {enabled: true, secretName: cert, clientCA: {enabled: true}}\nmetrics: {serviceMonitor: {enabled: true}}\n", "/metrics/serviceMonitor"},
		{"API tokens on, no client", dsn + "auth: {apiTokens: {enabled: true}}\n", "/auth/apiTokens"},
		{"API client without tags", dsn + "auth: {apiTokens: {enabled: true, clients: [{name: a, tags: []}]}}\n", "/auth/apiTokens/clients/0/tags"},
		{"invalid tag", dsn + "auth: {apiTokens: {enabled: true, clients: [{name: a, tags: [order/1]}]}}\n", "/auth/apiTokens/clients/0/tags/0"},
		{"client name not a key", dsn + "auth: {apiTokens: {enabled: true, clients: [{name: Orders_1, tags: [order]}]}}\n", "/auth/apiTokens/clients/0/name"},
		{"Secret key with a slash", dsn + "auth: {adminToken: {key: a/b}}\n", "/auth/adminToken/key"},
		{"bad Secret name", "store: {existingSecret: My_Secret}\n", "/store"},
		{"bad lease TTL", dsn + "config: {leaseTTL: 30}\n", "/config/leaseTTL"},
		{"bad log format", dsn + "config: {logFormat: xml}\n", "/config/logFormat"},
		{"port out of range", dsn + "containerPort: 70000\n", "/containerPort"},
		{"service type", dsn + "service: {type: ExternalName}\n", "/service/type"},
		{"PDB bound as text", dsn + "podDisruptionBudget: {minAvailable: half}\n", "/podDisruptionBudget/minAvailable"},
		{"root", dsn + "podSecurityContext: {runAsNonRoot: false}\n", "/podSecurityContext/runAsNonRoot"},
		{"writable root", dsn + "securityContext: {readOnlyRootFilesystem: false}\n", "/securityContext/readOnlyRootFilesystem"},
		{"image digest", dsn + "image: {digest: latest}\n", "/image/digest"},
		{"no tag nor digest", dsn + "image: {tag: ''}\n", "/image"},
		{"memory limit not a quantity", dsn + "resources: {limits: {memory: lots}}\n", "/resources/limits/memory"},
		{"memory request not a quantity", dsn + "resources: {requests: {memory: 64 MiB}}\n", "/resources/requests/memory"},
		{"memory in millibytes", dsn + "resources: {limits: {memory: 256m}}\n", "/resources/limits/memory"},
		{"negative memory", dsn + "resources: {limits: {memory: -1}}\n", "/resources/limits/memory"},
		{"CPU request not a quantity", dsn + "resources: {requests: {cpu: lots}}\n", "/resources/requests/cpu"},
		{"CPU limit in cores with a unit", dsn + "resources: {limits: {cpu: 2cores}}\n", "/resources/limits/cpu"},
		{"other resource not a quantity", dsn + "resources: {limits: {ephemeral-storage: big}}\n", "/resources/limits/ephemeral-storage"},
		{"headless misspelt", dsn + "service: {headless: {enable: true}}\n", "enable"},
		{"single replica opt-in as text", dsn + "allowSingleReplica: 'yes'\n", "/allowSingleReplica"},
		{"spread without key", dsn + "topologySpreadConstraints: [{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]\n", "/topologySpreadConstraints/0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, tc.values, nil)
			if err == nil {
				t.Fatalf("values %q rendered; want a schema error at %s", tc.values, tc.at)
			}
			if msg := err.Error(); !strings.Contains(msg, "schema") || !strings.Contains(msg, tc.at) {
				t.Fatalf("want a schema error at %s, got: %v", tc.at, err)
			}
		})
	}
}

// TestSchemaAccepts: each value set renders (TestRender), and so do
// values at the edges of what the schema allows.
func TestSchemaAccepts(t *testing.T) {
	for _, values := range []string{
		dsn + "replicaCount: 1\nallowSingleReplica: true\n",
		dsn + "resources: {requests: {cpu: 0.5, memory: 134217728}, limits: {cpu: 2, memory: 1.5Gi}}\n",
		dsn + "resources: {requests: {cpu: '.5', memory: 1e9}, limits: {cpu: 1500m, memory: 1G, ephemeral-storage: 1Gi}}\n",
		dsn + "resources: {}\n",
		dsn + "service: {headless: {enabled: true}}\nmode: both\n",
		// The longest name: <44 characters>-snowflake-headless is 63.
		dsn + "mode: both\nservice: {headless: {enabled: true}}\nfullnameOverride: " + strings.Repeat("n", 44) + "\n",
		dsn + "probes: {readiness: {successThreshold: 2}}\n",
		"store: {dsn: 'mysql://idgen:pw@tcp(db:3306)/idgen'}\n",
		"store: {existingSecret: db.example}\n",
		dsn + "podDisruptionBudget: {maxUnavailable: 50%}\n",
		dsn + "podDisruptionBudget: {enabled: false}\n",
		dsn + "image: {tag: '', digest: sha256:" + strings.Repeat("ab", 32) + "}\n",
		dsn + "config: {leaseTTL: 1m30s}\n",
		dsn + "auth: {adminToken: {enabled: false}}\n",
		dsn + "service: {grpc: {enabled: false}}\n",
		dsn + "extraEnv: [{name: GODEBUG, value: 'http2debug=1'}]\n",
		dsn + "global: {imageRegistry: example}\n",
		// The longest names: <53 characters>-snowflake is 63.
		dsn + "mode: both\nfullnameOverride: " + strings.Repeat("n", 53) + "\n",
		dsn + "mode: both\nnameOverride: " + strings.Repeat("n", 53) + "\n",
	} {
		out, err := render(t, values, nil)
		if err != nil {
			t.Errorf("values %q: %v", values, err)
			continue
		}
		decode(t, out)
	}
}

// TestTemplateRefuses: what the schema cannot express, the templates
// refuse with a message that says what to change.
func TestTemplateRefuses(t *testing.T) {
	for _, tc := range []struct{ name, values, want string }{
		{"grace period too short", dsn + "terminationGracePeriodSeconds: 15\n", "terminationGracePeriodSeconds (15) must exceed"},
		{"one Service port twice", dsn + "service: {grpc: {port: 80}}\n", "service.grpc.port (80) must differ"},
		{"no store", "", "no database: set store.dsn"},
		{"no store, empty strings", "store: {dsn: '', existingSecret: ''}\n", "or store.existingSecret"},
		{"one replica", dsn + "replicaCount: 1\n", "set replicaCount to 2 or more, or allowSingleReplica: true"},
		{"one replica, opt-in off", dsn + "replicaCount: 1\nallowSingleReplica: false\n", "replicaCount is 1"},
		{"headless name too long", dsn + "mode: both\nservice: {headless: {enabled: true}}\nfullnameOverride: " + strings.Repeat("n", 53) + "\n",
			"more than the 63 of a DNS label; the names' prefix " + strings.Repeat("n", 53) + " must be at most 44 characters for it (it is 53)"},
		{"headless name too long for snowflake", dsn + "mode: snowflake\nservice: {headless: {enabled: true}}\nfullnameOverride: " + strings.Repeat("n", 45) + "\n",
			"must be at most 44 characters for it (it is 45)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, tc.values, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestQuantities: the schema's quantity patterns accept what the API
// server parses as a quantity, and refuse the rest, for cpu and for
// memory; memory also refuses the fractions of a byte (m, u, n), which
// the API server takes but no one means.
func TestQuantities(t *testing.T) {
	for _, q := range []string{
		"1", "0", "100m", "0.5", ".5", "5.", "1.5Gi", "64Mi", "1Ki", "2Ei", "1k", "1M", "1G", "1T", "1P", "1E",
		"1e3", "1E3", "1e-3", "1e+3", "1n", "1u", "250m",
		"lots", "1KB", "1kb", "64 Mi", "1ki", "1mi", "Gi", "", "1.2.3", "1e", "e3", "-1", "+1", "1g", "0x10", "1Mib",
	} {
		_, parseErr := resource.ParseQuantity(q)
		// Signed values parse, but no resource is negative; a suffix
		// without a number before it parses as 0, but is a typo.
		digits := strings.TrimPrefix(q, ".")
		k8sOK := parseErr == nil && digits != "" && digits[0] >= '0' && digits[0] <= '9'
		fraction := strings.HasSuffix(q, "m") || strings.HasSuffix(q, "u") || strings.HasSuffix(q, "n")
		for _, tc := range []struct {
			resource string
			want     bool
		}{
			{"cpu", k8sOK},
			{"memory", k8sOK && !fraction},
		} {
			values := dsn + "resources: {limits: {" + tc.resource + ": '" + q + "'}}\n"
			_, err := render(t, values, nil)
			if got := err == nil; got != tc.want {
				t.Errorf("%s %q: accepted %v, want %v (ParseQuantity: %v): %v", tc.resource, q, got, tc.want, parseErr, err)
			}
		}
	}
}

// TestSingleReplica: with allowSingleReplica, one pod per mode renders,
// and NOTES.txt says what it costs; with two pods it says nothing.
func TestSingleReplica(t *testing.T) {
	for _, tc := range []struct {
		values string
		pods   int32
		warns  bool
	}{
		{dsn + "mode: both\nreplicaCount: 1\nallowSingleReplica: true\n", 1, true},
		{dsn + "replicaCount: 2\nallowSingleReplica: true\n", 2, false},
		{dsn + "replicaCount: 2\n", 2, false},
	} {
		o := mustDecode(t, tc.values, nil)
		for n, d := range o.deployments {
			if d.Spec.Replicas == nil || *d.Spec.Replicas != tc.pods {
				t.Errorf("%q: %s replicas %v, want %d", tc.values, n, d.Spec.Replicas, tc.pods)
			}
		}
		if warns := strings.Contains(o.notes, "WARNING: one pod per mode"); warns != tc.warns {
			t.Errorf("%q: NOTES.txt warns %v, want %v:\n%s", tc.values, warns, tc.warns, o.notes)
		}
	}
}
