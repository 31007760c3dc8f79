// Command worker is lockcheck's worker: it takes one lock over and over
// through lock.Locker and, while it holds it, writes to a resource
// guarded by lock.Guard, printing every event as a JSON line
// (lockcheck.Event) on standard output. The test runs several, pauses,
// kills and restarts them, and checks what they printed against the
// resource's log.
//
// It does not look at its lease between writes: a pause can fall between
// any such look and the write, so only the guard stands between a lost
// holder and the resource, as in Kleppmann's scenario. It reports a loss
// when the lease says so (Lost) and when Release returns an error.
package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/idgen/idgen/internal/lockcheck"
	"github.com/idgen/idgen/lock"
	_ "github.com/idgen/idgen/store/mysql"
	_ "github.com/idgen/idgen/store/postgres"
	_ "github.com/idgen/idgen/store/sqlite"
)

type config struct {
	lockDSN, resourceDSN string
	name, worker         string
	ttl, gap, fenceTTL   time.Duration
	writes, holds        int
	noGuard, step        bool
}

func main() {
	var c config
	flag.StringVar(&c.lockDSN, "lock", "", "the lock store: a SQL store's DSN (postgres://, mysql://, sqlite://), redis://HOST:PORT[,HOST:PORT] or etcd://HOST:PORT[,…]")
	flag.StringVar(&c.resourceDSN, "resource", "", "the guarded resource: a PostgreSQL URL")
	flag.StringVar(&c.name, "name", "lockcheck", "the lock's name, also the guarded resource's")
	flag.StringVar(&c.worker, "worker", "", "this worker's name")
	flag.DurationVar(&c.ttl, "ttl", time.Second, "the lease's TTL")
	flag.DurationVar(&c.gap, "gap", 50*time.Millisecond, "time between two writes of a hold")
	flag.DurationVar(&c.fenceTTL, "fence-ttl", 2*time.Second, "the store fence's lease TTL")
	flag.IntVar(&c.writes, "writes", 3, "writes per hold")
	flag.IntVar(&c.holds, "holds", 0, "holds before exiting; 0: until SIGTERM")
	flag.BoolVar(&c.noGuard, "no-guard", false, "test only: write without the guard's check, to show the checker finds the violations")
	flag.BoolVar(&c.step, "step", false, "wait for a line on standard input before each write")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, c); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// out prints events, one JSON line each, from any goroutine.
type out struct {
	mu     sync.Mutex
	worker string
	owner  string
}

func (o *out) print(e lockcheck.Event) {
	e.Worker, e.Owner = o.worker, o.owner
	b, _ := json.Marshal(e)
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = os.Stdout.Write(append(b, '\n')) // a closed stdout: the test is gone
}

func run(ctx context.Context, c config) error {
	b, closeBackend, err := backend(ctx, c.lockDSN, c.fenceTTL)
	if err != nil {
		return err
	}
	defer func() { _ = closeBackend() }()
	locker, err := lock.New(b, lock.Options{MinTTL: 10 * time.Millisecond})
	if err != nil {
		return err
	}
	db, err := sql.Open("pgx", c.resourceDSN)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	guard, err := lock.NewGuard(lock.GuardConfig{Dialect: lock.Postgres})
	if err != nil {
		return err
	}
	o := &out{worker: c.worker, owner: c.worker + "-" + strconv.Itoa(os.Getpid())}
	o.print(lockcheck.Event{Kind: lockcheck.Start})
	w := &worker{c: c, o: o, locker: locker, db: db, guard: guard, stdin: bufio.NewScanner(os.Stdin)}
	for hold := 1; c.holds == 0 || hold <= c.holds; hold++ {
		if ctx.Err() != nil {
			return nil
		}
		w.hold(ctx, hold)
	}
	return nil
}

type worker struct {
	c      config
	o      *out
	locker *lock.Locker
	db     *sql.DB
	guard  *lock.Guard
	stdin  *bufio.Scanner
}

