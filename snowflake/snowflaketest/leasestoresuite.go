package snowflaketest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/snowflake"
)

// storeCases are the store contract: the LeaseStore's methods one by
// one, on fake times, with no Leased generator in between.
func (su *suite) storeCases() []suiteCase {
	ctx, open, phase, owner := su.ctx, su.open, su.phase, su.owner
	claim := su.claim
	return []suiteCase{
		{"Claim/LowestFreeFirst", func(t *testing.T) {
			s := open(t)
			now := phase()
			a := claim(t, s, "a", now, 1024)
			if a.WorkerID != 0 || a.Owner != owner("a") || !a.ExpiresAt.Equal(now.Add(suiteTTL)) || a.LastTimestamp.After(now) {
				t.Errorf("first claim = %+v; want worker 0, owner %q, expiring at %v, LastTimestamp not after now", a, owner("a"), now.Add(suiteTTL))
			}
			if b := claim(t, s, "b", now, 1024); b.WorkerID != 1 {
				t.Errorf("second claim got worker %d, want 1", b.WorkerID)
			}
			// Whole milliseconds: what the table holds.
			c := claim(t, s, "c", now.Add(1500*time.Microsecond), 1024)
			if !c.ExpiresAt.Equal(now.Add(time.Millisecond + suiteTTL)) {
				t.Errorf("claim at now+1.5ms expires at %v, want %v", c.ExpiresAt, now.Add(time.Millisecond+suiteTTL))
			}
		}},

		{"Claim/RejectsBadArguments", func(t *testing.T) {
			s := open(t)
			now := phase()
			tests := []struct {
				name       string
				owner      string
				ttl        time.Duration
				maxWorkers int64
			}{
				{"empty owner", "", suiteTTL, 1024},
				{"owner of 129 bytes", strings.Repeat("o", 129), suiteTTL, 1024},
				{"zero TTL", owner("x"), 0, 1024},
				{"TTL under a millisecond", owner("x"), 999 * time.Microsecond, 1024},
				{"no worker IDs", owner("x"), suiteTTL, 0},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					l, err := s.Claim(ctx, tt.owner, now, tt.ttl, tt.maxWorkers)
					if err == nil || errors.Is(err, snowflake.ErrNoFreeWorker) {
						t.Fatalf("Claim = %+v, %v; want an argument error", l, err)
					}
				})
			}
		}},

		{"Claim/NoFreeWorker", func(t *testing.T) {
			s := open(t)
			now := phase()
			a, b := claim(t, s, "a", now, 2), claim(t, s, "b", now, 2)
			if a.WorkerID == b.WorkerID {
				t.Fatalf("a and b both got worker %d", a.WorkerID)
			}
			_, err := s.Claim(ctx, owner("c"), now.Add(suiteTTL-time.Millisecond), suiteTTL, 2)
			if !errors.Is(err, snowflake.ErrNoFreeWorker) {
				t.Fatalf("third claim of 2 worker IDs = %v, want ErrNoFreeWorker", err)
			}
			// At the expiry, both are free again; the lowest is taken.
			if c := claim(t, s, "c", now.Add(suiteTTL), 2); c.WorkerID != 0 {
				t.Errorf("claim at the expiry got worker %d, want 0", c.WorkerID)
			}
		}},

		// 16 claimers, each with its own pool, claim 5 worker IDs each at the
		// same time: 80, more than a store may have created rows for yet.
		{"Claim/ConcurrentClaimsAreDistinct", func(t *testing.T) {
			const claimers, each = 16, 5
			now := phase()
			stores := make([]LeaseStore, claimers)
			for i := range stores {
				stores[i] = open(t)
			}
			name := func(i int) string { return fmt.Sprintf("c%03d", i) }
			leases := make([]snowflake.Lease, claimers*each)
			errs := make([]error, claimers*each)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for c, s := range stores {
				wg.Go(func() {
					<-start
					for i := c * each; i < (c+1)*each; i++ {
						leases[i], errs[i] = s.Claim(ctx, owner(name(i)), now, suiteTTL, 1024)
					}
				})
			}
			close(start)
			wg.Wait()
			seen := map[int64]int{}
			for i, l := range leases {
				if errs[i] != nil {
					t.Errorf("claim %d: %v", i, errs[i])
					continue
				}
				if j, dup := seen[l.WorkerID]; dup {
					t.Errorf("claims %d and %d both got worker %d", j, i, l.WorkerID)
				}
				seen[l.WorkerID] = i
				if l.WorkerID < 0 || l.WorkerID >= 1024 {
					t.Errorf("claim %d got worker %d, outside 0..1023", i, l.WorkerID)
				}
			}
			// The table agrees about who holds what.
			ws, err := stores[0].Workers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held := map[int64]string{}
			for _, w := range ws {
				held[w.WorkerID] = w.Owner
			}
			for i, l := range leases {
				if errs[i] == nil && held[l.WorkerID] != owner(name(i)) {
					t.Errorf("Workers says worker %d is held by %q, want claim %d's owner", l.WorkerID, held[l.WorkerID], i)
				}
			}
		}},

		{"Renew", func(t *testing.T) {
			s := open(t)
			now := phase()
			a := claim(t, s, "a", now, 1)
			r, err := s.Renew(ctx, a, now.Add(time.Second), now.Add(500*time.Millisecond), suiteTTL)
			if err != nil {
				t.Fatalf("Renew: %v", err)
			}
			if r.WorkerID != a.WorkerID || r.Owner != a.Owner || !r.ExpiresAt.Equal(now.Add(time.Second+suiteTTL)) ||
				r.LastTimestamp.Before(now.Add(500*time.Millisecond)) {
				t.Errorf("Renew = %+v; want worker %d, expiry %v, LastTimestamp at least %v", r, a.WorkerID, now.Add(time.Second+suiteTTL), now.Add(500*time.Millisecond))
			}
			// A smaller LastTimestamp does not move the stored one back.
			if _, err := s.Renew(ctx, r, now.Add(2*time.Second), now.Add(100*time.Millisecond), suiteTTL); err != nil {
				t.Fatalf("second Renew: %v", err)
			}
			if w := worker(t, s, a.WorkerID); !w.LastTimestamp.Equal(now.Add(500*time.Millisecond)) || !w.ExpiresAt.Equal(now.Add(2*time.Second+suiteTTL)) {
				t.Errorf("stored %+v; want LastTimestamp %v, expiry %v", w, now.Add(500*time.Millisecond), now.Add(2*time.Second+suiteTTL))
			}

			notOurs := r
			notOurs.Owner = owner("intruder")
			if _, err := s.Renew(ctx, notOurs, now.Add(3*time.Second), now, suiteTTL); !errors.Is(err, snowflake.ErrLeaseLost) {
				t.Errorf("Renew by another owner = %v, want ErrLeaseLost", err)
			}
			expiry := now.Add(2*time.Second + suiteTTL)
			if _, err := s.Renew(ctx, r, expiry, now, suiteTTL); !errors.Is(err, snowflake.ErrLeaseLost) {
				t.Errorf("Renew at the expiry = %v, want ErrLeaseLost", err)
			}
		}},

		// A holder whose clock stepped back renews with an earlier now: the
		// stored expiry must not move back, or a claimer could take the worker
		// ID while the holder still stamps IDs up to its old deadline.
		{"Renew/NeverShortensTheLease", func(t *testing.T) {
			s := open(t)
			now := phase()
			a := claim(t, s, "a", now, 1)
			r, err := s.Renew(ctx, a, now.Add(-5*time.Second), time.Time{}, suiteTTL)
			if err != nil {
				t.Fatalf("Renew with the clock 5s back: %v", err)
			}
			if r.ExpiresAt.After(a.ExpiresAt) || r.ExpiresAt.Before(now.Add(-5*time.Second+suiteTTL)) {
				t.Errorf("Renew returned expiry %v; want at most the stored %v", r.ExpiresAt, a.ExpiresAt)
			}
			if w := worker(t, s, a.WorkerID); !w.ExpiresAt.Equal(a.ExpiresAt) {
				t.Errorf("stored expiry %v after a renewal from behind; want it kept at %v", w.ExpiresAt, a.ExpiresAt)
			}
			if _, err := s.Claim(ctx, owner("b"), a.ExpiresAt.Add(-time.Millisecond), suiteTTL, 1); !errors.Is(err, snowflake.ErrNoFreeWorker) {
				t.Errorf("claim before the first expiry = %v, want ErrNoFreeWorker", err)
			}
		}},

		{"Static", func(t *testing.T) {
			st, ok := open(t).(snowflake.StaticLeaseStore)
			if !ok {
				t.Skip("not a StaticLeaseStore")
			}
			now := phase()
			// Worker 0 is taken by a lease: a static claim of it is refused.
			leased := claim(t, st, "leased", now, 1)
			if _, err := st.ClaimStatic(ctx, owner("static"), leased.WorkerID, now.Add(time.Second), suiteTTL); !errors.Is(err, snowflake.ErrNoFreeWorker) {
				t.Fatalf("static claim of a live leased worker = %v, want ErrNoFreeWorker", err)
			}
			if err := st.Release(ctx, leased, now.Add(2*time.Second)); err != nil {
				t.Fatal(err)
			}
			a, err := st.ClaimStatic(ctx, owner("static"), 0, now.Add(3*time.Second), suiteTTL)
			if err != nil {
				t.Fatalf("static claim of a free worker: %v", err)
			}
			if a.WorkerID != 0 || a.LastTimestamp.Before(now.Add(2*time.Second)) {
				t.Fatalf("static claim = %+v; want worker 0 above the released floor %v", a, now.Add(2*time.Second))
			}
			if _, err := st.ClaimStatic(ctx, owner("other"), 0, now.Add(4*time.Second), suiteTTL); !errors.Is(err, snowflake.ErrNoFreeWorker) {
				t.Fatalf("second static claim of a live worker = %v, want ErrNoFreeWorker", err)
			}
			if err := st.Release(ctx, a, now.Add(5*time.Second)); err != nil {
				t.Fatal(err)
			}
			// Released, and even long after: pinned, never leased.
			if _, err := st.Claim(ctx, owner("leased2"), now.Add(5*time.Minute), suiteTTL, 1); !errors.Is(err, snowflake.ErrNoFreeWorker) {
				t.Fatalf("leased claim of a pinned worker = %v, want ErrNoFreeWorker", err)
			}
			b, err := st.ClaimStatic(ctx, owner("static"), 0, now.Add(5*time.Minute), suiteTTL)
			if err != nil || b.LastTimestamp.Before(now.Add(5*time.Second)) {
				t.Fatalf("static restart = %+v, %v; want the floor %v", b, err, now.Add(5*time.Second))
			}
			if err := st.Release(ctx, b, now.Add(5*time.Minute)); err != nil {
				t.Fatal(err)
			}
			if err := st.Unpin(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if c := claim(t, st, "leased3", now.Add(5*time.Minute+time.Second), 1); c.WorkerID != 0 || c.LastTimestamp.Before(now.Add(5*time.Minute)) {
				t.Fatalf("leased claim after Unpin = %+v; want worker 0 above %v", c, now.Add(5*time.Minute))
			}
		}},

		{"ExpiredLeaseIsTakenOver", func(t *testing.T) {
			s := open(t)
			now := phase()
			a := claim(t, s, "a", now, 1)
			a, err := s.Renew(ctx, a, now.Add(time.Second), now.Add(time.Second), suiteTTL)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Claim(ctx, owner("b"), a.ExpiresAt.Add(-time.Millisecond), suiteTTL, 1); !errors.Is(err, snowflake.ErrNoFreeWorker) {
				t.Fatalf("claim a millisecond before the expiry = %v, want ErrNoFreeWorker", err)
			}
			b := claim(t, s, "b", a.ExpiresAt, 1)
			// a may have issued IDs after its last renewal, up to its expiry.
			if b.WorkerID != a.WorkerID || !b.LastTimestamp.Equal(a.ExpiresAt) {
				t.Errorf("takeover = %+v; want worker %d with LastTimestamp at a's expiry %v", b, a.WorkerID, a.ExpiresAt)
			}
			if w := worker(t, s, b.WorkerID); w.Owner != b.Owner || w.LastTimestamp.Before(a.ExpiresAt) {
				t.Errorf("stored %+v after the takeover; want owner %q and the floor %v kept", w, b.Owner, a.ExpiresAt)
			}
			if _, err := s.Renew(ctx, a, a.ExpiresAt, a.ExpiresAt, suiteTTL); !errors.Is(err, snowflake.ErrLeaseLost) {
				t.Errorf("Renew by the old owner = %v, want ErrLeaseLost", err)
			}
			if err := s.Release(ctx, a, a.ExpiresAt); !errors.Is(err, snowflake.ErrLeaseLost) {
				t.Errorf("Release by the old owner = %v, want ErrLeaseLost", err)
			}
			if _, err := s.Renew(ctx, b, a.ExpiresAt.Add(time.Second), time.Time{}, suiteTTL); err != nil {
				t.Errorf("Renew by the new owner: %v", err)
			}
		}},

		{"ReleaseFreesAtOnce", func(t *testing.T) {
			s := open(t)
			now := phase()
			a := claim(t, s, "a", now, 1)
			if err := s.Release(ctx, a, now.Add(2*time.Millisecond)); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if w := worker(t, s, a.WorkerID); w.Owner != "" || !w.LastTimestamp.Equal(now.Add(2*time.Millisecond)) {
				t.Errorf("stored %+v after Release; want no owner and LastTimestamp %v", w, now.Add(2*time.Millisecond))
			}
			if err := s.Release(ctx, a, now); !errors.Is(err, snowflake.ErrLeaseLost) {
				t.Errorf("second Release = %v, want ErrLeaseLost", err)
			}
			if _, err := s.Renew(ctx, a, now.Add(time.Millisecond), now, suiteTTL); !errors.Is(err, snowflake.ErrLeaseLost) {
				t.Errorf("Renew after Release = %v, want ErrLeaseLost", err)
			}
			// Long before the expiry; the released lease's floor is the
			// LastTimestamp its holder reported, not the expiry.
			b := claim(t, s, "b", now.Add(time.Millisecond), 1)
			if b.WorkerID != a.WorkerID || !b.LastTimestamp.Equal(now.Add(2*time.Millisecond)) {
				t.Errorf("claim after Release = %+v; want worker %d with LastTimestamp %v", b, a.WorkerID, now.Add(2*time.Millisecond))
			}
		}},
	}
}
