package helm_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestExistingSecretChecksum: with existingSecret, the pod template
// carries a checksum of the keys idgen reads from that Secret as the
// cluster holds it (lookup), so that `helm upgrade` after a change of
// its content rolls the pods, and a change of another key rolls none.
// `helm template` cannot look up: the checksum is then that of an empty
// Secret, present and stable.
func TestExistingSecretChecksum(t *testing.T) {
	values := valuesOf(t, "external-secrets")
	secret := func(name, uid string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(uid)}, Data: map[string][]byte{}}
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
	const dbUID, tokensUID = "0d3c2a1e-5b8f-4c6d-9e7a-1f2b3c4d5e6f", "7a8b9c0d-1e2f-4a5b-8c6d-7e8f9a0b1c2d"
	inCluster := func(dbUID string, db, tokens map[string]string) cluster {
		return cluster{
			namespace + "/idgen-db":     secret("idgen-db", dbUID, db),
			namespace + "/idgen-tokens": secret("idgen-tokens", tokensUID, tokens),
		}
	}
	store0, auth0 := sums(t, inCluster(dbUID, db, tokens))

	for _, tc := range []struct {
		name                  string
		dbUID                 string
		db, tokens            map[string]string
		storeRolls, authRolls bool
	}{
		{"unchanged", dbUID, db, tokens, false, false},
		{"new DSN", dbUID, with(db, "url", "postgres://idgen:two@db/idgen"), tokens, true, false},
		{"another key of the store Secret", dbUID, with(db, "unused", "b"), tokens, false, false},
		{"store Secret made again", "11111111-2222-4333-8444-555555555555", db, tokens, true, false},
		{"new admin token", dbUID, db, with(tokens, "admin-token", "admin-fedcba9876543210"), false, true},
		{"new API token specification", dbUID, db, with(tokens, "api", "u0123456789abcdef=order"), false, true},
		{"new metrics token", dbUID, db, with(tokens, "metrics-token", "n0123456789abcdef"), false, true},
		{"another key of the token Secret", dbUID, db, with(tokens, "unused", "b"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, auth := sums(t, inCluster(tc.dbUID, tc.db, tc.tokens))
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
		emptyStore := sha256.Sum256([]byte("\n" + `{"url":""}`))
		if store != hex.EncodeToString(emptyStore[:]) || store != missingStore || auth != missingAuth || store == store0 || auth == auth0 {
			t.Errorf("without lookup: store %s auth %s; Secrets missing: %s %s; in the cluster: %s %s", store, auth, missingStore, missingAuth, store0, auth0)
		}
	})

	// Salted: the annotation, which whoever may read pods sees, is no
	// plain hash of the DSN that a guessed password could be checked
	// against.
	t.Run("salted", func(t *testing.T) {
		enc := base64.StdEncoding.EncodeToString([]byte(db["url"]))
		for _, plain := range []string{`{"url":"` + enc + `"}`, "\n" + `{"url":"` + enc + `"}`} {
			if h := sha256.Sum256([]byte(plain)); hex.EncodeToString(h[:]) == store0 {
				t.Errorf("checksum/store-secret is the unsalted hash of %s", plain)
			}
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
