// Package kubernetes holds idgen's Kubernetes manifests (one file per
// mode) and their test, which decodes every document strictly with the
// Kubernetes API types, so an unknown or misspelt field fails, and checks
// the properties docs/deploy.md promises: probes, grace period, security
// context, spread and matching selectors.
//
// It is a module of its own so that the main module does not depend on
// k8s.io/api; .ci/run tests it with `cd deploy/kubernetes && go test ./...`.
package kubernetes
