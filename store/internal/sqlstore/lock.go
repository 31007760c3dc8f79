package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/internal/plant"
)

// The lock backend (lock.Backend) over the tables of migration 00016.
//
// Clock: expiries are Unix milliseconds by the clock of the process
// that writes them, as worker leases' are (Leases): a fleet keeps its
// clocks within a small part of the shortest TTL, and the token, not
// the expiry, is what makes a late holder harmless (lock.Guard).
//
// A grant is one short transaction: the lock's row locked (SELECT …
// FOR UPDATE; SQLite's BEGIN IMMEDIATE) in the statement that also
// reads the store's identity and the fence record's generation and
// floor, which are checked (Guard: a store whose history changed is
// fenced before any token is minted; a process that knows no record
// yet, or sees a newer one, reads and checks the record first, as a
// reservation does); its waiters read under the same lock, only if
// the row's waiting flag (migration 00017) says some may wait; the
// row and its mark written, in one statement on PostgreSQL (WITH …
// INSERT) and on MySQL once the mark's row exists (UPDATE … JOIN).
// Uncontended, that is BEGIN, the locking read, one or two writes and
// COMMIT: on PostgreSQL 2 round trips, as BEGIN goes with the locking
// read and the grant with its COMMIT (pipelined, LastExecer; the
// checks run on the read's result before the grant is sent), 4 or 5
// on MySQL; a release is one UPDATE outside any transaction, which on
// PostgreSQL also sends the wake-up, only if someone waits. The token
// of a new grant is one above the largest of the row's token, the
// row's mark (idgen_lock_mark, written in every grant's transaction)
// and the fence record's floor: so after a failover or a restore of
// the whole store (the fence raised every token by its margin, and
// the floor with it), after a restore of the lock table alone (the
// mark is above the row), and for a name whose row a failover lost
// (the floor), every new token is above every token granted before. A
// process also remembers the tokens it was granted (for its last 4096
// names): a lock whose row and mark are both below one went back with
// the whole store while the server's identity did not show it
// (MariaDB without a binary log), and the store is fenced, as a tag's
// row below what the process reserved fences it.
//
// Waiting: a waiter queues in idgen_lock_waiter with a 2 s expiry,
// refreshed at a third of it while it waits; a free lock goes to the
// earliest live waiter; one whose row lapsed (its process died) is
// skipped from then on, whatever its place, so dead waiters cost their
// own TTL once, not a delay each. Waiters learn that a lock was freed:
//   - on PostgreSQL, from pg_notify, sent in the transaction that frees
//     it (or that a waiter leaves the queue in) and heard on one
//     listening connection per store (Conn.Listen), opened at the
//     store's first wait: a push. Until that connection listens, and
//     whenever it is lost, waiters poll as below. Measured hand-off to a
//     queued waiter (locktest's WaiterIsWoken, from the release call to
//     the grant, on 2 cores shared at a load average of 10): 3.5–5 ms,
//     p50 about 4 ms, PostgreSQL 15;
//   - on MySQL and SQLite, by polling: a read of the lock outside any
//     transaction (no row lock; no SQLite write lock), every 1 ms backing
//     off to 5 ms, and the grant's transaction only once the lock looks
//     free for this waiter, or a third of the waiter TTL has passed and
//     its row needs a refresh. Releases by the same Store wake its own
//     waiters at once. A push would need a listening connection MySQL
//     lacks, and SQLite has one process's worth of writers; the poll
//     costs a point read per waiter per 5 ms. Measured on the same
//     machine: SQLite 2.6–7.8 ms (p50 4–5 ms), MariaDB 10.11 6.7–25 ms
//     (p50 8.6–14 ms across runs: the poll's half-period is the least of
//     it; the release's and the grant's statements and their two
//     durable commits are most).
//
// Besides, a waiter tries again when the holder's grant or the waiter
// ahead of it would lapse, so a dead holder costs its TTL and no more.

// Waiting's timing.
const (
	// waiterTTL is how long a waiter's row stays live without a
	// refresh; it is refreshed at a third of it.
	waiterTTL = 2 * time.Second
	// pollMin and pollMax bound the poll of a waiter that hears no
	// notifications.
	pollMin = time.Millisecond
	pollMax = 5 * time.Millisecond
	// holdPoll is how often a waiter held back by a fence's hold asks
	// again: the hold ends as the other instances check in, each at its
	// presence renewal.
	holdPoll = 250 * time.Millisecond
	// notifyChannel is the PostgreSQL channel of lock releases; the
	// payload is the lock's name.
	notifyChannel = "idgen_lock"
)

