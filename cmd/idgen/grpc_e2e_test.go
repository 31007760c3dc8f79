package main_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/internal/tlstest"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/store/dbtest"
)

// tools are the pinned third-party gRPC clients (api/tools/go.mod).
type tools struct{ grpcurl, probe string }

func buildTools(t *testing.T, dir string) tools {
	t.Helper()
	return tools{
		grpcurl: proctest.Tool(t, dir, "github.com/fullstorydev/grpcurl/cmd/grpcurl"),
		probe:   proctest.Tool(t, dir, "github.com/grpc-ecosystem/grpc-health-probe"),
	}
}

// runTool runs a command with a deadline and returns its combined output.
func runTool(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

const e2eToken = "grpc-e2e-order-token-0123456789"

// e2eTransport is one way idgen serve serves gRPC; the gRPC tests run
// over each.
type e2eTransport struct {
	name string
	// args are serve's flags for it.
	args []string
	// addr is the host:port gRPC clients call.
	addr func(t *testing.T, p *proctest.Proc) string
	// option makes the Go client call gRPC at addr.
	option func(addr string) client.Option
}

// e2eTransports are connect-go on --addr and grpc-go's own transport on
// --grpc-addr.
func e2eTransports() []e2eTransport {
	return []e2eTransport{
		{"connect-go", nil, func(_ *testing.T, p *proctest.Proc) string { return p.Addr() }, func(string) client.Option { return client.WithGRPC() }},
		{"grpc-go", []string{"--grpc-addr", "127.0.0.1:0"}, grpcAddr, client.WithGRPCAddr},
	}
}

// grpcAddrRE finds the gRPC port in serve's start-up line.
var grpcAddrRE = regexp.MustCompile(`grpc_addr=(\S+)`)

// grpcAddr is the --grpc-addr port p serves.
func grpcAddr(t *testing.T, p *proctest.Proc) string {
	t.Helper()
	m := grpcAddrRE.FindStringSubmatch(p.Log())
	if m == nil || m[1] == "off" {
		t.Fatalf("no gRPC address in the start-up line:\n%s", p.Log())
	}
	return m[1]
}

// grpcurl, grpc-health-probe and curl against a real idgen serve over
// cleartext HTTP/2 and HTTP/1.1 on the one port, and the Go client over
// gRPC with its range-caching allocator.
func TestServe_GRPCThirdPartyClients(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds grpcurl and grpc-health-probe: a third of the -short loop's cmd/idgen; CI runs it")
	}
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	tl := buildTools(t, dir)
	for _, tr := range e2eTransports() {
		t.Run(tr.name, func(t *testing.T) { testGRPCThirdPartyClients(t, tr, bin, tl) })
	}
}

