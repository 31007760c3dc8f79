package lockcheck

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/store/dbtest"
)

// TestPause_GuardRefusesStaleHolder is Kleppmann's scenario with real
// processes: holder a writes once, is stopped (SIGSTOP) past its TTL,
// b takes the lock and writes with a higher token, and a, let go on
// (SIGCONT), writes again believing it holds the lock: the guard refuses
// that write with lock.ErrStaleToken, and a hears that its lease is lost.
func TestPause_GuardRefusesStaleHolder(t *testing.T) {
	skipShort(t)
	t.Parallel()
	lockDSN := dbtest.Start(t, dbtest.Postgres).DSN
	resDSN, db := resource(t)
	migrate(t, lockDSN)
	bin := workerBin(t)
	common := []string{"-lock", lockDSN, "-resource", resDSN, "-ttl", leaseTTL.String(), "-holds", "1"}
	// a writes when told to, on standard input.
	fa := newFleet(t, bin, 2, append(common, "-step")...)
	a := fa.start("a")
	events := func(f *fleet, p *proc) []Event {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.events[p.owner]
	}
	waitFor := func(f *fleet, p *proc, k Kind) Event {
		t.Helper()
		var got Event
		if err := testtime.WaitFor(30*time.Second, 5*time.Millisecond, func() error {
			for _, e := range events(f, p) {
				if e.Kind == k {
					got = e
					return nil
				}
			}
			return fmt.Errorf("no %s event from %s: %v", k, p.name, events(f, p))
		}); err != nil {
			t.Fatalf("%v\n%s%s", err, fa.stderrs(), f.stderrs())
		}
		return got
	}
	granted := waitFor(fa, a, Granted)
	fmt.Fprintln(a.stdin, "write")
	waitFor(fa, a, Wrote)

	fa.signal(a, syscall.SIGSTOP)
	stopped := time.Now()
	fb := newFleet(t, bin, 1, common...)
	b := fb.start("b")
	bWrote := waitFor(fb, b, Wrote)
	waitFor(fb, b, Released)
	if bWrote.Token <= granted.Token {
		t.Fatalf("b wrote with token %d, not above a's %d", bWrote.Token, granted.Token)
	}
	stayStopped(stopped, 2*leaseTTL)
	fa.signal(a, syscall.SIGCONT)
	fmt.Fprintln(a.stdin, "write")
	stale := waitFor(fa, a, Stale)
	if stale.Token != granted.Token || !strings.Contains(stale.Err, "stale fencing token") {
		t.Fatalf("a's refused write: %+v; want token %d and lock.ErrStaleToken", stale, granted.Token)
	}
	end := waitFor(fa, a, ReleaseError)
	t.Logf("a (token %d) paused %v; b wrote with token %d; a's write then: %s; a's release: %s (%s)",
		granted.Token, time.Since(stopped).Round(10*time.Millisecond), bWrote.Token, stale.Err, end.Err, end.Reason)

	log := readLog(t, db)
	h := fa.history(log)
	for o, es := range fb.history(nil).Events {
		h.Events[o] = es
	}
	c, v := Verify(h)
	if len(v) != 0 || c.Writes != 2 || c.Stale != 1 {
		t.Fatalf("%s; violations %q; want 2 writes (a's, then b's), 1 refused", c, v)
	}
}