// LockStatements are the lock tables' statements (migration 00016), as
// NewLockStatements renders them. Times are Unix milliseconds.
type LockStatements struct {
	// Select reads owner, token, granted_at, expires_at, waiting of a
	// lock and its mark (0 if none), locking the row. Args: name, name.
	Select string
	// Peek is Select without the lock. Args: name, name.
	Peek string
	// Create inserts a free row with token 0 unless one exists. Args:
	// name.
	Create string
	// Grant writes a grant. Args: owner, token, granted_at, expires_at,
	// waiting, name.
	Grant string
	// GrantMark is Grant and MarkSet in one statement, where the
	// dialect can write two tables in one (Spelling.WritingWith), ""
	// otherwise. Args: name, token, then Grant's.
	GrantMark string
	// GrantJoin is Grant and the update of an existing mark in one
	// statement, where the dialect updates two tables in one
	// (Spelling.UpdateJoin), "" otherwise; it changes nothing if the
	// mark's row is missing. Args: Grant's but the name, token, name.
	GrantJoin string
	// Waiting sets the row's waiting flag (migration 00017). Args: name.
	Waiting string
	// Extend sets the expiry of the row's grant. Args: expires_at, name.
	Extend string
	// MarkSet records the token of the last grant. Args: name, token.
	MarkSet string
	// Renew extends a grant if name, owner and token match, the grant
	// has not lapsed and the row is not below its mark. Args: expires_at,
	// name, owner, token, now, name.
	Renew string
	// Release frees the lock on the same conditions as Renew. Args:
	// name, owner, token, now, name.
	Release string
	// ReleaseNotify is Release that also sends Notify when the row's
	// waiting flag is set, and returns the flag, one row if it freed the
	// lock; "" where the dialect has no Notify or cannot write it so.
	// Args: Release's.
	ReleaseNotify string
	// Waiters reads owner, arrived_at, expires_at of every waiter of a
	// lock in arrival order, live or not, under a lock. Args: name.
	Waiters string
	// LiveWaiters reads owner, arrived_at of the live waiters in
	// arrival order, without locks. Args: name, now.
	LiveWaiters string
	// WaiterAdd queues a waiter. Args: name, owner, arrived_at,
	// expires_at.
	WaiterAdd string
	// WaiterRefresh sets a waiter's expiry. Args: expires_at, name,
	// owner.
	WaiterRefresh string
	// WaiterDelete removes a waiter. Args: name, owner.
	WaiterDelete string
	// WaiterDone removes a granted waiter and the lock's lapsed ones.
	// Args: name, owner, now.
	WaiterDone string
	// Notify is Spelling.Notify, "" for none. Args: name.
	Notify string
}

// lockMark is a lock's mark in a statement on idgen_lock.
const lockMark = `COALESCE((SELECT m.token FROM idgen_lock_mark m WHERE m.name = ?), 0)`

// The lock statements' shared parts: Select's columns and where they
// end (the guarded select puts the server's identity and the fence
// record's generation and floor there, see NewLocks), the grant, and
// the release.
const (
	lockSelect  = `SELECT owner, token, granted_at, expires_at, waiting, `
	lockFrom    = ` FROM idgen_lock WHERE name = `
	lockFence   = `COALESCE((SELECT generation FROM idgen_fence WHERE id = 1), 0), COALESCE((SELECT tag_floor FROM idgen_fence WHERE id = 1), 0)`
	lockGrant   = `UPDATE idgen_lock SET owner = ?, token = ?, granted_at = ?, expires_at = ?, waiting = ? WHERE name = ?`
	lockRelease = `UPDATE idgen_lock SET owner = '', expires_at = 0 WHERE name = ? AND owner = ? AND token = ? AND expires_at > ?
		AND token >= ` + lockMark
)

