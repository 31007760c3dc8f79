// Package tlstest makes the certificates of TLS tests with crypto/x509:
// a CA, server certificates for loopback and client certificates, as PEM
// files the way cert-manager writes them into a Secret volume.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority of one test.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate as a PEM file, for --tls-client-ca,
	// curl --cacert or grpcurl -cacert.
	File string
	// NotAfter, when set, is the expiry of the certificates issued next;
	// by default they expire a day from now.
	NotAfter time.Time
}

// NewCA makes a CA and writes its certificate into dir.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, key: key, File: filepath.Join(dir, name+".crt")}
	write(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Pool is a pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf is an issued certificate and its files.
type Leaf struct {
	Cert              *x509.Certificate
	CertFile, KeyFile string
}

// Server issues a certificate for 127.0.0.1 and localhost and writes it
// and its key as certFile and keyFile, replacing them if they exist.
func (ca *CA) Server(t testing.TB, certFile, keyFile string) Leaf {
	t.Helper()
	return ca.issue(t, certFile, keyFile, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client issues a client certificate for mutual TLS.
func (ca *CA) Client(t testing.TB, certFile, keyFile, name string) Leaf {
	t.Helper()
	return ca.issue(t, certFile, keyFile, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(t testing.TB, certFile, keyFile string, tmpl *x509.Certificate) Leaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial(t)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	if !ca.NotAfter.IsZero() {
		tmpl.NotAfter = ca.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// The key first: a server that looks between the two writes sees a
	// pair that does not match and keeps its old one until the second.
	write(t, keyFile, "PRIVATE KEY", kder)
	write(t, certFile, "CERTIFICATE", der)
	return Leaf{Cert: cert, CertFile: certFile, KeyFile: keyFile}
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// write replaces path atomically, as a Secret volume's symlink swap does,
// and moves its modification time on, so that a rotation within the
// file system's timestamp granularity is still seen.
func write(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	mod := time.Now()
	if fi, err := os.Stat(path); err == nil && !fi.ModTime().Before(mod) {
		mod = fi.ModTime().Add(time.Second)
	}
	if err := os.Chtimes(tmp, mod, mod); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
