package main_test

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/internal/tlstest"
)

// Under mutual TLS the probes answer without a client certificate, as
// the kubelet's HTTPS probes and idgen health send none, while every
// other route asks for one; the real curl and idgen health show it. The
// listener refuses TLS 1.2's CBC suites to the real openssl, and the
// handshake errors that leaves are JSON lines under --log-format json.
func TestServe_MutualTLSProbes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	ca := tlstest.NewCA(t, dir, "ca")
	clients := tlstest.NewCA(t, dir, "clients")
	srv := ca.Server(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	good := clients.Client(t, filepath.Join(dir, "good.crt"), filepath.Join(dir, "good.key"), "good")
	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")},
		"--tls-cert", srv.CertFile, "--tls-key", srv.KeyFile, "--tls-client-ca", clients.File, "--log-format", "json")
	base := "https://" + p.Addr()

	// curl's status line is the last line: -w '\n%{http_code}'.
	curl := func(path string, args ...string) (status, body string) {
		t.Helper()
		out, err := runTool(t, "curl", append([]string{"-sS", "--cacert", ca.File, "-w", "\n%{http_code}", base + path}, args...)...)
		if err != nil {
			t.Fatalf("curl %s %v: %v\n%s", path, args, err, out)
		}
		i := strings.LastIndexByte(out, '\n')
		return out[i+1:], out[:max(i, 0)]
	}
	for _, path := range []string{"/readyz", "/healthz"} {
		if status, body := curl(path); status != "200" {
			t.Fatalf("curl %s without a client certificate: %s %s", path, status, body)
		}
	}
	status, body := curl("/id/order")
	if status != "401" || !strings.Contains(body, `"code":"client_certificate_required"`) || !strings.Contains(body, "--tls-client-ca") {
		t.Fatalf("curl /id/order without a client certificate: %s %s", status, body)
	}
	if status, body := curl("/id/order", "--cert", good.CertFile, "--key", good.KeyFile); status != "200" || !strings.Contains(body, `"id":"1"`) {
		t.Fatalf("curl /id/order with a client certificate: %s %s", status, body)
	}

	// idgen health, the exec probe of images without curl.
	health := func(path string, args ...string) (string, error) {
		out, err := exec.Command(bin, append([]string{"health", "--url", base + path, "--cacert", ca.File}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := health("/readyz"); err != nil {
		t.Fatalf("idgen health /readyz without a client certificate: %v\n%s", err, out)
	}
	if out, err := health("/id/order"); err == nil || !strings.Contains(out, "401") {
		t.Fatalf("idgen health /id/order without a client certificate: %v\n%s", err, out)
	}
	if out, err := health("/id/order", "--cert", good.CertFile, "--key", good.KeyFile); err != nil {
		t.Fatalf("idgen health /id/order with a client certificate: %v\n%s", err, out)
	}
	if out, err := health("/readyz", "--cert", good.CertFile); err == nil || !strings.Contains(out, "--cert and --key go together") {
		t.Fatalf("idgen health --cert without --key: %v\n%s", err, out)
	}

	// TLS 1.2 suites, as openssl offers them (the certificate is ECDSA).
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Log("no openssl binary: the suites are checked by TestTLSConfig_CipherSuites only")
	} else {
		for _, tc := range []struct {
			cipher string
			ok     bool
		}{
			{"ECDHE-ECDSA-AES128-GCM-SHA256", true},
			{"ECDHE-ECDSA-CHACHA20-POLY1305", true},
			{"AES128-SHA", false},
			{"ECDHE-ECDSA-AES256-SHA", false},
			{"ECDHE-ECDSA-AES128-SHA256", false},
		} {
			out, err := runTool(t, "openssl", "s_client", "-connect", p.Addr(), "-servername", "localhost",
				"-tls1_2", "-cipher", tc.cipher, "-CAfile", ca.File)
			if got := err == nil && strings.Contains(out, "Cipher is "+tc.cipher); got != tc.ok {
				t.Errorf("openssl s_client -tls1_2 -cipher %s: connected %v, want %v: %v\n%s", tc.cipher, got, tc.ok, err, out)
			}
		}
	}

	// Every line is JSON, the handshake errors that openssl's refused
	// suites left included.
	testtime.Until(10*time.Second, 100*time.Millisecond, func() bool {
		if strings.Contains(p.Log(), "TLS handshake error") {
			return true
		}
		if _, err := exec.LookPath("openssl"); err != nil {
			// A cleartext request on the TLS port is a handshake error too.
			_, _ = runTool(t, "curl", "-sS", "http://"+p.Addr()+"/readyz")
		}
		return false
	})
	handshake := 0
	for _, line := range strings.Split(strings.TrimSpace(p.Log()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("not a JSON log line: %q", line)
			continue
		}
		if msg, _ := rec["msg"].(string); strings.Contains(msg, "TLS handshake error") {
			handshake++
			if rec["level"] != "WARN" {
				t.Errorf("handshake error at level %v: %s", rec["level"], line)
			}
		}
		if rec["msg"] == "the ID endpoints are open without auth: anyone who can reach the listen address draws IDs of any tag; set --api-tokens, or listen on 127.0.0.1" {
			t.Errorf("the open-endpoints warning under mutual TLS on 127.0.0.1: %s", line)
		}
	}
	if handshake == 0 {
		t.Fatalf("no TLS handshake error logged:\n%s", p.Log())
	}
}

// SIGTERM drains, hands the unused rest back and says so, in the one
// --shutdown-timeout: a restart on the same store goes on at the next ID.
func TestServe_ShutdownLogsHandBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	env := []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")}
	for _, want := range []string{`"id":"1"`, `"id":"2"`} {
		p := proctest.Serve(t, bin, env, "--shutdown-timeout", "5s", "--snowflake=false")
		status, body, err := p.Get(t.Context(), http.DefaultClient, "/id/order")
		if err != nil || status != 200 || !strings.Contains(body, want) {
			t.Fatalf("GET /id/order: %d %s %v, want %s", status, body, err, want)
		}
		if err := p.Stop(30 * time.Second); err != nil {
			t.Fatalf("stop: %v\n%s", err, p.Log())
		}
		log := p.Log()
		if !strings.Contains(log, `msg="segment: handed back the unused rest of the ranges" tags=1 ids=`) ||
			!strings.Contains(log, "by_tag=map[order:") || strings.Contains(log, "hand-back incomplete") {
			t.Fatalf("no hand-back line:\n%s", log)
		}
	}
}