func testGRPCThirdPartyClients(t *testing.T, tr e2eTransport, bin string, tl tools) {
	dir := t.TempDir()
	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")},
		append([]string{"--api-tokens", e2eToken + "=order"}, tr.args...)...)
	addr := tr.addr(t, p)

	out, err := runTool(t, tl.grpcurl, "-plaintext", addr, "list")
	if err != nil || !strings.Contains(out, "idgen.v1.IDService\n") || !strings.Contains(out, "grpc.health.v1.Health\n") {
		t.Fatalf("grpcurl list: %v\n%s", err, out)
	}
	if out, err = runTool(t, tl.grpcurl, "-plaintext", addr, "describe", "idgen.v1.IDService"); err != nil || !strings.Contains(out, "rpc Next ( .idgen.v1.NextRequest ) returns ( .idgen.v1.NextResponse )") {
		t.Fatalf("grpcurl describe: %v\n%s", err, out)
	}
	out, err = runTool(t, tl.grpcurl, "-plaintext", "-H", "authorization: Bearer "+e2eToken, "-d", `{"tag":"order","count":3}`, addr, "idgen.v1.IDService/Next")
	var next struct {
		Tag string
		IDs []string
	}
	if err != nil || json.Unmarshal([]byte(out), &next) != nil || next.Tag != "order" || !slices.Equal(next.IDs, []string{"1", "2", "3"}) {
		t.Fatalf("grpcurl Next: %v\n%s", err, out)
	}
	// The idgen code travels in an ErrorInfo that grpcurl shows.
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-d", `{"tag":"order"}`}, []string{"Code: Unauthenticated", `"reason": "unauthorized"`, `"domain": "idgen"`}},
		{[]string{"-H", "authorization: Bearer " + e2eToken, "-d", `{"tag":"other"}`}, []string{"Code: PermissionDenied", `"reason": "forbidden"`}},
		{[]string{"-H", "authorization: Bearer " + e2eToken, "-d", `{"tag":"order","count":100000}`}, []string{"Code: InvalidArgument", `"reason": "invalid_count"`}},
	} {
		args := append(append([]string{"-plaintext"}, tc.args...), addr, "idgen.v1.IDService/Next")
		out, err := runTool(t, tl.grpcurl, args...)
		if err == nil {
			t.Fatalf("grpcurl %v succeeded:\n%s", tc.args, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("grpcurl %v: output lacks %s:\n%s", tc.args, w, out)
			}
		}
	}

	if out, err = runTool(t, tl.probe, "-addr", addr); err != nil || !strings.Contains(out, "status: SERVING") {
		t.Fatalf("grpc-health-probe: %v\n%s", err, out)
	}
	if out, err = runTool(t, tl.probe, "-addr", addr, "-service", "idgen.v1.IDService"); err != nil || !strings.Contains(out, "status: SERVING") {
		t.Fatalf("grpc-health-probe -service: %v\n%s", err, out)
	}

	// Watch streams the status until the call's deadline ends it.
	out, _ = runTool(t, tl.grpcurl, "-plaintext", "-max-time", "2", "-d", `{"service":"idgen.v1.IDService"}`, addr, "grpc.health.v1.Health/Watch")
	if !strings.Contains(out, `"status": "SERVING"`) {
		t.Fatalf("grpcurl Watch:\n%s", out)
	}

	// The Connect protocol's JSON over HTTP/1.1, with curl.
	out, err = runTool(t, "curl", "-sS", "--http1.1", "-H", "Content-Type: application/json", "-H", "Authorization: Bearer "+e2eToken,
		"-d", `{"tag":"order"}`, p.URL+"/idgen.v1.IDService/Next", "-w", "\n%{http_version} %{http_code}")
	body, status, _ := strings.Cut(out, "\n")
	if err != nil || status != "1.1 200" || json.Unmarshal([]byte(body), &next) != nil || !slices.Equal(next.IDs, []string{"4"}) {
		t.Fatalf("curl Connect: %v\n%s", err, out)
	}
	// And a Connect error: the HTTP status and the idgen code.
	out, _ = runTool(t, "curl", "-sS", "--http1.1", "-H", "Content-Type: application/json", "-d", `{"tag":"order"}`,
		p.URL+"/idgen.v1.IDService/Next", "-w", "\n%{http_code}")
	if !strings.Contains(out, `"code":"unauthenticated"`) || !strings.Contains(out, `"reason":"unauthorized"`) || !strings.HasSuffix(out, "\n401") {
		t.Fatalf("curl Connect without a token:\n%s", out)
	}

	// The Go client over gRPC: caching allocators and per-call IDs, all
	// distinct.
	var ids []int64
	for _, mode := range []string{"segment", "snowflake"} {
		c, err := client.New(p.URL, tr.option(addr), client.WithToken(e2eToken), client.WithMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.NextN(t.Context(), "order", 5)
		if err != nil || len(got) != 5 {
			t.Fatalf("%s NextN over gRPC: %v %v", mode, got, err)
		}
		if mode == "segment" {
			ids = append(ids, got...)
		}
	}
	c, err := client.New(p.URL, tr.option(addr), client.WithToken(e2eToken))
	if err != nil {
		t.Fatal(err)
	}
	alloc, err := c.Segment(segment.Options{FixedStep: true, DefaultStep: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer alloc.Close()
	for range 1000 {
		id, err := alloc.Next(t.Context(), "order")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if d := segmenttest.Duplicates(append(ids, 1, 2, 3, 4)); d != 0 {
		t.Fatalf("%d duplicates among %d IDs", d, len(ids)+4)
	}
	if _, err := alloc.Next(t.Context(), "other"); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("allocator for a tag the token does not allow: %v", err)
	}
}

// grpc-health-probe follows readiness: SERVING while the store answers,
// NOT_SERVING while it is down and no IDs are buffered, SERVING again once
// it is back. /readyz says the same at each step.
func TestServe_GRPCHealthFollowsStore(t *testing.T) {
	t.Parallel()
	dbtest.RequireDocker(t) // before the builds: -short skips it
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	tl := buildTools(t, dir)
	db := dbtest.StartContainer(t, dbtest.Postgres)
	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=" + db.DSN}, "--snowflake=false")
	hc := &http.Client{Timeout: 10 * time.Second}
	probe := func() (string, int) {
		out, err := runTool(t, tl.probe, "-addr", p.Addr(), "-connect-timeout", "5s", "-rpc-timeout", "5s")
		var ee *exec.ExitError
		switch {
		case err == nil:
			return out, 0
		case errors.As(err, &ee):
			return out, ee.ExitCode()
		}
		t.Fatal(err)
		return "", -1
	}
	check := func(phase, want string, wantExit, wantReady int) {
		t.Helper()
		var out string
		var code, ready int
		// The readiness check bounds a dead store's ping at 2 s; give
		// a stopping container a few checks to be seen.
		testtime.Until(30*time.Second, 200*time.Millisecond, func() bool {
			out, code = probe()
			ready, _, _ = p.Get(t.Context(), hc, "/readyz")
			return code == wantExit && ready == wantReady
		})
		if code != wantExit || !strings.Contains(out, want) || ready != wantReady {
			t.Fatalf("%s: grpc-health-probe exit %d %q, /readyz %d; want exit %d %q, /readyz %d", phase, code, out, ready, wantExit, want, wantReady)
		}
	}
	check("store up", "status: SERVING", 0, 200)
	db.Stop(t)
	// grpc-health-probe exits 4 for an unhealthy answer.
	check("store down, no IDs buffered", `service unhealthy (responded with "NOT_SERVING")`, 4, 503)
	db.Restart(t)
	check("store back", "status: SERVING", 0, 200)
}

// HTTP and gRPC over TLS on one port of a real idgen serve, with curl,
// grpcurl, grpc-health-probe and the Go client; a rotated certificate is
// served without a restart; with a client CA, only its clients get in.
func TestServe_TLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	tl := buildTools(t, dir)
	ca := tlstest.NewCA(t, dir, "ca")
	clients := tlstest.NewCA(t, dir, "clients")
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := ca.Server(t, certFile, keyFile)
	good := clients.Client(t, filepath.Join(dir, "app.crt"), filepath.Join(dir, "app.key"), "app")
	store := "IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")

	p := proctest.Serve(t, bin, []string{store}, "--tls-cert", certFile, "--tls-key", keyFile, "--grpc-addr", "127.0.0.1:0")
	// gRPC on both transports: connect-go on --addr, grpc-go on
	// --grpc-addr, with the one TLS config.
	rpcAddrs := []string{p.Addr(), grpcAddr(t, p)}
	if !strings.Contains(p.Log(), "tls=on") {
		t.Fatalf("start-up line does not say TLS is on:\n%s", p.Log())
	}
	base := "https://" + p.Addr()
	out, err := runTool(t, "curl", "-sS", "--cacert", ca.File, base+"/id/order", "-w", "\n%{http_version}")
	if err != nil || !strings.Contains(out, `"id":"1"`) || !strings.HasSuffix(out, "\n2") {
		t.Fatalf("curl over TLS: %v\n%s", err, out)
	}
	if out, err = runTool(t, "curl", "-sS", "--http1.1", "--cacert", ca.File, base+"/id/order"); err != nil || !strings.Contains(out, `"id":"2"`) {
		t.Fatalf("curl over TLS, HTTP/1.1: %v\n%s", err, out)
	}
	if out, err = runTool(t, "curl", "-sS", "-f", p.URL+"/id/order"); err == nil || strings.Contains(out, `"id"`) {
		t.Fatalf("cleartext HTTP on the TLS port answered:\n%s", out)
	}
	for _, a := range rpcAddrs {
		if out, err = runTool(t, tl.grpcurl, "-cacert", ca.File, "-d", `{"tag":"order"}`, a, "idgen.v1.IDService/Next"); err != nil || !strings.Contains(out, `"ids"`) {
			t.Fatalf("grpcurl over TLS to %s: %v\n%s", a, err, out)
		}
		if out, err = runTool(t, tl.probe, "-addr", a, "-tls", "-tls-ca-cert", ca.File); err != nil || !strings.Contains(out, "status: SERVING") {
			t.Fatalf("grpc-health-probe over TLS to %s: %v\n%s", a, err, out)
		}
	}
	tlsClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, ForceAttemptHTTP2: true}}
	for _, opts := range [][]client.Option{{}, {client.WithGRPC()}, {client.WithGRPCAddr(rpcAddrs[1])}} {
		c, err := client.New(base, append(opts, client.WithHTTPClient(tlsClient), client.WithMode("segment"))...)
		if err != nil {
			t.Fatal(err)
		}
		if id, err := c.Next(t.Context(), "order"); err != nil || id < 4 {
			t.Fatalf("Go client %v over TLS: %d %v", opts, id, err)
		}
	}

	serial := func(cfg *tls.Config) (string, error) {
		return serialAt(p.Addr(), cfg)
	}
	grpcSerial := func(cfg *tls.Config) (string, error) {
		return serialAt(rpcAddrs[1], cfg)
	}
	if s, err := grpcSerial(&tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2"}}); err != nil || s != first.Cert.SerialNumber.String() {
		t.Fatalf("gRPC port: serial %s %v, want %s", s, err, first.Cert.SerialNumber)
	}
	if s, err := serial(&tls.Config{RootCAs: ca.Pool()}); err != nil || s != first.Cert.SerialNumber.String() {
		t.Fatalf("serial %s %v, want %s", s, err, first.Cert.SerialNumber)
	}
	second := ca.Server(t, certFile, keyFile) // as cert-manager renews it
	if s, err := serial(&tls.Config{RootCAs: ca.Pool()}); err != nil || s != second.Cert.SerialNumber.String() {
		t.Fatalf("after rotation: serial %s %v, want %s", s, err, second.Cert.SerialNumber)
	}
	if s, err := grpcSerial(&tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2"}}); err != nil || s != second.Cert.SerialNumber.String() {
		t.Fatalf("gRPC port after rotation: serial %s %v, want %s", s, err, second.Cert.SerialNumber)
	}
	if out, err = runTool(t, "curl", "-sS", "--cacert", ca.File, base+"/readyz"); err != nil || !strings.Contains(out, "ready") {
		t.Fatalf("curl after rotation: %v\n%s", err, out)
	}
	want := "idgen_tls_cert_expiry_timestamp_seconds " + strconv.FormatFloat(float64(second.Cert.NotAfter.Unix()), 'g', -1, 64) + "\n"
	if out, err = runTool(t, "curl", "-sS", "--cacert", ca.File, base+"/metrics"); err != nil || !strings.Contains(out, want) {
		t.Fatalf("/metrics lacks %q: %v", want, err)
	}
	if err := p.Stop(15 * time.Second); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.Log())
	}

	// Mutual TLS.
	m := proctest.Serve(t, bin, []string{store}, "--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", clients.File, "--grpc-addr", "127.0.0.1:0")
	base = "https://" + m.Addr()
	rpcAddrs = []string{m.Addr(), grpcAddr(t, m)}
	if out, err = runTool(t, "curl", "-sS", "--cacert", ca.File, base+"/id/order"); err != nil || !strings.Contains(out, "client_certificate_required") {
		t.Fatalf("mutual TLS let curl in without a client certificate:\n%s", out)
	}
	if out, err = runTool(t, "curl", "-sS", "--cacert", ca.File, "--cert", good.CertFile, "--key", good.KeyFile, base+"/id/order"); err != nil || !strings.Contains(out, `"id"`) {
		t.Fatalf("curl with a client certificate: %v\n%s", err, out)
	}
	for _, a := range rpcAddrs {
		if out, err = runTool(t, tl.grpcurl, "-cacert", ca.File, "-cert", good.CertFile, "-key", good.KeyFile, "-d", `{"tag":"order"}`, a, "idgen.v1.IDService/Next"); err != nil || !strings.Contains(out, `"ids"`) {
			t.Fatalf("grpcurl with a client certificate to %s: %v\n%s", a, err, out)
		}
		if out, err = runTool(t, tl.grpcurl, "-cacert", ca.File, "-d", `{"tag":"order"}`, a, "idgen.v1.IDService/Next"); err == nil {
			t.Fatalf("grpcurl without a client certificate got in at %s:\n%s", a, out)
		}
		if out, err = runTool(t, tl.probe, "-addr", a, "-tls", "-tls-ca-cert", ca.File, "-tls-client-cert", good.CertFile, "-tls-client-key", good.KeyFile); err != nil || !strings.Contains(out, "status: SERVING") {
			t.Fatalf("grpc-health-probe with a client certificate to %s: %v\n%s", a, err, out)
		}
	}
	// The Go client over HTTP and gRPC: in with the certificate, out
	// without.
	pair, err := tls.LoadX509KeyPair(good.CertFile, good.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, certs := range [][]tls.Certificate{{pair}, nil} {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true,
			TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: certs}}}
		for _, opts := range [][]client.Option{{}, {client.WithGRPC()}, {client.WithGRPCAddr(rpcAddrs[1])}} {
			c, err := client.New(base, append(opts, client.WithHTTPClient(hc), client.WithMode("segment"), client.WithRetries(0))...)
			if err != nil {
				t.Fatal(err)
			}
			id, err := c.Next(t.Context(), "order")
			if (err == nil) != (certs != nil) {
				t.Fatalf("Go client %v with %d client certificates under mutual TLS: %d %v", opts, len(certs), id, err)
			}
		}
	}
}

