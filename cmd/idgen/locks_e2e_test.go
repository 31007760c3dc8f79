package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/lock/redisstore"
	"github.com/idgen/idgen/store/dbtest"
)

// lockStep is one call of the hand-over sequence, made by one of
// the black-box clients below.
type lockCaller interface {
	// acquire returns the token, or the error code.
	acquire(t *testing.T, name, owner string) (token int64, code string)
	// release returns "" or the error code.
	release(t *testing.T, name, owner string, token int64) string
	// holder returns the holder's owner and token.
	holder(t *testing.T, name string) (string, int64)
}

// checkHandOver runs the sequence: a's token; b refused without
// a wait; a's release; b's greater token; a's old token refused, and b
// still the holder.
func checkHandOver(t *testing.T, c lockCaller, name string) {
	t.Helper()
	aTok, code := c.acquire(t, name, "a")
	if code != "" {
		t.Fatalf("acquire a: %s", code)
	}
	if _, code := c.acquire(t, name, "b"); code != "lock_held" {
		t.Fatalf("acquire b while a holds: %q, want lock_held", code)
	}
	if code := c.release(t, name, "a", aTok); code != "" {
		t.Fatalf("release a: %s", code)
	}
	bTok, code := c.acquire(t, name, "b")
	if code != "" || bTok <= aTok {
		t.Fatalf("acquire b after a's release: token %d (a's %d), %q", bTok, aTok, code)
	}
	if code := c.release(t, name, "a", aTok); code != "lock_not_held" {
		t.Fatalf("release with a's old token: %q, want lock_not_held", code)
	}
	if owner, tok := c.holder(t, name); owner != "b" || tok != bTok {
		t.Fatalf("holder after the stale release: %q with %d, want b with %d", owner, tok, bTok)
	}
}

// httpLocks is the sequence as curl would make it.
type httpLocks struct{ base, admin string }

func (h httpLocks) do(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, h.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: %d %q is no JSON", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, m
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (h httpLocks) acquire(t *testing.T, name, owner string) (int64, string) {
	st, m := h.do(t, "POST", "/locks/"+url.PathEscape(name), `{"owner":"`+owner+`","ttl":"10s"}`)
	if st != 200 {
		return 0, errCode(m)
	}
	s, _ := m["token"].(string)
	tok, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("token %v is not a decimal JSON string", m["token"])
	}
	return tok, ""
}

func (h httpLocks) release(t *testing.T, name, owner string, token int64) string {
	st, m := h.do(t, "DELETE", "/locks/"+url.PathEscape(name)+"?owner="+owner+"&token="+strconv.FormatInt(token, 10), "")
	if st == 204 {
		return ""
	}
	return errCode(m)
}

func (h httpLocks) holder(t *testing.T, name string) (string, int64) {
	st, m := h.do(t, "GET", "/locks/"+url.PathEscape(name), "")
	g, _ := m["holder"].(map[string]any)
	if st != 200 || g == nil {
		t.Fatalf("describe %s: %d %v", name, st, m)
	}
	tok, _ := strconv.ParseInt(g["token"].(string), 10, 64)
	return g["owner"].(string), tok
}

// clientLocks is the sequence with the Go client's leases.
type clientLocks struct {
	c      *client.Client
	leases map[int64]*lock.Lease
}

func (g clientLocks) acquire(t *testing.T, name, owner string) (int64, string) {
	le, err := g.c.Lock(t.Context(), name, client.LockOptions{Owner: owner})
	var e *client.Error
	switch {
	case errors.Is(err, lock.ErrHeld):
		return 0, "lock_held"
	case errors.As(err, &e):
		return 0, e.Code
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = le.Release(context.Background()) })
	g.leases[le.Token()] = le
	return le.Token(), ""
}

func (g clientLocks) release(t *testing.T, name, owner string, token int64) string {
	var err error
	if le := g.leases[token]; le != nil && le.Err() == nil {
		err = le.Release(t.Context())
	} else {
		err = g.c.ReleaseLock(t.Context(), lock.Grant{Name: name, Owner: owner, Token: token})
	}
	var e *client.Error
	if errors.As(err, &e) {
		return e.Code
	} else if err != nil {
		t.Fatal(err)
	}
	return ""
}

func (g clientLocks) holder(t *testing.T, name string) (string, int64) {
	in, err := g.c.DescribeLock(t.Context(), name)
	if err != nil || in.Holder == nil {
		t.Fatalf("describe %s: %+v, %v", name, in, err)
	}
	return in.Holder.Owner, in.Holder.Token
}

