// Package helm holds idgen's Helm chart (idgen/) and its tests, which run
// offline with the Helm SDK: they lint the chart as `helm lint --strict`
// does, render it with several value sets, decode every rendered object
// strictly into the Kubernetes API types (and the Prometheus Operator's
// for the ServiceMonitor and the PrometheusRule), check the properties
// docs/deploy.md promises, check that values.schema.json refuses bad
// values, and check that the PrometheusRule carries the groups of
// deploy/prometheus/idgen-rules.yml.
//
// It is a module of its own, as deploy/kubernetes is, so that the main
// module does not depend on Helm and k8s.io; .ci/run tests it with
// `cd deploy/helm && go test ./...`.
package helm
