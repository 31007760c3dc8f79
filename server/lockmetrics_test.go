package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/server"
)

// Each lock call is counted by its outcome, queued acquires by how their
// wait ended, and renewals refused as losses; nothing names a lock.
func TestLocks_Metrics(t *testing.T) {
	t.Parallel()
	m := server.NewMetrics()
	base := lockServerWith(t, server.Config{Metrics: m}, server.LockConfig{MinTTL: 50 * time.Millisecond})
	api := lockAPI{t: t, base: base}

	for _, step := range []struct {
		name string
		do   func() lockAnswer
		want int
	}{
		{"a takes job", func() lockAnswer { return api.acquire("job", "a", "10s", "") }, 200},
		{"b, no wait", func() lockAnswer { return api.acquire("job", "b", "10s", "") }, 409},
		{"b waits 100ms in vain", func() lockAnswer { return api.acquire("job", "b", "10s", "100ms") }, 409},
		{"a's token from b", func() lockAnswer { return api.release("job", "b", "1") }, 409},
		{"renew of a token never granted", func() lockAnswer {
			return api.call(http.MethodPost, "/locks/job/renew", `{"owner":"a","token":"999","ttl":"10s"}`)
		}, 409},
		{"TTL out of bounds", func() lockAnswer { return api.acquire("job", "c", "1ms", "") }, 400},
		{"c takes short, lapsing", func() lockAnswer { return api.acquire("short", "c", "100ms", "") }, 200},
		{"d waits for c's lapse", func() lockAnswer { return api.acquire("short", "d", "10s", "5s") }, 200},
	} {
		if a := step.do(); a.status != step.want {
			t.Fatalf("%s: %d %s; want %d", step.name, a.status, a.raw, step.want)
		}
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(b)
	for _, want := range []string{
		`idgen_lock_calls_total{call="acquire",outcome="granted"} 3`,
		`idgen_lock_calls_total{call="acquire",outcome="held"} 2`,
		`idgen_lock_calls_total{call="acquire",outcome="invalid"} 1`,
		`idgen_lock_calls_total{call="release",outcome="not_held"} 1`,
		`idgen_lock_calls_total{call="renew",outcome="lost"} 1`,
		`idgen_lock_calls_total{call="renew",outcome="renewed"} 0`,
		`idgen_lock_losses_total{via="renew"} 1`,
		`idgen_lock_losses_total{via="hold"} 0`,
		`idgen_lock_wait_seconds_count{outcome="held"} 1`,
		`idgen_lock_wait_seconds_count{outcome="granted"} 1`,
		`idgen_lock_wait_seconds_count{outcome="canceled"} 0`,
		`idgen_lock_waiting 0`,
		`idgen_lock_guard_checks_total{result="stale"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, grepLines(text, "idgen_lock_"))
		}
	}
	if strings.Contains(grepLines(text, "idgen_lock_"), "job") {
		t.Errorf("a lock name in a label:\n%s", grepLines(text, "idgen_lock_"))
	}
}