// NewLockStatements renders the lock statements for sp.
func NewLockStatements(sp Spelling) (LockStatements, error) {
	r := renderer{sp: sp, t: IDSequence}
	s := LockStatements{
		Select:  r.sql(lockSelect + lockMark + ` FROM idgen_lock WHERE name = ?{{.ForUpdate}}`),
		Peek:    r.sql(lockSelect + lockMark + ` FROM idgen_lock WHERE name = ?`),
		Create:  r.sql(`{{ins}} INTO idgen_lock (name, owner, token, granted_at, expires_at) VALUES (?, '', 0, 0, 0){{conflict "name"}}`),
		Grant:   r.sql(lockGrant),
		Waiting: r.sql(`UPDATE idgen_lock SET waiting = 1 WHERE name = ? AND waiting = 0`),
		Extend:  r.sql(`UPDATE idgen_lock SET expires_at = ? WHERE name = ?`),
		MarkSet: r.sql(`INSERT INTO idgen_lock_mark (name, token) VALUES (?, ?){{upsert "name" "token"}}`),
		Renew: r.sql(`UPDATE idgen_lock SET expires_at = ? WHERE name = ? AND owner = ? AND token = ? AND expires_at > ?
		AND token >= ` + lockMark),
		Release:       r.sql(lockRelease),
		Waiters:       r.sql(`SELECT owner, arrived_at, expires_at FROM idgen_lock_waiter WHERE name = ? ORDER BY arrived_at, owner{{.ForUpdate}}`),
		LiveWaiters:   r.sql(`SELECT owner, arrived_at FROM idgen_lock_waiter WHERE name = ? AND expires_at > ? ORDER BY arrived_at, owner`),
		WaiterAdd:     r.sql(`INSERT INTO idgen_lock_waiter (name, owner, arrived_at, expires_at) VALUES (?, ?, ?, ?)`),
		WaiterRefresh: r.sql(`UPDATE idgen_lock_waiter SET expires_at = ? WHERE name = ? AND owner = ?`),
		WaiterDelete:  r.sql(`DELETE FROM idgen_lock_waiter WHERE name = ? AND owner = ?`),
		WaiterDone:    r.sql(`DELETE FROM idgen_lock_waiter WHERE name = ? AND (owner = ? OR expires_at <= ?)`),
	}
	if sp.Notify != "" {
		s.Notify = r.sql(sp.Notify)
	}
	if sp.UpdateJoin {
		s.GrantJoin = r.sql(`UPDATE idgen_lock l JOIN idgen_lock_mark m ON m.name = l.name
		SET l.owner = ?, l.token = ?, l.granted_at = ?, l.expires_at = ?, l.waiting = ?, m.token = ? WHERE l.name = ?`)
	}
	if sp.WritingWith {
		s.GrantMark = r.sql(`WITH m AS (INSERT INTO idgen_lock_mark (name, token) VALUES (?, ?){{upsert "name" "token"}}) ` + lockGrant)
		if sp.Notify != "" {
			// The scalar subquery runs only in the CASE's branch: a
			// wake-up goes out only when someone waits.
			s.ReleaseNotify = r.sql(`WITH u AS (` + lockRelease + ` RETURNING name, waiting)
			SELECT u.waiting, CASE WHEN u.waiting <> 0 THEN (SELECT 1 FROM (` + strings.Replace(sp.Notify, "?", "u.name", 1) + `) n) END FROM u`)
		}
	}
	return s, r.err
}

// Locks is lock.Backend over a store's lock tables. It is safe for
// concurrent use; Close stops its listener.
type Locks struct {
	retryHook
	db DB
	d  Dialect
	s  LockStatements
	g  *Guard
	// guarded is s.Select with the server's identity, the fence
	// record's generation and its floor read beside the row, when g is
	// set: a grant's identity check in the row's own statement, as a
	// reservation's (Store.lockRow).
	guarded string
	listen  func(ctx context.Context, channel string) (Listener, error)

	// hw remembers the highest token this process was granted per lock
	// name (fence.HighWater.Granted): the Guard's, whose witness raise
	// after a fence raises each lock's mark to it, or the Locks' own on a
	// store without fencing. A lock found below it (its row and its mark)
	// went back with the whole store, although the server's identity may
	// not show it (as a tag's row below what the process reserved).
	hw *fence.HighWater

	mu      sync.Mutex
	wake    map[string]map[chan struct{}]struct{} // this store's waiters, by lock name
	pushing bool                                  // the listener is listening
	stop    context.CancelFunc                    // ends the listener; nil until it starts
	done    chan struct{}                         // closed when the listener has ended
	closed  bool
}

var _ lock.Backend = (*Locks)(nil)

// NewLocks returns the lock backend on db, whose tokens g's fences
// raise (nil: a store without fencing), and whose waiters hear releases
// through listen (nil: they poll).
func NewLocks(db DB, d Dialect, s LockStatements, g *Guard, listen func(ctx context.Context, channel string) (Listener, error)) *Locks {
	l := &Locks{db: db, d: d, s: s, g: g, listen: listen, hw: &fence.HighWater{}, wake: map[string]map[chan struct{}]struct{}{}}
	if g != nil {
		l.hw = g.hw
	}
	if i := strings.Index(s.Select, lockFrom); g != nil && i >= 0 {
		l.guarded = s.Select[:i] + ", " + g.id.Server + ", " + lockFence + s.Select[i:]
	}
	return l
}