// hold acquires the lock, writes c.writes times and releases it.
func (w *worker) hold(ctx context.Context, hold int) {
	floor, err := w.top(ctx)
	if err != nil {
		w.o.print(lockcheck.Event{Kind: lockcheck.AcquireError, Hold: hold, Err: "read the log: " + err.Error()})
		w.backoff(ctx)
		return
	}
	w.o.print(lockcheck.Event{Kind: lockcheck.Acquiring, Hold: hold, Floor: floor})
	le, err := w.locker.Acquire(ctx, w.c.name, w.o.owner, w.c.ttl)
	if err != nil {
		w.o.print(lockcheck.Event{Kind: lockcheck.AcquireError, Hold: hold, Err: err.Error()})
		w.backoff(ctx)
		return
	}
	token := le.Token()
	w.o.print(lockcheck.Event{Kind: lockcheck.Granted, Hold: hold, Token: token})
	done := make(chan struct{})
	go func() {
		select {
		case <-le.Lost():
			w.o.print(lockcheck.Event{Kind: lockcheck.Lost, Hold: hold, Token: token, Err: errString(le.Err()), Reason: reason(le.Err())})
		case <-done:
		}
	}()
	for i := 0; i < w.c.writes && ctx.Err() == nil; i++ {
		if i > 0 {
			pause(ctx, w.c.gap) // the holder's work between two writes
		}
		if w.c.step && !w.stdin.Scan() {
			break
		}
		if stale := w.write(ctx, hold, token); stale {
			break
		}
	}
	floor, ferr := w.top(ctx)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.c.ttl)
	defer cancel()
	err = le.Release(rctx)
	close(done)
	switch {
	case err != nil:
		w.o.print(lockcheck.Event{Kind: lockcheck.ReleaseError, Hold: hold, Token: token, Err: err.Error(), Reason: reason(err)})
	case ferr != nil:
		// Released, but what the log held before is unknown: report it
		// as an error, which the verifier does not take for a silent loss.
		w.o.print(lockcheck.Event{Kind: lockcheck.ReleaseError, Hold: hold, Token: token, Err: "read the log: " + ferr.Error(), Reason: "other"})
	default:
		w.o.print(lockcheck.Event{Kind: lockcheck.Released, Hold: hold, Token: token, Floor: floor})
	}
}

// write appends one row to the log through the guard, in one
// transaction, and reports whether the guard refused the token.
func (w *worker) write(ctx context.Context, hold int, token int64) (stale bool) {
	id, err := w.commit(ctx, hold, token)
	switch {
	case errors.Is(err, lock.ErrStaleToken):
		w.o.print(lockcheck.Event{Kind: lockcheck.Stale, Hold: hold, Token: token, Err: err.Error()})
		return true
	case err != nil:
		w.o.print(lockcheck.Event{Kind: lockcheck.WriteError, Hold: hold, Token: token, Err: err.Error()})
		return false
	}
	w.o.print(lockcheck.Event{Kind: lockcheck.Wrote, Hold: hold, Token: token, ID: id})
	return false
}

func (w *worker) commit(ctx context.Context, hold int, token int64) (int64, error) {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }() // after Commit: sql.ErrTxDone
	if !w.c.noGuard {
		if err := w.guard.Check(ctx, tx, w.c.name, token); err != nil {
			return 0, err
		}
	}
	var id int64
	if err := tx.QueryRowContext(ctx, "INSERT INTO "+lockcheck.LogTable+" (worker, owner, hold, token) VALUES ($1, $2, $3, $4) RETURNING id",
		w.c.worker, w.o.owner, hold, token).Scan(&id); err != nil {
		return 0, err
	}
	return id, tx.Commit()
}

// top returns the highest token in the log.
func (w *worker) top(ctx context.Context) (int64, error) {
	var top int64
	err := w.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(token), 0) FROM "+lockcheck.LogTable).Scan(&top)
	return top, err
}

// backoff waits a little before the next attempt after an error.
func (w *worker) backoff(ctx context.Context) { pause(ctx, 50*time.Millisecond) }

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// reason classifies a lease's end.
func reason(err error) string {
	switch {
	case errors.Is(err, lock.ErrExpired):
		return "expired"
	case errors.Is(err, lock.ErrLost):
		return "lost"
	case errors.Is(err, lock.ErrNotHeld):
		return "not_held"
	default:
		return "other"
	}
}
