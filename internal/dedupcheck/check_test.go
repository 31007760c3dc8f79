package dedupcheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/dbtest"
)

// consumers is how many consumers run at once; a killed one is
// replaced at once.
const consumers = 4

// TestSQLite runs the check with the records and effects in a SQLite
// file that the consumer processes share.
func TestSQLite(t *testing.T) {
	skipShort(t)
	t.Parallel()
	run(t, "sqlite://"+filepath.Join(t.TempDir(), "dedup.db"))
}

// TestPostgres runs the check on PostgreSQL.
func TestPostgres(t *testing.T) {
	skipShort(t)
	t.Parallel()
	run(t, dbtest.Start(t, dbtest.Postgres).DSN)
}

// TestMariaDB runs the check on MariaDB, whose InnoDB may answer two
// inserts of one key in flight with a deadlock: the consumer rolls back
// and the message is claimed again.
func TestMariaDB(t *testing.T) {
	skipShort(t)
	t.Parallel()
	run(t, dbtest.Start(t, dbtest.MySQL).DSN)
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the dedup checker runs consumer processes for tens of seconds")
	}
}

// messages is the run's count of messages (IDGEN_DEDUPCHECK_MESSAGES):
// by default 10,000, and 2,000 under the race detector, where the
// consumers run several times slower (10,000 took 90 s on SQLite) and
// the run checks goroutines more than counts.
func messages(t *testing.T) int {
	v := os.Getenv("IDGEN_DEDUPCHECK_MESSAGES")
	if v == "" {
		if raceEnabled {
			return 2_000
		}
		return 10_000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("IDGEN_DEDUPCHECK_MESSAGES=%q: want a positive whole number", v)
	}
	return n
}

// run sends the messages, runs the consumers on the store dsn names
// while killing them, and verifies the effects.
func run(t *testing.T, dsn string) {
	ctx := context.Background()
	n := messages(t)
	noDedup := os.Getenv(envNoDedup) == "1"
	addr := dbtest.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })

	st, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// No unique key on msg_id: an effect committed twice must show.
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE effect (msg_id VARCHAR(64) NOT NULL, consumer VARCHAR(32) NOT NULL)`); err != nil {
		t.Fatal(err)
	}

	sent := make([]string, 0, n)
	for from := 0; from < n; from += 1000 {
		cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := from; i < min(from+1000, n); i++ {
				p.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"order", i}})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			sent = append(sent, c.(*redis.StringCmd).Val())
		}
	}
	if err := rdb.XGroupCreate(ctx, stream, group, "0").Err(); err != nil {
		t.Fatal(err)
	}

	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	f := newFleet(t, envRedis+"="+addr, envStore+"="+dsn, envNoDedup+"="+os.Getenv(envNoDedup))
	for range consumers {
		f.start()
	}
	start := time.Now()
	last := sent[len(sent)-1]
	// finished: every message delivered and acknowledged.
	finished := func() bool {
		p, err := rdb.XPending(ctx, stream, group).Result()
		if err != nil || p.Count > 0 {
			return false
		}
		gs, err := rdb.XInfoGroups(ctx, stream).Result()
		return err == nil && len(gs) == 1 && gs[0].LastDeliveredID == last
	}
	kills, ackedAtKill := 0, 0
	// The nemesis: a kill every 30–150 ms, at whatever point the victim
	// is, of a consumer that got to work, until the consumers are done;
	// but only after progress (progress acknowledgements since the last
	// kill), so that on a loaded machine, where a new consumer takes
	// longer to connect, kills do not outpace the work.
	progress := max(n/200, 1)
	gap := func() time.Duration { return time.Duration(30+rng.IntN(120)) * time.Millisecond }
	for !testtime.Until(gap(), 5*time.Millisecond, finished) {
		if time.Since(start) > 5*time.Minute {
			_, _, _, errs := f.counts()
			t.Fatalf("not done after 5 minutes; consumer errors: %v", first(errs, 10))
		}
		if acked := f.ackCount(); acked-ackedAtKill < progress {
			continue
		}
		if live := f.working(); len(live) > 0 {
			f.kill(live[rng.IntN(len(live))])
			kills, ackedAtKill = kills+1, f.ackCount()
			f.start()
		}
	}
	wall := time.Since(start)
	f.killAll()

	effects := map[string]int{}
	rows, err := st.DB().QueryContext(ctx, `SELECT msg_id, COUNT(*) FROM effect GROUP BY msg_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var c int
		if err := rows.Scan(&id, &c); err != nil {
			t.Fatal(err)
		}
		effects[id] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	r := Verify(sent, effects)
	started, skips, claimed, errs := f.counts()
	t.Logf("%d messages, %d consumers started, %d killed with SIGKILL, %d messages claimed from other consumers, "+
		"%d redeliveries skipped by dedup, %d consumer errors; %d processed twice, %d lost, %d unknown; %v",
		n, started, kills, claimed, skips, len(errs), len(r.Twice), len(r.Lost), len(r.Unknown), wall.Round(time.Millisecond))
	if len(errs) > 0 {
		t.Logf("consumer errors (retried by redelivery): %v", first(errs, 5))
	}
	if noDedup {
		if len(r.Twice) == 0 {
			t.Fatalf("without dedup, the run found no message processed twice: the kills missed the window, so the check proves nothing")
		}
		return
	}
	if !r.OK() {
		t.Fatalf("twice: %v; lost: %v; unknown: %v", first(r.Twice, 10), first(r.Lost, 10), first(r.Unknown, 10))
	}
	if kills < 10 {
		t.Errorf("only %d kills: too few to trust the run", kills)
	}
	var records int
	if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM idgen_dedup`).Scan(&records); err != nil || records != n {
		t.Errorf("dedup records: %d, %v; want %d", records, err, n)
	}
}

// first returns at most n of s, and how many more there are.
func first(s []string, n int) string {
	if len(s) <= n {
		return fmt.Sprint(s)
	}
	return fmt.Sprintf("%v and %d more", s[:n], len(s)-n)
}