// wentBack returns the evidence that name's lock went back below a token
// this process was granted, with its mark (a restore of the whole store
// whose identity does not show it): the store fences, unless by then,
// under the fence's lock, another fence raised the lock above it. Nil
// if it did not, or on a store without fencing.
func (l *Locks) wentBack(name string, rw row) error {
	mine := l.hw.Token(name)
	if l.g == nil || max(rw.token, rw.mark) >= mine {
		return nil
	}
	reason := fmt.Sprintf("lock %q's token %d and mark %d are below %d, a token this process was granted: the store went back", name, rw.token, rw.mark, mine)
	return &errFence{d: fence.Decision{Verdict: fence.Fence, Reason: reason}, force: true,
		still: func(ctx context.Context, q Querier) (bool, error) {
			now := row{exists: true}
			err := q.QueryRow(ctx, l.s.Select, name, name).Scan(now.dest()...)
			if errors.Is(err, l.d.NoRows) {
				return true, nil
			}
			return err == nil && max(now.token, now.mark) < mine, err
		}}
}

// row is a lock's row as a statement reads it.
type row struct {
	owner                                  string
	token, granted, expires, waiting, mark int64
	exists                                 bool
}

func (r *row) dest() []any {
	return []any{&r.owner, &r.token, &r.granted, &r.expires, &r.waiting, &r.mark}
}

// holder returns the live grant the row holds at now, if any. A row
// below its mark went back (the lock table restored alone): the holder
// it shows is not the lock's last grant, and holds nothing.
func (r row) holder(name string, now int64) (lock.Grant, bool) {
	if !r.exists || r.owner == "" || r.expires <= now || r.token < r.mark {
		return lock.Grant{}, false
	}
	return lock.Grant{Name: name, Owner: r.owner, Token: r.token, Expires: time.UnixMilli(r.expires)}, true
}

// waiterRow is a queued waiter.
type waiterRow struct {
	owner            string
	arrived, expires int64
}

// outcome is what one attempt found when it did not grant: the error to
// return (a *lock.HeldError), and when the lock could be free for the
// caller without anyone telling: the holder's or the waiter ahead's
// expiry, Unix milliseconds.
type outcome struct {
	held    *lock.HeldError
	retryAt int64
}