// serialAt is the serial number of the certificate addr serves.
func serialAt(addr string, cfg *tls.Config) (string, error) {
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// Flag mistakes are refused before serve touches the store.
func TestServe_TLSFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	ca := tlstest.NewCA(t, dir, "ca")
	leaf := ca.Server(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	store := "sqlite://" + filepath.Join(dir, "never.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", leaf.CertFile}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-client-ca", ca.File}, "--tls-client-ca needs --tls-cert and --tls-key"},
		{[]string{"--tls-cert", filepath.Join(dir, "nope.crt"), "--tls-key", leaf.KeyFile}, "--tls-cert: stat"},
		{[]string{"--tls-cert", leaf.CertFile, "--tls-key", ca.File}, "TLS certificate"},
	} {
		out, err := exec.Command(bin, append([]string{"serve", "--store", store, "--addr", "127.0.0.1:0"}, tc.args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("serve %v: %v\n%s\nwant %q", tc.args, err, out, tc.want)
		}
	}
	if _, err := exec.Command("test", "-e", filepath.Join(dir, "never.db")).CombinedOutput(); err == nil {
		t.Error("serve created the store before refusing its TLS flags")
	}
}

// On SIGTERM, health turns NOT_SERVING, open Watch streams on both
// transports are told and ended, and serve exits: an open Watch does not
// hold the shutdown for its whole --shutdown-timeout.
func TestServe_SIGTERMEndsWatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	tl := buildTools(t, dir)
	const drain = 20 * time.Second
	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")},
		"--grpc-addr", "127.0.0.1:0", "--shutdown-timeout", drain.String())
	type watcher struct {
		addr string
		out  *lockedOutput
		done chan error
	}
	var ws []watcher
	for _, a := range []string{p.Addr(), grpcAddr(t, p)} {
		w := watcher{addr: a, out: new(lockedOutput), done: make(chan error, 1)}
		cmd := exec.CommandContext(t.Context(), tl.grpcurl, "-plaintext", "-d", `{}`, a, "grpc.health.v1.Health/Watch")
		cmd.Stdout, cmd.Stderr = w.out, w.out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { w.done <- cmd.Wait() }()
		ws = append(ws, w)
	}
	for _, w := range ws {
		if !testtime.Until(30*time.Second, 50*time.Millisecond, func() bool { return strings.Contains(w.out.String(), `"SERVING"`) }) {
			t.Fatalf("Watch at %s sent nothing:\n%s", w.addr, w.out.String())
		}
	}
	if err := p.Stop(drain + time.Second); err != nil {
		t.Fatalf("stop with Watch streams open: %v\n%s", err, p.Log())
	}
	for _, w := range ws {
		if err := <-w.done; err != nil || !strings.Contains(w.out.String(), `"NOT_SERVING"`) {
			t.Errorf("Watch at %s: %v, want NOT_SERVING and the stream's end with OK:\n%s", w.addr, err, w.out.String())
		}
	}
	if strings.Contains(p.Log(), "drain incomplete") {
		t.Errorf("the drain did not complete:\n%s", p.Log())
	}
}

// lockedOutput collects a command's output for another goroutine to read.
type lockedOutput struct {
	mu sync.Mutex
	b  strings.Builder
}

func (o *lockedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *lockedOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
