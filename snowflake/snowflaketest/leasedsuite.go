package snowflaketest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/snowflake"
)

// leasedCases are the behaviour of Leased generators over the store:
// claiming, renewing, being fenced off, taking over and releasing worker
// IDs on fake clocks.
func (su *suite) leasedCases() []suiteCase {
	ctx, open, phase := su.ctx, su.open, su.phase
	claim, newLeased := su.claim, su.newLeased
	return []suiteCase{

		{"Leased/TwoInstancesGetDistinctWorkers", func(t *testing.T) {
			now := phase()
			a := newLeased(t, open(t), NewClock(now), "a")
			b := newLeased(t, open(t), NewClock(now), "b")
			if a.WorkerID() == b.WorkerID() || a.WorkerID() < 0 || b.WorkerID() < 0 {
				t.Fatalf("worker IDs %d and %d; want two distinct ones", a.WorkerID(), b.WorkerID())
			}
			var all []int64
			for _, l := range []*snowflake.Leased{a, b} {
				ids, err := l.NextN(ctx, "suite", 5000)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, ids...)
			}
			if d := segmenttest.Duplicates(all); d != 0 {
				t.Fatalf("%d duplicates among %d IDs", d, len(all))
			}
		}},

		{"Leased/TakeoverHonoursTheFloor", func(t *testing.T) {
			now := phase()
			ca := NewClock(now)
			a := newLeased(t, open(t), ca, "a")
			var aIDs []int64
			issue := func(l *snowflake.Leased, ids *[]int64, n int) {
				t.Helper()
				got, err := l.NextN(ctx, "suite", n)
				if err != nil {
					t.Fatalf("NextN: %v", err)
				}
				*ids = append(*ids, got...)
			}
			issue(a, &aIDs, 100)
			ca.Advance(10 * time.Second)
			if err := a.Heartbeat(ctx); err != nil {
				t.Fatalf("Heartbeat: %v", err)
			}
			// IDs after the last renewal are not in the table; a then stalls.
			ca.Advance(15 * time.Second)
			issue(a, &aIDs, 100)
			expiry, worker := a.LeaseExpiry(), a.WorkerID()

			cb := NewClock(expiry)
			b := newLeased(t, open(t), cb, "b")
			if b.WorkerID() != worker {
				t.Fatalf("b got worker %d; want a's expired worker %d, the lowest free", b.WorkerID(), worker)
			}
			var bIDs []int64
			issue(b, &bIDs, 100)
			if p, _ := b.Layout().Decode(bIDs[0]); !p.Time.After(expiry) || bIDs[0] <= slices.Max(aIDs) {
				t.Errorf("b's first ID %d is stamped %v; want after a's expiry %v and above a's IDs (max %d)", bIDs[0], p.Time, expiry, slices.Max(aIDs))
			}

			// a's clock is 5s behind b's: a still believes in its lease and
			// issues under the same worker ID as b, but stamps its IDs before
			// its deadline, and b after a's expiry.
			ca.Advance(10 * time.Second)
			issue(a, &aIDs, 100)
			if p, _ := a.Layout().Decode(aIDs[len(aIDs)-1]); p.WorkerID != worker {
				t.Fatalf("a issued under worker %d before its deadline, want %d", p.WorkerID, worker)
			}
			// Then a's machine is suspended for 10s: its wall clock jumps
			// ahead of b's, its monotonic clock does not. The monotonic
			// deadline is still 2s away, but a must not stamp IDs past it,
			// where b issues.
			ca.StepWall(10 * time.Second)
			if _, err := a.Next(ctx, "suite"); !errors.Is(err, snowflake.ErrNoWorkerLease) {
				t.Fatalf("a's Next after its wall clock passed its deadline = %v, want ErrNoWorkerLease", err)
			}
			cb.Advance(5 * time.Second) // b is where a's wall clock is now
			issue(b, &bIDs, 100)
			// a's next heartbeat finds the lease expired and moves it to
			// another worker ID.
			if err := a.Heartbeat(ctx); err != nil {
				t.Fatalf("a's Heartbeat after the takeover: %v", err)
			}
			if a.WorkerID() == worker || a.WorkerID() < 0 || a.Ready() != nil {
				t.Fatalf("a after re-claiming: worker %d, Ready %v; want a worker other than %d, ready", a.WorkerID(), a.Ready(), worker)
			}
			issue(a, &aIDs, 100)
			issue(b, &bIDs, 100)
			if d := segmenttest.Duplicates(append(slices.Clone(aIDs), bIDs...)); d != 0 {
				t.Fatalf("%d duplicates between a and b", d)
			}
			if !slices.IsSorted(aIDs) {
				t.Errorf("a's IDs are not increasing across the change of worker ID")
			}
		}},

		{"Leased/LostLeaseIsReclaimed", func(t *testing.T) {
			now := phase()
			s := open(t)
			a := newLeased(t, s, NewClock(now), "a")
			worker := a.WorkerID()
			// b's clock is far ahead: it sees a's lease expired and takes it.
			b := claim(t, s, "b", a.LeaseExpiry(), 1024)
			if b.WorkerID != worker {
				t.Fatalf("b got worker %d, want a's %d", b.WorkerID, worker)
			}
			// a's heartbeat, long before its own deadline, learns of it at once.
			if err := a.Heartbeat(ctx); err != nil {
				t.Fatalf("Heartbeat after losing the lease: %v", err)
			}
			if a.WorkerID() == worker || a.WorkerID() < 0 || a.Ready() != nil {
				t.Fatalf("after losing worker %d: worker %d, Ready %v; want another worker, ready", worker, a.WorkerID(), a.Ready())
			}
		}},

		{"Leased/FencedWhileTheStoreFails", func(t *testing.T) {
			now := phase()
			c := NewClock(now)
			fs := &flaky{LeaseStore: open(t)}
			l := newLeased(t, fs, c, "a")
			var ids []int64
			take := func() {
				t.Helper()
				id, err := l.Next(ctx, "suite")
				if err != nil {
					t.Fatalf("Next: %v", err)
				}
				ids = append(ids, id)
			}
			take()
			expiry, worker := l.LeaseExpiry(), l.WorkerID()
			deadline := expiry.Add(-suiteTTL / 10)

			fs.fail.Store(true)
			c.Advance(10 * time.Second)
			if err := l.Heartbeat(ctx); !errors.Is(err, errInjected) {
				t.Fatalf("Heartbeat with the store failing = %v, want the store's error", err)
			}
			// Time is left on the lease: still issuing.
			if err := l.Ready(); err != nil {
				t.Fatalf("Ready before the deadline = %v", err)
			}
			take()

			// At the deadline, the generator stops by itself, heartbeat or not.
			c.Advance(deadline.Sub(c.Wall()))
			if _, err := l.Next(ctx, "suite"); !errors.Is(err, snowflake.ErrNoWorkerLease) {
				t.Fatalf("Next at the deadline = %v, want ErrNoWorkerLease", err)
			}
			if err := l.Heartbeat(ctx); !errors.Is(err, errInjected) {
				t.Fatalf("Heartbeat at the deadline = %v, want the store's error", err)
			}
			if err := l.Ready(); !errors.Is(err, snowflake.ErrNoWorkerLease) || !errors.Is(err, errInjected) {
				t.Fatalf("Ready when fenced = %v; want ErrNoWorkerLease with the store's error", err)
			}
			if l.WorkerID() != -1 || !l.LeaseExpiry().IsZero() {
				t.Errorf("fenced: WorkerID %d, LeaseExpiry %v; want -1 and zero", l.WorkerID(), l.LeaseExpiry())
			}

			// The store heals before the lease expires: renewed, same worker.
			fs.fail.Store(false)
			if err := l.Heartbeat(ctx); err != nil {
				t.Fatalf("Heartbeat after healing: %v", err)
			}
			if l.Ready() != nil || l.WorkerID() != worker || !l.LeaseExpiry().After(expiry) {
				t.Fatalf("after healing: Ready %v, worker %d, expiry %v; want ready on worker %d past %v", l.Ready(), l.WorkerID(), l.LeaseExpiry(), worker, expiry)
			}
			take()

			// Fails again, this time past the expiry: re-claimed once healed.
			fs.fail.Store(true)
			c.Advance(l.LeaseExpiry().Sub(c.Wall()) + time.Second)
			if err := l.Heartbeat(ctx); !errors.Is(err, errInjected) {
				t.Fatalf("Heartbeat past the expiry = %v, want the store's error", err)
			}
			if _, err := l.Next(ctx, "suite"); !errors.Is(err, snowflake.ErrNoWorkerLease) {
				t.Fatalf("Next past the expiry = %v, want ErrNoWorkerLease", err)
			}
			fs.fail.Store(false)
			if err := l.Heartbeat(ctx); err != nil {
				t.Fatalf("Heartbeat after healing: %v", err)
			}
			if err := l.Ready(); err != nil || l.WorkerID() < 0 {
				t.Fatalf("after re-claiming: Ready %v, worker %d", err, l.WorkerID())
			}
			take()
			if !slices.IsSorted(ids) || segmenttest.Duplicates(ids) != 0 {
				t.Errorf("IDs %v are not strictly increasing across the fencing", ids)
			}
		}},

		{"Leased/RestartWithTheClockBehind", func(t *testing.T) {
			tests := []struct {
				behind  time.Duration // the new process's clock behind the old one's
				wantErr error         // from the first Next
			}{
				{3 * time.Millisecond, nil},
				{10 * time.Second, snowflake.ErrClockMovedBackwards},
			}
			for _, tt := range tests {
				t.Run(tt.behind.String(), func(t *testing.T) {
					now := phase()
					a := newLeased(t, open(t), NewClock(now), "a")
					last, err := a.Next(ctx, "suite")
					if err != nil {
						t.Fatal(err)
					}
					worker, lastTS := a.WorkerID(), a.LastTimestamp()
					if err := a.Shutdown(ctx); err != nil {
						t.Fatalf("Close: %v", err)
					}

					c := NewClock(now.Add(-tt.behind))
					b := newLeased(t, open(t), c, "b")
					if b.WorkerID() != worker {
						t.Fatalf("b got worker %d; want the released %d", b.WorkerID(), worker)
					}
					if err := b.Ready(); !errors.Is(err, tt.wantErr) {
						t.Errorf("Ready = %v, want %v", err, tt.wantErr)
					}
					id, err := b.Next(ctx, "suite")
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("Next %v behind the persisted last timestamp = %d, %v; want %v", tt.behind, id, err, tt.wantErr)
					}
					if err != nil {
						if c.Slept() != 0 {
							t.Errorf("slept %v before refusing", c.Slept())
						}
						c.Advance(tt.behind)
						if id, err = b.Next(ctx, "suite"); err != nil {
							t.Fatalf("Next once the clock has caught up: %v", err)
						}
					} else if c.Slept() < tt.behind {
						t.Errorf("slept %v, want at least %v", c.Slept(), tt.behind)
					}
					if p, _ := b.Layout().Decode(id); id <= last || !p.Time.After(lastTS) {
						t.Errorf("b's ID %d (stamped %v) does not follow a's last %d (stamped %v)", id, p.Time, last, lastTS)
					}
				})
			}
		}},

		{"Leased/CloseReleasesAtOnce", func(t *testing.T) {
			now := phase()
			a := newLeased(t, open(t), NewClock(now), "a")
			worker := a.WorkerID()
			if err := a.Shutdown(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if _, err := a.Next(ctx, "suite"); !errors.Is(err, snowflake.ErrClosed) || !errors.Is(err, snowflake.ErrNoWorkerLease) {
				t.Errorf("Next after Close = %v; want ErrClosed and ErrNoWorkerLease", err)
			}
			if err := a.Ready(); !errors.Is(err, snowflake.ErrClosed) {
				t.Errorf("Ready after Close = %v, want ErrClosed", err)
			}
			if err := a.Heartbeat(ctx); !errors.Is(err, snowflake.ErrClosed) {
				t.Errorf("Heartbeat after Close = %v, want ErrClosed", err)
			}
			if err := a.Shutdown(ctx); err != nil {
				t.Errorf("second Close = %v, want nil", err)
			}
			// Long before the lease would have expired.
			b := newLeased(t, open(t), NewClock(now.Add(time.Second)), "b")
			if b.WorkerID() != worker {
				t.Errorf("b got worker %d; want %d, released by a's Close", b.WorkerID(), worker)
			}
		}},
	}
}