// Acquire implements lock.Backend. A TryAcquire (wait false) of a free
// lock for which others wait returns a *lock.HeldError whose Holder is
// the first live waiter, the one the lock is promised to, with token 0
// (no grant holds the lock) and the expiry of that waiter's row (it is
// skipped unless it refreshes it).
func (l *Locks) Acquire(ctx context.Context, name, owner string, ttl time.Duration, wait bool) (lock.Grant, error) {
	if !wait {
		g, out, err := l.attempt(ctx, name, owner, ttl, false, false)
		if err != nil {
			return lock.Grant{}, err
		}
		if out.held != nil {
			return lock.Grant{}, out.held
		}
		return g, nil
	}
	ch, unsubscribe := l.subscribe(name)
	defer unsubscribe()
	var (
		last      *lock.HeldError
		refreshed time.Time
		peek      bool // a poll: read before running the transaction
		queued    bool // an attempt queued owner as a waiter
	)
	poll := pollMin
	for {
		var (
			g   lock.Grant
			out outcome
			err error
		)
		if peek && time.Since(refreshed) < waiterTTL/3 && !l.mayBeFree(ctx, name, owner) {
			out.held = last
		} else {
			refreshed = time.Now()
			g, out, err = l.attempt(ctx, name, owner, ttl, true, queued)
			queued = queued || (err == nil && out.held != nil)
		}
		held := errors.Is(err, ErrHeld)
		switch {
		case err != nil && !held:
			l.leave(ctx, name, owner)
			if ctx.Err() != nil && last != nil {
				return lock.Grant{}, last
			}
			return lock.Grant{}, err
		case err == nil && out.held == nil:
			return g, nil
		case held: // a fence's hold: wait it out, asking again at holdPoll
		default:
			last = out.held
		}
		next := waiterTTL/3 - time.Since(refreshed)
		if out.retryAt > 0 {
			next = min(next, time.Until(time.UnixMilli(out.retryAt))+time.Millisecond)
		}
		pushed := l.push()
		switch {
		case held:
			next = holdPoll
		case !pushed:
			next = min(next, poll)
			poll = min(2*poll, pollMax)
		}
		timer := time.NewTimer(max(next, 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			l.leave(ctx, name, owner)
			if last == nil { // held by a fence throughout
				return lock.Grant{}, fmt.Errorf("store: lock %q: %w (%w)", name, ErrHeld, context.Cause(ctx))
			}
			return lock.Grant{}, last
		case <-ch:
			poll, peek = pollMin, false
		case <-timer.C:
			peek = !pushed && !held
		}
		timer.Stop()
	}
}

// mayBeFree reports whether a read outside any transaction finds name
// free for owner: not held, and owner first among its live waiters. A
// failed read says yes, so that the transaction reports the error.
func (l *Locks) mayBeFree(ctx context.Context, name, owner string) bool {
	info, err := l.Describe(ctx, name)
	if err != nil {
		return true
	}
	return (info.Holder == nil || info.Holder.Owner == owner) && (len(info.Waiters) == 0 || info.Waiters[0].Owner == owner)
}

// attempt is one grant transaction: it grants name to owner, or finds
// who holds it and, if queue, queues (or keeps) owner as a waiter.
// queued says an earlier attempt of the same wait queued owner: its
// attempts read the waiters whatever the row's flag says (a flag that
// went back with the lock table alone must not hide owner's own row).
func (l *Locks) attempt(ctx context.Context, name, owner string, ttl time.Duration, queue, queued bool) (lock.Grant, outcome, error) {
	var g lock.Grant
	var out outcome
	err := retry(ctx, l.d, &l.retryHook, "lock", func() error {
		return l.g.run(ctx, func(snap fence.Memory) (*reading, error) {
			// As a reservation (Store.advance): a record newer than snap,
			// seen in the row's statement, runs the transaction again
			// with the record read and checked first.
			full := false
			for restarts := 0; ; restarts++ {
				var r *reading
				err := l.db.InTx(ctx, func(q Querier) error {
					var (
						rw    row
						floor int64
						err   error
					)
					if rw, floor, r, err = l.lockChecked(ctx, q, name, snap, full); err != nil {
						return err
					}
					g, out, err = l.grantTx(ctx, q, name, owner, ttl, queue, queued, rw, floor)
					return err
				})
				if !errors.Is(err, errNewRecord) || restarts == maxFences {
					return r, err
				}
				full = true
			}
		})
	})
	if err != nil {
		return lock.Grant{}, outcome{}, fmt.Errorf("store: lock %q: %w", name, err)
	}
	if out.held == nil {
		l.hw.Granted(name, g.Token)
	}
	return g, out, nil
}

// lockChecked locks name's row (lockRow) and checks the store's
// identity (Guard), returning the row, the fence record's floor and the
// reading for Guard.run. Unless full is set or snap knows nothing yet,
// the server's identity and the record's generation and floor are read
// in the row's own statement and checked against snap; otherwise the
// record is read and checked first (Guard.read).
func (l *Locks) lockChecked(ctx context.Context, q Querier, name string, snap fence.Memory, full bool) (row, int64, *reading, error) {
	var floor int64
	switch {
	case l.g == nil:
		rw, err := l.lockRow(ctx, q, name, l.s.Select, nil, &floor)
		return rw, floor, nil, err
	case l.guarded == "" || full || !snap.Known || !l.g.paramsRead.Load():
		r, err := l.g.read(ctx, q, snap)
		if err != nil {
			return row{}, 0, nil, err
		}
		floor = r.rec.Floor
		rw, err := l.lockRow(ctx, q, name, l.s.Select, nil, &floor)
		return rw, floor, r, err
	}
	r := l.g.newReading()
	r.fromMemory(snap)
	var gen int64
	rw, err := l.lockRow(ctx, q, name, l.guarded, append(r.serverDest(), &gen, &floor), &floor)
	if err == nil && gen != snap.Generation {
		err = errNewRecord // a fence committed since snap
	}
	if err == nil {
		err = l.g.connSystem(ctx, q, r)
	}
	if err == nil {
		err = l.g.check(ctx, q, snap, r)
	}
	return rw, floor, r, err
}

// grantTx is attempt's transaction after the row's lock and the identity
// check; floor is the fence record's floor.
func (l *Locks) grantTx(ctx context.Context, q Querier, name, owner string, ttl time.Duration, queue, queued bool, rw row, floor int64) (lock.Grant, outcome, error) {
	now := time.Now().UnixMilli()
	if err := l.wentBack(name, rw); err != nil {
		return lock.Grant{}, outcome{}, err
	}
	// The waiters are read only when some may wait: the row's flag is
	// set in every transaction that queues one, under the row's lock.
	readWaiters := rw.waiting != 0 || queued
	expires := now + ttl.Milliseconds()
	if h, ok := rw.holder(name, now); ok && h.Owner == owner {
		// Reentrant: the same grant, a TTL from now. Waiters stay queued.
		h.Expires = time.UnixMilli(expires)
		if !readWaiters {
			if _, err := lastExec(q)(ctx, l.s.Extend, expires, name); err != nil {
				return lock.Grant{}, outcome{}, err
			}
			return h, outcome{}, nil
		}
		if _, err := q.Exec(ctx, l.s.Extend, expires, name); err != nil {
			return lock.Grant{}, outcome{}, err
		}
		_, err := q.Exec(ctx, l.s.WaiterDelete, name, owner)
		return h, outcome{}, err
	}
	var waiters []waiterRow
	if readWaiters {
		var err error
		if waiters, err = l.waiters(ctx, q, name); err != nil {
			return lock.Grant{}, outcome{}, err
		}
	}
	var head *waiterRow
	var mine *waiterRow
	var lastArrived int64
	var behind int64 // 1 if a live waiter other than owner stays queued
	for i := range waiters {
		w := &waiters[i]
		lastArrived = max(lastArrived, w.arrived)
		if w.owner == owner && w.expires > now {
			mine = w
		}
		if head == nil && w.expires > now {
			head = w
		}
		if w.owner != owner && w.expires > now {
			behind = 1
		}
	}
	if h, ok := rw.holder(name, now); ok || (head != nil && head.owner != owner) {
		var out outcome
		if ok {
			out = outcome{held: &lock.HeldError{Holder: h}, retryAt: h.Expires.UnixMilli()}
		} else {
			out = outcome{held: &lock.HeldError{Holder: lock.Grant{Name: name, Owner: head.owner, Expires: time.UnixMilli(head.expires)}}, retryAt: head.expires}
		}
		var err error
		if queue {
			err = l.enqueue(ctx, q, name, owner, mine != nil, rw.waiting != 0, lastArrived, now)
		}
		return lock.Grant{}, out, err
	}
	// After a fence no token is minted until every other live instance
	// has checked in, its witness raise having moved the marks of the
	// locks it was granted (fence.Witness), or the hold has ended, as no
	// range is reserved: a grant lost together with a fence's record
	// (two chained failovers) is not granted again while its holder
	// lives.
	if err := l.g.held(ctx, q); err != nil && !plant.On("L1") {
		return lock.Grant{}, outcome{}, err
	}
	// Without fencing, this process's own memory still keeps its own
	// grants' tokens from repeating.
	base := max(rw.token, rw.mark, floor, l.hw.Token(name))
	if base == math.MaxInt64 {
		return lock.Grant{}, outcome{}, fmt.Errorf("lock %q: its token is at the int64 limit", name)
	}
	g := lock.Grant{Name: name, Owner: owner, Token: base + 1, Expires: time.UnixMilli(expires)}
	var joined int64
	if l.s.GrantJoin != "" && rw.mark > 0 {
		var err error
		if joined, err = q.Exec(ctx, l.s.GrantJoin, owner, g.Token, now, expires, behind, g.Token, name); err != nil {
			return lock.Grant{}, outcome{}, fmt.Errorf("grant and record the lock's mark (migrations 00016, 00017): %w", err)
		}
	}
	switch {
	case joined > 0:
	case l.s.GrantMark != "":
		// With no waiters to remove it is the transaction's last
		// statement: on PostgreSQL its COMMIT goes with it. Every check
		// above ran on what the locking read returned, before any token
		// is written.
		exec := q.Exec
		if len(waiters) == 0 {
			exec = lastExec(q)
		}
		if _, err := exec(ctx, l.s.GrantMark, name, g.Token, owner, g.Token, now, expires, behind, name); err != nil {
			return lock.Grant{}, outcome{}, fmt.Errorf("grant and record the lock's mark (migrations 00016, 00017): %w", err)
		}
	default:
		if _, err := q.Exec(ctx, l.s.Grant, owner, g.Token, now, expires, behind, name); err != nil {
			return lock.Grant{}, outcome{}, err
		}
		if _, err := q.Exec(ctx, l.s.MarkSet, name, g.Token); err != nil {
			return lock.Grant{}, outcome{}, fmt.Errorf("record the lock's mark (migration 00016): %w", err)
		}
	}
	if len(waiters) > 0 {
		if _, err := q.Exec(ctx, l.s.WaiterDone, name, owner, now); err != nil {
			return lock.Grant{}, outcome{}, err
		}
	}
	return g, outcome{}, nil
}

// lockRow reads name's row under its lock, creating it first if it is
// missing. A creation takes the fence record's lock first, as a tag's
// does (Store.start), and reads the floor under it into *floor: a fence
// cannot commit between the read and the insert, so the new row is
// either there for the fence to raise, or starts above the floor the
// fence wrote, which is above every token of a row the store lost.
//
// stmt is Select or Locks.guarded, whose extra columns go to extra.
func (l *Locks) lockRow(ctx context.Context, q Querier, name, stmt string, extra []any, floor *int64) (row, error) {
	rw := row{exists: true}
	dest := append(rw.dest(), extra...)
	err := q.QueryRow(ctx, stmt, name, name).Scan(dest...)
	if err == nil || !errors.Is(err, l.d.NoRows) {
		return rw, err
	}
	if l.d.Identity != nil {
		if _, err := q.Exec(ctx, l.d.Identity.Create); err != nil {
			return row{}, fmt.Errorf("lock idgen_fence for the lock's creation: %w", err)
		}
		if err := q.QueryRow(ctx, l.d.Identity.TagFloor).Scan(floor); err != nil {
			return row{}, fmt.Errorf("read the floor: %w", err)
		}
	}
	if _, err := q.Exec(ctx, l.s.Create, name); err != nil {
		return row{}, fmt.Errorf("create the lock's row (is migration 00016 applied?): %w", err)
	}
	err = q.QueryRow(ctx, stmt, name, name).Scan(dest...)
	return rw, err
}

// waiters reads every waiter row of name, in arrival order.
func (l *Locks) waiters(ctx context.Context, q Querier, name string) ([]waiterRow, error) {
	rows, err := q.Query(ctx, l.s.Waiters, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []waiterRow
	for rows.Next() {
		var w waiterRow
		if err := rows.Scan(&w.owner, &w.arrived, &w.expires); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// enqueue refreshes owner's live waiter row, or queues it anew behind
// every waiter: a waiter whose row lapsed lost its place. Arrival times
// are made strictly increasing per name (under the lock's row lock), so
// that they order waiters that queued within one millisecond.
//
// flagged says the row's waiting flag is set; if not, enqueue sets it.
func (l *Locks) enqueue(ctx context.Context, q Querier, name, owner string, live, flagged bool, lastArrived, now int64) error {
	if !flagged {
		if _, err := q.Exec(ctx, l.s.Waiting, name); err != nil {
			return fmt.Errorf("flag the lock's waiters (is migration 00017 applied?): %w", err)
		}
	}
	expires := now + waiterTTL.Milliseconds()
	if live {
		_, err := q.Exec(ctx, l.s.WaiterRefresh, expires, name, owner)
		return err
	}
	if _, err := q.Exec(ctx, l.s.WaiterDelete, name, owner); err != nil {
		return err
	}
	_, err := q.Exec(ctx, l.s.WaiterAdd, name, owner, max(now, lastArrived+1), expires)
	return err
}

// leave removes owner's waiter row after a wait that ended without a
// grant, best effort (a row left behind lapses with its TTL), and wakes
// the waiters behind it.
func (l *Locks) leave(ctx context.Context, name, owner string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	err := l.db.InTx(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, l.s.WaiterDelete, name, owner); err != nil {
			return err
		}
		return l.notify(ctx, q, name)
	})
	if err == nil {
		l.wakeLocal(name)
	}
}

// notify wakes the waiters on other connections once q commits.
func (l *Locks) notify(ctx context.Context, q Querier, name string) error {
	if l.s.Notify == "" {
		return nil
	}
	_, err := q.Exec(ctx, l.s.Notify, name)
	return err
}

// Renew implements lock.Backend.
func (l *Locks) Renew(ctx context.Context, g lock.Grant, ttl time.Duration) (lock.Grant, error) {
	now := time.Now().UnixMilli()
	expires := now + ttl.Milliseconds()
	n, err := l.db.Exec(ctx, l.s.Renew, expires, g.Name, g.Owner, g.Token, now, g.Name)
	if err != nil {
		return lock.Grant{}, fmt.Errorf("store: renew lock %q: %w", g.Name, err)
	}
	if n == 0 {
		return lock.Grant{}, fmt.Errorf("%w: %q is no longer held by %q with token %d", lock.ErrLost, g.Name, g.Owner, g.Token)
	}
	g.Expires = time.UnixMilli(expires)
	return g, nil
}

// Release implements lock.Backend. A grant that lapsed is not held,
// whether or not another was made since: ErrNotHeld.
func (l *Locks) Release(ctx context.Context, g lock.Grant) error {
	var n int64
	err := retry(ctx, l.d, &l.retryHook, "unlock", func() error {
		now := time.Now().UnixMilli()
		switch {
		case l.s.ReleaseNotify != "":
			// One statement: the wake-up, if anyone waits, goes out with
			// the release's commit.
			var waiting int64
			var sent *int64
			err := l.db.QueryRow(ctx, l.s.ReleaseNotify, g.Name, g.Owner, g.Token, now, g.Name).Scan(&waiting, &sent)
			n = 1
			if errors.Is(err, l.d.NoRows) {
				n, err = 0, nil
			}
			return err
		case l.s.Notify != "":
			return l.db.InTx(ctx, func(q Querier) error {
				var err error
				if n, err = q.Exec(ctx, l.s.Release, g.Name, g.Owner, g.Token, now, g.Name); err != nil || n == 0 {
					return err
				}
				return l.notify(ctx, q, g.Name)
			})
		default:
			// No one to tell but this store's own waiters (wakeLocal):
			// one statement, outside any transaction.
			var err error
			n, err = l.db.Exec(ctx, l.s.Release, g.Name, g.Owner, g.Token, now, g.Name)
			return err
		}
	})
	if err != nil {
		return fmt.Errorf("store: release lock %q: %w", g.Name, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q with token %d by %q", lock.ErrNotHeld, g.Name, g.Token, g.Owner)
	}
	l.wakeLocal(g.Name)
	return nil
}

// Describe implements lock.Backend: the live holder, when it was
// granted, and the live waiters in arrival order.
func (l *Locks) Describe(ctx context.Context, name string) (lock.Info, error) {
	now := time.Now().UnixMilli()
	info := lock.Info{Name: name}
	rw := row{exists: true}
	err := l.db.QueryRow(ctx, l.s.Peek, name, name).Scan(rw.dest()...)
	switch {
	case errors.Is(err, l.d.NoRows):
		return info, nil // never taken: no waiter either, since waiting creates the row
	case err != nil:
		return lock.Info{}, fmt.Errorf("store: describe lock %q: %w", name, err)
	}
	if h, ok := rw.holder(name, now); ok {
		info.Holder, info.Since = &h, time.UnixMilli(rw.granted)
	}
	rows, err := l.db.Query(ctx, l.s.LiveWaiters, name, now)
	if err != nil {
		return lock.Info{}, fmt.Errorf("store: describe lock %q: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var w lock.Waiter
		var arrived int64
		if err := rows.Scan(&w.Owner, &arrived); err != nil {
			return lock.Info{}, err
		}
		w.Since = time.UnixMilli(arrived)
		info.Waiters = append(info.Waiters, w)
	}
	if err := rows.Err(); err != nil {
		return lock.Info{}, fmt.Errorf("store: describe lock %q: %w", name, err)
	}
	return info, nil
}

// subscribe registers a waiter of this store for name's wake-ups, and
// starts the listener if the store has one and it has not started.
func (l *Locks) subscribe(name string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wake[name] == nil {
		l.wake[name] = map[chan struct{}]struct{}{}
	}
	l.wake[name][ch] = struct{}{}
	if l.listen != nil && l.stop == nil && !l.closed {
		ctx, stop := context.WithCancel(context.Background())
		l.stop, l.done = stop, make(chan struct{})
		go l.listenLoop(ctx)
	}
	return ch, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.wake[name], ch)
		if len(l.wake[name]) == 0 {
			delete(l.wake, name)
		}
	}
}

// wakeLocal wakes this store's waiters for name.
func (l *Locks) wakeLocal(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.wake[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// wakeAll wakes every waiter of this store: the listener connected, and
// may have missed releases while it was not.
func (l *Locks) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, chans := range l.wake {
		for ch := range chans {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// push reports whether waiters are told of releases by the listener,
// and need not poll.
func (l *Locks) push() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pushing
}

func (l *Locks) setPushing(on bool) {
	l.mu.Lock()
	l.pushing = on
	l.mu.Unlock()
}

// listenLoop keeps one listening connection until ctx ends, reconnecting
// after a loss with a backoff (also after a connection that is dropped
// as soon as it listens); meanwhile waiters poll.
func (l *Locks) listenLoop(ctx context.Context) {
	defer close(l.done)
	delay := 10 * time.Millisecond
	for ctx.Err() == nil {
		if lis, err := l.listen(ctx, notifyChannel); err == nil {
			began := time.Now()
			l.setPushing(true)
			l.wakeAll()
			for {
				name, err := lis.Next(ctx)
				if err != nil {
					break
				}
				l.wakeLocal(name)
			}
			l.setPushing(false)
			_ = lis.Close()
			if time.Since(began) > time.Minute {
				delay = 10 * time.Millisecond
			}
		}
		_ = sleep(ctx, delay)
		delay = min(2*delay, 5*time.Second)
	}
}

// Close stops the listener. Waits in flight go on by polling until the
// store's pool is closed under them.
func (l *Locks) Close() {
	l.mu.Lock()
	l.closed = true
	stop, done := l.stop, l.done
	l.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}
