package snowflake_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/snowflake/snowflaketest"
)

// Both adapters are what the server consumes.
var (
	_ idgen.Generator = (*snowflake.Leased)(nil)
	_ idgen.Generator = (*snowflake.Tagged)(nil)
)

var start = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func newLeased(t *testing.T, store snowflake.LeaseStore, cfg snowflake.LeasedConfig) *snowflake.Leased {
	t.Helper()
	l, err := snowflake.NewLeased(context.Background(), store, cfg)
	if err != nil {
		t.Fatalf("NewLeased: %v", err)
	}
	t.Cleanup(func() { _ = l.Shutdown(context.Background()) })
	return l
}

func TestNewLeased_RejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     snowflake.LeasedConfig
		wantMsg string
	}{
		{"worker ID set", snowflake.LeasedConfig{Generator: snowflake.Config{WorkerID: 3}}, "leave Generator.WorkerID zero"},
		{"TTL too short", snowflake.LeasedConfig{TTL: 9 * time.Millisecond}, "below 10ms"},
		{"negative margin", snowflake.LeasedConfig{Margin: -1}, "Margin"},
		{"margin as long as the TTL", snowflake.LeasedConfig{TTL: time.Second, Margin: time.Second}, "shorter than TTL"},
		{"renewal after the deadline", snowflake.LeasedConfig{TTL: time.Second, RenewInterval: 900 * time.Millisecond}, "lengthen TTL"},
		{"negative retry", snowflake.LeasedConfig{RetryInterval: -1}, "RetryInterval"},
		{"negative release timeout", snowflake.LeasedConfig{ReleaseTimeout: -1}, "ReleaseTimeout"},
		{"owner too long", snowflake.LeasedConfig{Owner: strings.Repeat("o", 129)}, "more than 128"},
		{"bad layout", snowflake.LeasedConfig{Generator: snowflake.Config{TimeBits: 41}}, "all be zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := snowflaketest.NewMemory()
			tt.cfg.Generator.Clock = snowflaketest.NewClock(start)
			l, err := snowflake.NewLeased(context.Background(), store, tt.cfg)
			if !errors.Is(err, snowflake.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("NewLeased = %v, %v; want ErrInvalidConfig saying %q", l, err, tt.wantMsg)
			}
			if ws, _ := store.Workers(context.Background()); len(ws) != 0 {
				t.Errorf("an invalid config claimed %v", ws)
			}
		})
	}
	if _, err := snowflake.NewLeased(context.Background(), nil, snowflake.LeasedConfig{}); !errors.Is(err, snowflake.ErrInvalidConfig) {
		t.Errorf("NewLeased with a nil store = %v, want ErrInvalidConfig", err)
	}
}

func TestNewLeased_ReportsClaimErrors(t *testing.T) {
	errDown := errors.New("database down")
	tests := []struct {
		name    string
		setup   func(s *snowflaketest.Memory)
		wantErr error
	}{
		{"every worker ID leased", func(s *snowflaketest.Memory) {
			for range 2 {
				if _, err := s.Claim(context.Background(), "other", start, time.Minute, 2); err != nil {
					panic(err)
				}
			}
		}, snowflake.ErrNoFreeWorker},
		{"store down", func(s *snowflaketest.Memory) { s.SetError(errDown) }, errDown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := snowflaketest.NewMemory()
			tt.setup(store)
			l, err := snowflake.NewLeased(context.Background(), store, snowflake.LeasedConfig{
				// 2 worker IDs.
				Generator: snowflake.Config{TimeBits: 41, WorkerBits: 1, SequenceBits: 21, Clock: snowflaketest.NewClock(start)},
			})
			if !errors.Is(err, tt.wantErr) || !strings.HasPrefix(err.Error(), "snowflake: claim a worker ID: ") {
				t.Fatalf("NewLeased = %v, %v; want %v, prefixed with what failed", l, err, tt.wantErr)
			}
		})
	}
}