const lockE2EAdmin = "locks-e2e-admin-token-0123456789"

// The black-box run against idgen serve: the sequence over HTTP,
// and with the Go client over HTTP and over gRPC on both ports.
func TestServe_Locks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")},
		"--admin-token", lockE2EAdmin, "--grpc-addr", "127.0.0.1:0")
	checkHandOver(t, httpLocks{base: p.URL, admin: lockE2EAdmin}, "order:http")
	for _, tc := range []struct {
		name string
		opts []client.Option
	}{
		{"client-http", nil},
		{"client-connect-go", []client.Option{client.WithGRPC()}},
		{"client-grpc-go", []client.Option{client.WithGRPCAddr(grpcAddr(t, p))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(p.URL, append(tc.opts, client.WithToken(lockE2EAdmin))...)
			if err != nil {
				t.Fatal(err)
			}
			checkHandOver(t, clientLocks{c: c, leases: map[int64]*lock.Lease{}}, "order:"+tc.name)
		})
	}
}

// grpcurlLocks is the sequence with grpcurl, as a user would type it.
type grpcurlLocks struct{ grpcurl, addr string }

func (g grpcurlLocks) call(t *testing.T, method, body string) (map[string]any, string) {
	t.Helper()
	out, err := runTool(t, g.grpcurl, "-plaintext", "-H", "authorization: Bearer "+lockE2EAdmin, "-d", body, g.addr, "idgen.v1.LockService/"+method)
	if err != nil {
		// The idgen code is the ErrorInfo's reason, which grpcurl shows.
		m := reasonRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("grpcurl %s: %v\n%s", method, err, out)
		}
		return nil, m[1]
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("grpcurl %s: %q is no JSON", method, out)
	}
	return m, ""
}

var reasonRE = regexp.MustCompile(`"reason": "(\w+)"`)

func grpcToken(t *testing.T, g any) int64 {
	m, _ := g.(map[string]any)
	s, _ := m["token"].(string) // protojson writes int64 as a string
	tok, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("grant %v has no token", g)
	}
	return tok
}

func (g grpcurlLocks) acquire(t *testing.T, name, owner string) (int64, string) {
	m, code := g.call(t, "Acquire", `{"name":"`+name+`","owner":"`+owner+`","ttl":"10s"}`)
	if code != "" {
		return 0, code
	}
	return grpcToken(t, m["grant"]), ""
}

func (g grpcurlLocks) release(t *testing.T, name, owner string, token int64) string {
	_, code := g.call(t, "Release", `{"name":"`+name+`","owner":"`+owner+`","token":"`+strconv.FormatInt(token, 10)+`"}`)
	return code
}

func (g grpcurlLocks) holder(t *testing.T, name string) (string, int64) {
	m, code := g.call(t, "Describe", `{"name":"`+name+`"}`)
	h, _ := m["holder"].(map[string]any)
	if code != "" || h == nil {
		t.Fatalf("describe %s: %v %s", name, m, code)
	}
	owner, _ := h["owner"].(string)
	return owner, grpcToken(t, h)
}

// The same sequence with grpcurl on the connect-go port and on grpc-go's.
func TestServe_LocksGRPCurl(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds grpcurl; CI runs it")
	}
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	tl := buildTools(t, dir)
	for _, tr := range e2eTransports() {
		t.Run(tr.name, func(t *testing.T) {
			p := proctest.Serve(t, bin, []string{"IDGEN_STORE=sqlite://" + filepath.Join(t.TempDir(), "idgen.db")},
				append([]string{"--admin-token", lockE2EAdmin}, tr.args...)...)
			checkHandOver(t, grpcurlLocks{grpcurl: tl.grpcurl, addr: tr.addr(t, p)}, "order:"+tr.name)
		})
	}
}

// twoInstances makes a's calls on one instance and b's on another.
type twoInstances struct{ a, b httpLocks }

func (w twoInstances) on(owner string) httpLocks {
	if owner == "a" {
		return w.a
	}
	return w.b
}

func (w twoInstances) acquire(t *testing.T, name, owner string) (int64, string) {
	return w.on(owner).acquire(t, name, owner)
}

func (w twoInstances) release(t *testing.T, name, owner string, token int64) string {
	// The stale release goes to b's instance, which never saw a's grant.
	return w.b.release(t, name, owner, token)
}

func (w twoInstances) holder(t *testing.T, name string) (string, int64) { return w.a.holder(t, name) }

