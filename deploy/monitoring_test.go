package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/idgentest"
	"github.com/idgen/idgen/segment"
)

// TestMonitoring_MetricsExist checks that every metric named in the
// alert rules and the Grafana dashboard is one a running server exports,
// and every recorded series they use is defined by the rules, so that a
// renamed metric cannot leave a silent alert or an empty panel behind.
// It scrapes the real server after using both modes, so that the
// labelled series exist: client_golang omits a vector with no series.
func TestMonitoring_MetricsExist(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	exprs := map[string][]string{} // file → PromQL expressions
	recorded := map[string]bool{}

	rulesFile := filepath.Join(root, "deploy", "prometheus", "idgen-rules.yml")
	_, rules := readYAML(t, rulesFile)
	var groups struct {
		Groups []struct {
			Rules []struct{ Record, Alert, Expr string }
		}
	}
	b, err := yaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &groups); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
			exprs[rulesFile] = append(exprs[rulesFile], r.Expr)
		}
	}

	dashFile := filepath.Join(root, "deploy", "grafana", "idgen.json")
	raw, err := os.ReadFile(dashFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashFile, err)
	}
	collectQueries(dash, func(q string) { exprs[dashFile] = append(exprs[dashFile], q) })
	if len(exprs[rulesFile]) < 10 || len(exprs[dashFile]) < 10 {
		t.Fatalf("found %d rule and %d dashboard expressions: the files' shape changed", len(exprs[rulesFile]), len(exprs[dashFile]))
	}

	exported := scrapeMetricNames(t)
	used := map[string]bool{}
	for file, list := range exprs {
		for _, e := range list {
			for _, name := range metricNames(e) {
				used[name] = true
				switch {
				case strings.Contains(name, ":"):
					if !recorded[name] {
						t.Errorf("%s: %q uses %s, which no rule records", filepath.Base(file), e, name)
					}
				case !exported[name]:
					t.Errorf("%s: %q uses %s, which the server does not export", filepath.Base(file), e, name)
				}
			}
		}
	}
	for name := range recorded {
		if !used[name] && !strings.HasPrefix(name, "job:") {
			t.Logf("recorded %s is used by no alert or panel", name)
		}
	}
	if !t.Failed() {
		t.Logf("%d metric names used by %d rule and %d dashboard expressions, all exported or recorded",
			len(used), len(exprs[rulesFile]), len(exprs[dashFile]))
	}
}

func TestMetricNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum by (tag) (rate(idgen_ids_issued_total{job=~"$job"}[$__rate_interval]))`, []string{"idgen_ids_issued_total"}},
		{`idgen_a / on (job) job:idgen_b:rate5m > 0`, []string{"idgen_a", "job:idgen_b:rate5m"}},
		// Label values and strings are not metrics.
		{`up{job="idgen_fake"} == 0 and label_values(idgen_ready, job)`, []string{"idgen_ready"}},
		{`histogram_quantile(0.99, sum by (le) (rate(idgen_x_bucket[5m])))`, []string{"idgen_x_bucket"}},
	} {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// collectQueries calls fn with every PromQL string of a Grafana
// dashboard: panel targets' expr and template variables' query.
func collectQueries(v any, fn func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "expr" || k == "query") {
				fn(s)
				continue
			}
			collectQueries(x, fn)
		}
	case []any:
		for _, x := range v {
			collectQueries(x, fn)
		}
	}
}

var (
	quotedRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	identRE  = regexp.MustCompile(`\$?[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// metricNames returns the idgen metric names and recorded series named
// in a PromQL expression: identifiers outside string literals that start
// with idgen_ or contain a colon. Label names, functions and Grafana
// variables ($job, $__rate_interval) are neither.
func metricNames(expr string) []string {
	var out []string
	for _, id := range identRE.FindAllString(quotedRE.ReplaceAllString(expr, `""`), -1) {
		if strings.HasPrefix(id, "idgen_") || (strings.Contains(id, ":") && !strings.HasPrefix(id, "$")) {
			out = append(out, id)
		}
	}
	return out
}

// scrapeMetricNames runs the real server, uses segment and snowflake
// mode, a range reservation, an error and readiness, then returns the
// names on /metrics, with _bucket, _sum and _count for histograms.
func scrapeMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	ctx := context.Background()
	srv := idgentest.NewServer(t, nil)
	for _, mode := range []string{"segment", "snowflake"} {
		if _, err := srv.Client(client.WithMode(mode)).NextN(ctx, "monitoring", 10); err != nil {
			t.Fatal(err)
		}
	}
	seg, err := srv.Client().Segment(segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seg.Next(ctx, "monitoring-range"); err != nil {
		t.Fatal(err)
	}
	_ = seg.Close()
	// A gRPC call in the Connect protocol, which needs no HTTP/2.
	resp, err := http.Post(srv.URL+"/idgen.v1.IDService/Next", "application/json", strings.NewReader(`{"tag":"monitoring"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Connect call: %s", resp.Status)
	}
	for _, path := range []string{"/readyz", "/id/..", "/metrics"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	resp, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		if f[3] == "histogram" || f[3] == "summary" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[f[2]+suffix] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var idgen []string
	for n := range names {
		if strings.HasPrefix(n, "idgen_") {
			idgen = append(idgen, n)
		}
	}
	slices.Sort(idgen)
	t.Logf("exported: %s", strings.Join(idgen, " "))
	return names
}
