package server_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/internal/tlstest"
	"github.com/idgen/idgen/server"
)

// serveTLS serves h over TLS with cfg as idgen serve does and returns
// its address.
func serveTLS(t *testing.T, h http.Handler, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewHTTPServer(ln.Addr().String(), h)
	srv.TLSConfig = cfg
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// handshake connects anew and returns the serial of the certificate the
// server presented, and the protocol ALPN settled on.
func handshake(t *testing.T, addr string, cfg *tls.Config) (string, string, error) {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	st := conn.ConnectionState()
	return st.PeerCertificates[0].SerialNumber.String(), st.NegotiatedProtocol, nil
}

// A rotated certificate is served to the next connection without a
// restart; a half-written rotation keeps the last good one.
func TestTLS_ReloadsRotatedCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := ca.Server(t, certFile, keyFile)
	var logs syncBuffer
	cfg, err := server.TLSConfig(server.TLSFiles{Cert: certFile, Key: keyFile}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	m := server.NewMetrics()
	m.WatchTLS(cfg)
	ts := newServer(t, server.Config{Metrics: m})
	addr := serveTLS(t, ts.Config.Handler, cfg)
	client := &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2", "http/1.1"}}
	expiry := func() string {
		t.Helper()
		for line := range strings.Lines(do(t, "GET", ts.URL+"/metrics", "", "").body) {
			if v, ok := strings.CutPrefix(line, "idgen_tls_cert_expiry_timestamp_seconds "); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatal("no idgen_tls_cert_expiry_timestamp_seconds")
		return ""
	}
	unix := func(c *x509.Certificate) string { return strconv.FormatFloat(float64(c.NotAfter.Unix()), 'g', -1, 64) }
	if got := expiry(); got != unix(first.Cert) {
		t.Fatalf("expiry gauge %s, want %s", got, unix(first.Cert))
	}
	ca.NotAfter = first.Cert.NotAfter.Add(30 * 24 * time.Hour) // the renewal lasts longer

	serial, proto, err := handshake(t, addr, client)
	if err != nil || serial != first.Cert.SerialNumber.String() || proto != "h2" {
		t.Fatalf("first handshake: serial %s proto %q %v; want %s h2", serial, proto, err, first.Cert.SerialNumber)
	}

	second := ca.Server(t, certFile, keyFile)
	// A scrape sees the renewed certificate before any handshake does.
	if got := expiry(); got != unix(second.Cert) {
		t.Fatalf("expiry gauge after rotation %s, want %s", got, unix(second.Cert))
	}
	if serial, _, err = handshake(t, addr, client); err != nil || serial != second.Cert.SerialNumber.String() {
		t.Fatalf("after rotation: serial %s %v; want %s", serial, err, second.Cert.SerialNumber)
	}

	// A key that no longer matches its certificate, as between the writes
	// of a rotation done in place: the listener keeps the second pair.
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(keyFile, later, later); err != nil {
		t.Fatal(err)
	}
	if serial, _, err = handshake(t, addr, client); err != nil || serial != second.Cert.SerialNumber.String() {
		t.Fatalf("after a broken rotation: serial %s %v; want the previous %s", serial, err, second.Cert.SerialNumber)
	}
	if l := logs.String(); !strings.Contains(l, "TLS certificate reloaded") || !strings.Contains(l, "do not load") {
		t.Fatalf("log:\n%s", l)
	}

	// HTTP and gRPC over the same TLS port, by the Go clients.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: client, ForceAttemptHTTP2: true}, Timeout: 10 * time.Second}
	resp, err := hc.Get("https://" + addr + "/id/order")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("HTTPS: %d over %s", resp.StatusCode, resp.Proto)
	}
	rc := idgenv1connect.NewIDServiceClient(hc, "https://"+addr, connect.WithGRPC())
	if _, err := rc.Next(t.Context(), connect.NewRequest(&idgenv1.NextRequest{Tag: "order"})); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
}

// With a client CA, only clients with a certificate it signed get in,
// and a rotated CA bundle is read again like the certificate. Probes
// answer without a certificate.
func TestTLS_MutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	clientCA := tlstest.NewCA(t, dir, "clients")
	srvCert := ca.Server(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	good := clientCA.Client(t, filepath.Join(dir, "good.crt"), filepath.Join(dir, "good.key"), "good")
	stranger := ca.Client(t, filepath.Join(dir, "stranger.crt"), filepath.Join(dir, "stranger.key"), "stranger")
	bundle := filepath.Join(dir, "bundle.crt")
	copyFile(t, clientCA.File, bundle)
	cfg, err := server.TLSConfig(server.TLSFiles{Cert: srvCert.CertFile, Key: srvCert.KeyFile, ClientCA: bundle}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, server.Config{RequireClientCert: true})
	addr := serveTLS(t, ts.Config.Handler, cfg)
	httpClient := func(leaf *tlstest.Leaf) *http.Client {
		c := &tls.Config{RootCAs: ca.Pool()}
		if leaf != nil {
			pair, err := tls.LoadX509KeyPair(leaf.CertFile, leaf.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			c.Certificates = []tls.Certificate{pair}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: c, ForceAttemptHTTP2: true, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	}
	get := func(leaf *tlstest.Leaf, path string) error {
		resp, err := httpClient(leaf).Get("https://" + addr + path)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		return nil
	}
	if err := get(&good, "/id/order"); err != nil {
		t.Fatalf("client certificate of the client CA: %v", err)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if err := get(nil, path); err != nil {
			t.Fatalf("probe %s without a client certificate: %v", path, err)
		}
	}
	for _, path := range []string{"/id/order", "/metrics", "/admin/tags", "/", "/snowflake/decode/1"} {
		err := get(nil, path)
		if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), `"client_certificate_required"`) {
			t.Fatalf("%s without a client certificate: %v, want 401 client_certificate_required", path, err)
		}
	}
	// (Go's client sends no certificate the server's CA list does not
	// name, so the stranger arrives without one.)
	if err := get(&stranger, "/id/order"); err == nil {
		t.Fatal("client certificate of another CA, yet served")
	}
	// gRPC: health without a certificate, everything else UNAUTHENTICATED
	// with the idgen code.
	rc := idgenv1connect.NewIDServiceClient(httpClient(nil), "https://"+addr, connect.WithGRPC())
	_, err = rc.Next(t.Context(), connect.NewRequest(&idgenv1.NextRequest{Tag: "order"}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "client certificate") {
		t.Fatalf("gRPC Next without a client certificate: %v, want UNAUTHENTICATED", err)
	}
	if reason := errorReason(t, err); reason != "client_certificate_required" {
		t.Fatalf("ErrorInfo reason %q", reason)
	}
	// grpc.health.v1 in the Connect protocol's JSON form.
	resp, err := httpClient(nil).Post("https://"+addr+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "SERVING") {
		t.Fatalf("gRPC health without a client certificate: %d %s", resp.StatusCode, body)
	}
	if _, err := idgenv1connect.NewIDServiceClient(httpClient(&good), "https://"+addr, connect.WithGRPC()).
		Next(t.Context(), connect.NewRequest(&idgenv1.NextRequest{Tag: "order"})); err != nil {
		t.Fatalf("gRPC Next with a client certificate: %v", err)
	}
	// The operator rotates the client CA to the other one.
	copyFile(t, ca.File, bundle)
	if err := get(&stranger, "/id/order"); err != nil {
		t.Fatalf("after the CA rotation: %v", err)
	}
	if err := get(&good, "/id/order"); err == nil {
		t.Fatal("after the CA rotation, the old CA's client still served")
	}
}

// errorReason is the idgen code in a gRPC error's ErrorInfo.
func errorReason(t *testing.T, err error) string {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("not a connect error: %v", err)
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if info, ok := v.(*errdetails.ErrorInfo); derr == nil && ok {
			return info.GetReason()
		}
	}
	return ""
}

// The listener offers exactly Mozilla's intermediate TLS 1.2 suites
// (ECDHE with AES-GCM or ChaCha20-Poly1305): a client that offers only a
// CBC suite, which crypto/tls's defaults still accept, is refused, and one
// that offers an AEAD suite gets it. (The test certificate is ECDSA, so
// the RSA suites are checked by the list alone.)
func TestTLSConfig_CipherSuites(t *testing.T) {
	t.Parallel()
	want := []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	}
	if got := server.CipherSuites(); !slices.Equal(got, want) {
		t.Fatalf("CipherSuites() = %v, want %v", got, want)
	}
	for _, id := range server.CipherSuites() {
		for _, insecure := range tls.InsecureCipherSuites() {
			if id == insecure.ID {
				t.Fatalf("%s is insecure", insecure.Name)
			}
		}
	}
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	leaf := ca.Server(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	cfg, err := server.TLSConfig(server.TLSFiles{Cert: leaf.CertFile, Key: leaf.KeyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	per, err := cfg.GetConfigForClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*tls.Config{cfg, per} {
		if !slices.Equal(c.CipherSuites, want) || c.MinVersion != tls.VersionTLS12 {
			t.Fatalf("config suites %v min %x", c.CipherSuites, c.MinVersion)
		}
	}
	addr := serveTLS(t, http.NotFoundHandler(), cfg)
	for _, tc := range []struct {
		suite uint16
		ok    bool
	}{
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, true},
		{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, true},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, false},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, false},
	} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tc.suite}})
		if err == nil {
			got := conn.ConnectionState().CipherSuite
			_ = conn.Close()
			if !tc.ok || got != tc.suite {
				t.Errorf("%s: connected with %s", tls.CipherSuiteName(tc.suite), tls.CipherSuiteName(got))
			}
		} else if tc.ok {
			t.Errorf("%s refused: %v", tls.CipherSuiteName(tc.suite), err)
		}
	}
}

func TestTLSConfig_RejectsBadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	leaf := ca.Server(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files server.TLSFiles
		want  string
	}{
		{"no key", server.TLSFiles{Cert: leaf.CertFile}, "both a certificate and a key"},
		{"missing file", server.TLSFiles{Cert: filepath.Join(dir, "nope.crt"), Key: leaf.KeyFile}, "no such file"},
		{"key of nothing", server.TLSFiles{Cert: leaf.CertFile, Key: junk}, "key"},
		{"CA not PEM", server.TLSFiles{Cert: leaf.CertFile, Key: leaf.KeyFile, ClientCA: junk}, "holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := server.TLSConfig(tc.files, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// copyFile replaces dst with src's contents and a later modification
// time.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Duration(len(b)%7+1) * time.Minute)
	if fi, err := os.Stat(dst); err == nil && !fi.ModTime().Before(later) {
		later = fi.ModTime().Add(time.Minute)
	}
	if err := os.Chtimes(dst, later, later); err != nil {
		t.Fatal(err)
	}
}