// The sequence across two instances on one PostgreSQL or MySQL database:
// the lock is the store's, not an instance's.
func TestServe_LocksTwoInstancesShareADatabase(t *testing.T) {
	t.Parallel()
	for _, k := range []dbtest.Kind{dbtest.Postgres, dbtest.MySQL} {
		t.Run(k.Name, func(t *testing.T) {
			srv := dbtest.Start(t, k)
			bin := proctest.Binary(t, t.TempDir())
			env := []string{"IDGEN_STORE=" + srv.DSN}
			a := proctest.Serve(t, bin, env, "--admin-token", lockE2EAdmin)
			b := proctest.Serve(t, bin, env, "--admin-token", lockE2EAdmin)
			checkHandOver(t, twoInstances{a: httpLocks{base: a.URL, admin: lockE2EAdmin}, b: httpLocks{base: b.URL, admin: lockE2EAdmin}}, "order:"+k.Name)
		})
	}
}

// Grants kept in Redis (--lock-store): two instances, each with an ID
// store of its own, hand a lock over through the one Redis, over HTTP and
// with the Go client over grpc-go. A Redis that may evict keys, or that
// does not answer, stops the start before the ID store is touched.
func TestServe_LocksOnRedis(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	rs := dbtest.StartRedisServer(t)
	serve := func(name string, args ...string) *proctest.Proc {
		env := []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, name+".db"), "IDGEN_LOCK_STORE=redis://" + rs.Addr + "?prefix=e2e:"}
		return proctest.Serve(t, bin, env, append([]string{"--admin-token", lockE2EAdmin}, args...)...)
	}
	a, b := serve("a", "--grpc-addr", "127.0.0.1:0"), serve("b")
	if !strings.Contains(a.Log(), "locks=redis") {
		t.Errorf("the start line does not say locks=redis:\n%s", a.Log())
	}
	checkHandOver(t, twoInstances{a: httpLocks{base: a.URL, admin: lockE2EAdmin}, b: httpLocks{base: b.URL, admin: lockE2EAdmin}}, "order:redis")
	c, err := client.New(a.URL, client.WithGRPCAddr(grpcAddr(t, a)), client.WithToken(lockE2EAdmin))
	if err != nil {
		t.Fatal(err)
	}
	checkHandOver(t, clientLocks{c: c, leases: map[int64]*lock.Lease{}}, "order:redis-grpc")
	// The grant is Redis's, read by the lock package's own client of it.
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	direct, err := redisstore.New(t.Context(), rdb, redisstore.Options{Prefix: "e2e:"})
	if err != nil {
		t.Fatal(err)
	}
	if in, err := direct.Describe(t.Context(), "order:redis"); err != nil || in.Holder == nil || in.Holder.Owner != "b" {
		t.Errorf("order:redis in Redis: %+v, %v; want b, the holder", in, err)
	}

	evicting := dbtest.StartRedisServer(t, "--maxmemory-policy", "allkeys-lru")
	locked := dbtest.StartRedisServer(t, "--requirepass", "S3cret")
	for _, tc := range []struct{ spec, want string }{
		{"redis://" + evicting.Addr, "has maxmemory-policy allkeys-lru, which can drop a key before it expires"},
		{"redis://:S3cret@127.0.0.1:1", "redis://:xxxxx@127.0.0.1:1: redisstore: read the eviction policy of"},
		{"redis://:S3cret@127.0.0.1:1", "check the host and the port, or leave --lock-store empty"},
		// The password where go-redis reads a user name.
		{"redis://S3cret@" + locked.Addr, "write the password as redis://:PASSWORD@host:port"},
		{"redis+cluster://" + rs.Addr, "this Redis is not a cluster: use redis://"},
	} {
		db := filepath.Join(dir, "never.db")
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		out, err := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0", "--store", "sqlite://"+db, "--lock-store", tc.spec).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "S3cret") {
			t.Errorf("serve --lock-store %s: %v, %q; want a failure saying %q", tc.spec, err, out, tc.want)
		}
		if _, err := os.Stat(db); err == nil {
			t.Errorf("serve --lock-store %s created the ID store before failing", tc.spec)
			_ = os.Remove(db)
		}
	}

	none := serve("none", "--lock-store", "none")
	if st, m := (httpLocks{base: none.URL, admin: lockE2EAdmin}).do(t, "POST", "/locks/x", `{"owner":"a","ttl":"10s"}`); st != http.StatusNotFound || errCode(m) != "locks_disabled" {
		t.Errorf("--lock-store none: POST /locks/x answered %d %v; want 404 locks_disabled", st, m)
	}
}
