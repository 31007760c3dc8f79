package idempotency

import (
	"context"
	"sync"
	"time"
)

// Record is one key's row: a placeholder while Status is 0, the answer
// to replay once the winner completed it.
type Record struct {
	// Scope is the caller the key belongs to: a digest of its token,
	// never the token, or AnonymousScope.
	Scope string
	// Key is the caller's idempotency key.
	Key string
	// Fingerprint identifies the request (see Fingerprint).
	Fingerprint string
	// Owner is a random token of the request that holds the row; the
	// compare-and-sets of Complete, TakeOver and Delete name it.
	Owner string
	// Status is the recorded HTTP status, 0 while in flight.
	Status int
	// ContentType and Body are the recorded answer.
	ContentType string
	Body        []byte
	// LockedUntil is when an in-flight row may be taken over.
	LockedUntil time.Time
	// ExpiresAt is when the key stops counting: sweeps delete the row,
	// and a request with the key is a first request again.
	ExpiresAt time.Time
}

// Store keeps the rows. Every method is one atomic statement; the
// protocol's safety rests on Insert being insert-if-absent and the
// others being compare-and-sets on Owner.
type Store interface {
	// Insert adds r unless a row with its scope and key exists, and
	// reports whether it did.
	Insert(ctx context.Context, r Record) (bool, error)
	// Get returns the row of scope and key, and whether there is one.
	Get(ctx context.Context, scope, key string) (Record, bool, error)
	// TakeOver replaces the row of r's scope and key with r if its
	// owner is prevOwner and it is expired at now or in flight with its
	// lock expired at now, and reports whether it did.
	TakeOver(ctx context.Context, r Record, prevOwner string, now time.Time) (bool, error)
	// Complete records the answer on the in-flight row of scope and key
	// if owner still holds it, and reports whether it did.
	Complete(ctx context.Context, scope, key, owner string, status int, contentType string, body []byte) (bool, error)
	// Renew moves the lock of the in-flight row of scope and key to
	// lockedUntil if owner still holds it, and reports whether it did:
	// false means the row was taken over, completed or deleted.
	Renew(ctx context.Context, scope, key, owner string, lockedUntil time.Time) (bool, error)
	// Delete removes the in-flight row of scope and key if owner holds it.
	Delete(ctx context.Context, scope, key, owner string) error
	// Sweep deletes up to limit rows expired at now and returns how many.
	Sweep(ctx context.Context, now time.Time, limit int) (int, error)
	// Count returns the number of rows not expired at now, by scope.
	Count(ctx context.Context, now time.Time) (map[string]int64, error)
	// CountScope returns the number of rows of scope not expired at now.
	CountScope(ctx context.Context, scope string, now time.Time) (int64, error)
	// CountExpired returns the number of rows expired at now, all
	// scopes: the backlog of the sweeps.
	CountExpired(ctx context.Context, now time.Time) (int64, error)
}

// Memory is a Store in a map, for tests and for a single process whose
// keys need not survive a restart. It takes every time from its caller,
// so a Keeper with a fake clock drives its expiry.
type Memory struct {
	mu   sync.Mutex
	rows map[[2]string]Record
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{rows: map[[2]string]Record{}} }

var _ Store = (*Memory)(nil)

// Insert implements Store.
func (m *Memory) Insert(_ context.Context, r Record) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := [2]string{r.Scope, r.Key}
	if _, ok := m.rows[id]; ok {
		return false, nil
	}
	m.rows[id] = clone(r)
	return true, nil
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, scope, key string) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.rows[[2]string{scope, key}]
	return clone(r), ok, nil
}

// TakeOver implements Store.
func (m *Memory) TakeOver(_ context.Context, r Record, prevOwner string, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := [2]string{r.Scope, r.Key}
	cur, ok := m.rows[id]
	if !ok || cur.Owner != prevOwner || !takeable(cur, now) {
		return false, nil
	}
	m.rows[id] = clone(r)
	return true, nil
}

// Complete implements Store.
func (m *Memory) Complete(_ context.Context, scope, key, owner string, status int, contentType string, body []byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := [2]string{scope, key}
	cur, ok := m.rows[id]
	if !ok || cur.Owner != owner || cur.Status != 0 {
		return false, nil
	}
	cur.Status, cur.ContentType, cur.Body = status, contentType, append([]byte(nil), body...)
	m.rows[id] = cur
	return true, nil
}

// Renew implements Store.
func (m *Memory) Renew(_ context.Context, scope, key, owner string, lockedUntil time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := [2]string{scope, key}
	cur, ok := m.rows[id]
	if !ok || cur.Owner != owner || cur.Status != 0 {
		return false, nil
	}
	cur.LockedUntil = lockedUntil
	m.rows[id] = cur
	return true, nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, scope, key, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := [2]string{scope, key}
	if cur, ok := m.rows[id]; ok && cur.Owner == owner && cur.Status == 0 {
		delete(m.rows, id)
	}
	return nil
}

// Sweep implements Store.
func (m *Memory) Sweep(_ context.Context, now time.Time, limit int) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, r := range m.rows {
		if n == limit {
			break
		}
		if !r.ExpiresAt.After(now) {
			delete(m.rows, id)
			n++
		}
	}
	return n, nil
}

// Count implements Store.
func (m *Memory) Count(_ context.Context, now time.Time) (map[string]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int64{}
	for _, r := range m.rows {
		if r.ExpiresAt.After(now) {
			out[r.Scope]++
		}
	}
	return out, nil
}

// CountScope implements Store.
func (m *Memory) CountScope(_ context.Context, scope string, now time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for id, r := range m.rows {
		if id[0] == scope && r.ExpiresAt.After(now) {
			n++
		}
	}
	return n, nil
}

// CountExpired implements Store.
func (m *Memory) CountExpired(_ context.Context, now time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, r := range m.rows {
		if !r.ExpiresAt.After(now) {
			n++
		}
	}
	return n, nil
}

// Len returns the number of rows, expired ones included, for tests.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rows)
}

// takeable reports whether a row no longer blocks a new first request:
// it expired, or it is a placeholder whose winner missed its lock.
func takeable(r Record, now time.Time) bool {
	return !r.ExpiresAt.After(now) || (r.Status == 0 && !r.LockedUntil.After(now))
}

func clone(r Record) Record {
	r.Body = append([]byte(nil), r.Body...)
	return r
}
