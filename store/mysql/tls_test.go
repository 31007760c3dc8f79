package mysql_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/mysql"
)

// pki is a throwaway certificate authority and a server certificate it
// signed, for 127.0.0.1 and localhost, as PEM files in dir.
type pki struct {
	ca, cert, key string
}

func newPKI(t *testing.T, dir, name string) pki {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	p := pki{ca: filepath.Join(dir, name+"-ca.pem"), cert: filepath.Join(dir, name+"-server.pem"), key: filepath.Join(dir, name+"-server-key.pem")}
	for path, block := range map[string]*pem.Block{
		p.ca: {Type: "CERTIFICATE", Bytes: caDER}, p.cert: {Type: "CERTIFICATE", Bytes: srvDER}, p.key: {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// The DSN's tls parameters against a MariaDB that requires TLS of the
// account idgen uses: each accepted mode must really encrypt, and a
// verifying mode must refuse a server its CA did not sign.
func TestOpen_TLS(t *testing.T) {
	dir := t.TempDir()
	srv := newPKI(t, dir, "server")
	other := newPKI(t, dir, "other")
	db := dbtest.StartContainer(t, dbtest.MySQL, func(r *testcontainers.ContainerRequest) {
		r.Files = append(r.Files,
			testcontainers.ContainerFile{HostFilePath: srv.ca, ContainerFilePath: "/etc/idgen-tls/ca.pem", FileMode: 0o644},
			testcontainers.ContainerFile{HostFilePath: srv.cert, ContainerFilePath: "/etc/idgen-tls/server.pem", FileMode: 0o644},
			testcontainers.ContainerFile{HostFilePath: srv.key, ContainerFilePath: "/etc/idgen-tls/server-key.pem", FileMode: 0o644})
		r.Cmd = []string{"--ssl-ca=/etc/idgen-tls/ca.pem", "--ssl-cert=/etc/idgen-tls/server.pem", "--ssl-key=/etc/idgen-tls/server-key.pem"}
	})
	ctx := context.Background()
	// From here on the account needs TLS: a plain connection is refused.
	root := strings.Replace(db.DSN, "//idgen:", "//root:", 1) // the image's root has the same password
	plain, err := mysql.Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.DB().ExecContext(ctx, "ALTER USER 'idgen'@'%' REQUIRE SSL"); err != nil {
		t.Fatalf("require TLS of the idgen account: %v", err)
	}
	_ = plain.Close()

	with := func(q string) string { return db.DSN + "?" + q }
	for _, tc := range []struct {
		name, dsn string
		ok        bool
		why       string
	}{
		{"plain", db.DSN, false, "Access denied"},
		{"tls=true against the system roots", with("tls=true"), false, "certificate"},
		{"tls=skip-verify", with("tls=skip-verify"), true, ""},
		{"tls=preferred", with("tls=preferred"), true, ""},
		{"tls-ca", with("tls-ca=" + srv.ca), true, ""},
		{"tls=true with tls-ca", with("tls=true&tls-ca=" + srv.ca), true, ""},
		{"tls-ca of another CA", with("tls-ca=" + other.ca), false, "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := mysql.Open(ctx, tc.dsn)
			if !tc.ok {
				if err == nil {
					_ = st.Close()
					t.Fatal("connected; want a refusal")
				}
				if !strings.Contains(err.Error(), tc.why) {
					t.Fatalf("refused with %v; want it to mention %q", err, tc.why)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := st.Migrate(ctx, nil); err != nil {
				t.Fatal(err)
			}
			tag := "tls-" + strings.NewReplacer(" ", "-", "=", "-").Replace(tc.name)
			if err := st.CreateTag(ctx, segment.Tag{Name: tag, MaxID: 1, Step: 10}); err != nil {
				t.Fatal(err)
			}
			if r, err := st.Reserve(ctx, tag, 0); err != nil || r.Size() != 10 {
				t.Fatalf("Reserve over TLS = %+v, %v", r, err)
			}
			if cipher := sslCipher(t, st.DB()); cipher == "" {
				t.Fatal("the session is not encrypted (Ssl_cipher is empty)")
			} else {
				t.Logf("session cipher %s", cipher)
			}
		})
	}
}

func sslCipher(t *testing.T, db *sql.DB) string {
	t.Helper()
	var name, value string
	if err := db.QueryRow("SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &value); err != nil {
		t.Fatal(err)
	}
	return value
}

func TestParseDSN_TLS(t *testing.T) {
	ca := newPKI(t, t.TempDir(), "unit").ca
	for _, tc := range []struct {
		query         string
		ok            bool
		named, custom bool // TLSConfig set; TLS set by ParseDSN
	}{
		{"", true, false, false},
		{"tls=false", true, true, false},
		{"tls=true", true, true, false},
		{"tls=skip-verify", true, true, false},
		{"tls=preferred", true, true, false},
		{"tls-ca=" + ca, true, false, true},
		{"tls=true&tls-ca=" + ca, true, false, true},
		{"tls=custom", false, false, false},
		{"tls=skip-verify&tls-ca=" + ca, false, false, false},
		{"tls-ca=/no/such/file.pem", false, false, false},
		{"tls-ca=" + os.Args[0], false, false, false}, // not PEM
	} {
		cfg, err := mysql.ParseDSN("mysql://u:p@db.example:3306/idgen?" + tc.query)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err %v, want ok=%v", tc.query, err, tc.ok)
			continue
		}
		if !tc.ok {
			continue
		}
		if (cfg.TLSConfig != "") != tc.named || (cfg.TLS != nil) != tc.custom {
			t.Errorf("%q: TLSConfig %q, TLS %v", tc.query, cfg.TLSConfig, cfg.TLS != nil)
		}
		if tc.custom && cfg.TLS.ServerName != "db.example" {
			t.Errorf("%q: server name %q, want the DSN's host", tc.query, cfg.TLS.ServerName)
		}
		if _, leaked := cfg.Params["tls"]; leaked || cfg.Params["tls-ca"] != "" {
			t.Errorf("%q: a TLS parameter became a session variable: %v", tc.query, cfg.Params)
		}
	}
}