func TestLeased_DefaultsAndState(t *testing.T) {
	store := snowflaketest.NewMemory()
	clock := snowflaketest.NewClock(start)
	l := newLeased(t, store, snowflake.LeasedConfig{Generator: snowflake.Config{Clock: clock}, RenewInterval: -1})
	if l.WorkerID() != 0 || !l.LeaseExpiry().Equal(start.Add(30*time.Second)) || l.Ready() != nil {
		t.Errorf("WorkerID %d, LeaseExpiry %v, Ready %v; want 0, %v, nil", l.WorkerID(), l.LeaseExpiry(), l.Ready(), start.Add(30*time.Second))
	}
	if o := l.Owner(); strings.Count(o, "/") != 2 || len(o) > 128 {
		t.Errorf("default Owner %q, want host/pid/random", o)
	}
	if !l.LastTimestamp().IsZero() {
		t.Errorf("LastTimestamp before any ID = %v, want zero", l.LastTimestamp())
	}
	id, err := l.Next(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := l.Layout().Decode(id); !p.Time.Equal(start) || p.WorkerID != 0 || !l.LastTimestamp().Equal(start) {
		t.Errorf("ID %+v, LastTimestamp %v", p, l.LastTimestamp())
	}
	// The heartbeat records LastTimestamp in the store.
	clock.Advance(10 * time.Second)
	if err := l.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	ws, _ := store.Workers(context.Background())
	if len(ws) != 1 || !ws[0].LastTimestamp.Equal(start) || !ws[0].ExpiresAt.Equal(start.Add(40*time.Second)) || ws[0].Owner != l.Owner() {
		t.Errorf("stored %+v after a heartbeat", ws)
	}
}

// The background heartbeat on the real clock: it renews, fences when the
// store fails for longer than the lease, and recovers. Only the sequence
// of states is checked, never how long they took.
func TestLeased_BackgroundHeartbeat(t *testing.T) {
	store := snowflaketest.NewMemory()
	l := newLeased(t, store, snowflake.LeasedConfig{TTL: 300 * time.Millisecond, RenewInterval: 20 * time.Millisecond})
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if !testtime.Until(10*time.Second, 5*time.Millisecond, cond) {
			t.Fatalf("no %s within 10s", what)
		}
	}
	first := l.LeaseExpiry()
	waitFor("renewal", func() bool { return l.LeaseExpiry().After(first) })
	if _, err := l.Next(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}

	errDown := errors.New("database down")
	store.SetError(errDown)
	waitFor("fencing", func() bool { return l.Ready() != nil })
	if err := l.Ready(); !errors.Is(err, snowflake.ErrNoWorkerLease) {
		t.Fatalf("Ready while the store is down = %v, want ErrNoWorkerLease", err)
	}
	if _, err := l.Next(context.Background(), "t"); !errors.Is(err, snowflake.ErrNoWorkerLease) {
		t.Fatalf("Next while the store is down = %v, want ErrNoWorkerLease", err)
	}

	store.SetError(nil)
	waitFor("recovery", func() bool { return l.Ready() == nil })
	if _, err := l.Next(context.Background(), "t"); err != nil {
		t.Fatalf("Next after recovery: %v", err)
	}
	if err := l.Shutdown(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// TestMain's goleak check covers the heartbeat goroutine.
}

// Close racing heartbeats must leave the generator stopped and the lease
// released, whichever runs first.
func TestLeased_CloseDuringHeartbeats(t *testing.T) {
	errDown := errors.New("database down")
	tests := []struct {
		name     string
		storeErr error // from every call once the heartbeats start
	}{
		{"store up", nil},
		// Heartbeats past the deadline pause the generator with the
		// store's error, racing Close's ErrClosed.
		{"store down past the deadline", errDown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 {
				store := snowflaketest.NewMemory()
				clock := snowflaketest.NewClock(start)
				l := newLeased(t, store, snowflake.LeasedConfig{Generator: snowflake.Config{Clock: clock}, RenewInterval: -1})
				if tt.storeErr != nil {
					store.SetError(tt.storeErr)
					clock.Advance(28 * time.Second) // past TTL less Margin
				}
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						for range 10 {
							_ = l.Heartbeat(context.Background())
						}
					})
				}
				if err := l.Shutdown(context.Background()); !errors.Is(err, tt.storeErr) {
					t.Fatalf("Close = %v, want %v", err, tt.storeErr)
				}
				wg.Wait()
				if _, err := l.Next(context.Background(), "t"); !errors.Is(err, snowflake.ErrClosed) {
					t.Fatalf("Next after Close = %v, want ErrClosed", err)
				}
				if tt.storeErr != nil {
					continue
				}
				ws, _ := store.Workers(context.Background())
				for _, w := range ws {
					if w.Owner != "" {
						t.Fatalf("worker %d still held by %q after Close", w.WorkerID, w.Owner)
					}
				}
			}
		})
	}
}

func TestTagged_ValidatesInputFirst(t *testing.T) {
	g, err := snowflake.New(snowflake.Config{WorkerID: 1, Clock: snowflaketest.NewClock(start)})
	if err != nil {
		t.Fatal(err)
	}
	store := snowflaketest.NewMemory()
	leased := newLeased(t, store, snowflake.LeasedConfig{Generator: snowflake.Config{Clock: snowflaketest.NewClock(start)}, RenewInterval: -1})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		tag     string
		n       int // 0 calls Next, else NextN
		wantErr error
	}{
		{"empty tag", context.Background(), "", 0, idgen.ErrInvalidTag},
		{"tag with a space", context.Background(), "a b", 0, idgen.ErrInvalidTag},
		{"tag of 65 bytes", context.Background(), strings.Repeat("a", 65), 0, idgen.ErrInvalidTag},
		{"tag of 10kB", context.Background(), strings.Repeat("/", 10000), 3, idgen.ErrInvalidTag},
		{"bad tag and count", context.Background(), "a/b", -1, idgen.ErrInvalidTag},
		{"bad tag, cancelled", cancelled, "a/b", 0, idgen.ErrInvalidTag},
		{"negative count", context.Background(), "order", -1, idgen.ErrInvalidCount},
		{"cancelled", cancelled, "order", 0, context.Canceled},
		{"cancelled batch", cancelled, "order", 2, context.Canceled},
		{"batch", context.Background(), "order:v1.a_b-c", 5, nil},
	}
	for _, gen := range []struct {
		name string
		g    idgen.Generator
	}{{"Tagged", snowflake.NewTagged(g)}, {"Leased", leased}} {
		for _, tt := range tests {
			t.Run(gen.name+"/"+tt.name, func(t *testing.T) {
				var err error
				var got []int64
				if tt.n == 0 {
					var id int64
					id, err = gen.g.Next(tt.ctx, tt.tag)
					if err == nil {
						got = []int64{id}
					}
				} else {
					got, err = gen.g.NextN(tt.ctx, tt.tag, tt.n)
				}
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) || got != nil {
						t.Fatalf("got %v, %v; want nothing and %v", got, err, tt.wantErr)
					}
					if len(err.Error()) > 300 {
						t.Errorf("error of %d bytes quotes the whole input", len(err.Error()))
					}
					return
				}
				if err != nil || len(got) != max(tt.n, 1) {
					t.Fatalf("got %v, %v; want %d IDs", got, err, max(tt.n, 1))
				}
				for i := 1; i < len(got); i++ {
					if got[i] <= got[i-1] {
						t.Fatalf("IDs %v not increasing", got)
					}
				}
			})
		}
	}
}

