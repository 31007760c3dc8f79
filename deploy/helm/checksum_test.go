package helm_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestExistingSecretChecksum: with existingSecret, the pod template
// carries a checksum of the keys idgen reads from that Secret as the
// cluster holds it (lookup), so that `helm upgrade` after a change of
// its content rolls the pods, and a change of another key rolls none.
// `helm template` cannot look up: the checksum is then that of an empty
// Secret, present and stable.
func TestExistingSecretChecksum(t *testing.T) {
	values := valuesOf(t, "external-secrets")
	secret := func(name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	db := map[string]string{"url": "postgres://idgen:one@db/idgen", "unused": "a"}
	tokens := map[string]string{"admin-token": "admin-0123456789abcdef", "api": "t0123456789abcdef=*", "metrics-token": "m0123456789abcdef", "unused": "a"}
	with := func(m map[string]string, k, v string) map[string]string {
		c := map[string]string{k: v}
		for kk, vv := range m {
			if kk != k {
				c[kk] = vv
			}
		}
		return c
	}
	sums := func(t *testing.T, c cluster) (store, auth string) {
		t.Helper()
		o := mustDecode(t, values, c)
		a := o.deployments[prefix+"segment"].Spec.Template.Annotations
		if a["checksum/store-secret"] == "" || a["checksum/auth-secret"] == "" {
			t.Fatalf("pod annotations %v lack checksum/store-secret or checksum/auth-secret", a)
		}
		return a["checksum/store-secret"], a["checksum/auth-secret"]
	}
	inCluster := func(db, tokens map[string]string) cluster {
		return cluster{namespace + "/idgen-db": secret("idgen-db", db), namespace + "/idgen-tokens": secret("idgen-tokens", tokens)}
	}
	store0, auth0 := sums(t, inCluster(db, tokens))

	for _, tc := range []struct {
		name                  string
		db, tokens            map[string]string
		storeRolls, authRolls bool
	}{
		{"unchanged", db, tokens, false, false},
		{"new DSN", with(db, "url", "postgres://idgen:two@db/idgen"), tokens, true, false},
		{"another key of the store Secret", with(db, "unused", "b"), tokens, false, false},
		{"new admin token", db, with(tokens, "admin-token", "admin-fedcba9876543210"), false, true},
		{"new API token specification", db, with(tokens, "api", "u0123456789abcdef=order"), false, true},
		{"new metrics token", db, with(tokens, "metrics-token", "n0123456789abcdef"), false, true},
		{"another key of the token Secret", db, with(tokens, "unused", "b"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, auth := sums(t, inCluster(tc.db, tc.tokens))
			if rolled := store != store0; rolled != tc.storeRolls {
				t.Errorf("checksum/store-secret changed: %v, want %v", rolled, tc.storeRolls)
			}
			if rolled := auth != auth0; rolled != tc.authRolls {
				t.Errorf("checksum/auth-secret changed: %v, want %v", rolled, tc.authRolls)
			}
		})
	}

	// helm template (nothing to look up): the checksum of an empty
	// Secret's keys, the same as when the Secret does not exist yet.
	t.Run("helm template", func(t *testing.T) {
		store, auth := sums(t, nil)
		missingStore, missingAuth := sums(t, cluster{})
		emptyStore := sha256.Sum256([]byte(`{"url":""}`))
		if store != hex.EncodeToString(emptyStore[:]) || store != missingStore || auth != missingAuth || store == store0 || auth == auth0 {
			t.Errorf("without lookup: store %s auth %s; Secrets missing: %s %s; in the cluster: %s %s", store, auth, missingStore, missingAuth, store0, auth0)
		}
	})
}

// TestNoSecretChecksumForGenerated: the chart's own Secrets are not
// looked up for a checksum (the values' checksum covers them).
func TestNoSecretChecksumForGenerated(t *testing.T) {
	for _, name := range []string{"segment", "generated-secrets"} {
		a := mustDecode(t, valuesOf(t, name), nil).deployments[prefix+"segment"].Spec.Template.Annotations
		if a["checksum/store"] == "" || a["checksum/auth"] == "" {
			t.Errorf("%s: annotations %v lack the values' checksums", name, a)
		}
		for _, k := range []string{"checksum/store-secret", "checksum/auth-secret"} {
			if _, ok := a[k]; ok {
				t.Errorf("%s: %s set without existingSecret", name, k)
			}
		}
	}
}