func TestTagged_NextNZero(t *testing.T) {
	g, err := snowflake.New(snowflake.Config{Clock: snowflaketest.NewClock(start)})
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := snowflake.NewTagged(g).NextN(context.Background(), "order", 0); !errors.Is(err, idgen.ErrInvalidCount) || ids != nil {
		t.Fatalf("NextN(0) = %v, %v; want ErrInvalidCount", ids, err)
	}
}

// blockingStore's Renew waits to be let go, then fails.
type blockingStore struct {
	*snowflaketest.Memory
	entered, release chan struct{}
	err              error
}

func (b *blockingStore) Renew(context.Context, snowflake.Lease, time.Time, time.Time, time.Duration) (snowflake.Lease, error) {
	b.entered <- struct{}{}
	<-b.release
	return snowflake.Lease{}, b.err
}

// A heartbeat already in its store call when Close starts must not leave
// the generator paused with its own cause instead of ErrClosed.
func TestLeased_Close_WinsOverHeartbeatInFlight(t *testing.T) {
	store := &blockingStore{Memory: snowflaketest.NewMemory(),
		entered: make(chan struct{}), release: make(chan struct{}), err: errors.New("database down")}
	clock := snowflaketest.NewClock(start)
	l := newLeased(t, store, snowflake.LeasedConfig{Generator: snowflake.Config{Clock: clock}, RenewInterval: -1})
	clock.Advance(28 * time.Second) // past TTL less Margin: a failed renewal pauses

	hb := make(chan error, 1)
	go func() { hb <- l.Heartbeat(context.Background()) }()
	<-store.entered
	closed := make(chan error, 1)
	go func() { closed <- l.Shutdown(context.Background()) }()
	// Close has paused the generator and waits for the heartbeat.
	if !testtime.Until(10*time.Second, time.Millisecond, func() bool {
		_, err := l.Next(context.Background(), "t")
		return errors.Is(err, snowflake.ErrClosed)
	}) {
		t.Fatal("Close did not pause the generator within 10s")
	}
	close(store.release)
	if err := <-hb; !errors.Is(err, store.err) {
		t.Errorf("Heartbeat = %v, want the store's error", err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close = %v", err)
	}
	if _, err := l.Next(context.Background(), "t"); !errors.Is(err, snowflake.ErrClosed) {
		t.Fatalf("Next after Close = %v, want ErrClosed", err)
	}
}

// ownedStore is a LeaseStore that names the process's owner, as
// store.Store.Leases does.
type ownedStore struct {
	*snowflaketest.Memory
	owner string
}

func (s ownedStore) Owner() string { return s.owner }

// A generator with no Owner of its own claims under the store's, so that
// its lease and the store's presence lease are one process's; one given
// an Owner keeps it, and a store that names none gets a fresh one.
func TestNewLeased_Owner(t *testing.T) {
	tests := []struct {
		name  string
		store snowflake.LeaseStore
		cfg   string
		want  string
	}{
		{"the store's", ownedStore{snowflaketest.NewMemory(), "proc-1"}, "", "proc-1"},
		{"its own", ownedStore{snowflaketest.NewMemory(), "proc-1"}, "gen-2", "gen-2"},
		{"a new one", ownedStore{snowflaketest.NewMemory(), ""}, "", ""},
		{"a store that names none", snowflaketest.NewMemory(), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLeased(t, tt.store, snowflake.LeasedConfig{Owner: tt.cfg, RenewInterval: -1,
				Generator: snowflake.Config{Clock: snowflaketest.NewClock(start)}})
			got := l.Owner()
			if tt.want == "" {
				if got == "" || got == "proc-1" {
					t.Fatalf("Owner() = %q, want a new owner name", got)
				}
				return
			}
			if got != tt.want {
				t.Fatalf("Owner() = %q, want %q", got, tt.want)
			}
		})
	}
}
