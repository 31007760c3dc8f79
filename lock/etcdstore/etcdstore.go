package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/idgen/idgen/lock"
)

// Options configure a Store. The zero value selects the defaults.
type Options struct {
	// Prefix is prepended to every key; empty means "idgen/lock/". Two
	// Stores share locks only if they share the prefix.
	Prefix string
	// WaitTTL is the TTL of the lease waiting keys hang on: how long a
	// waiter that died keeps its place before the next one moves up.
	// Zero means 5s. etcd counts leases in whole seconds and raises a
	// TTL below its minimum (2s with the default election timeout).
	WaitTTL time.Duration
}

// ErrClosed is returned by a Store's methods after Close.
var ErrClosed = errors.New("etcdstore: closed")

// Store is a lock.Backend on etcd. It is safe for concurrent use; Close
// it to end its waiting lease.
type Store struct {
	cli     *clientv3.Client
	prefix  string
	waitTTL int64 // seconds

	mu     sync.Mutex
	sess   *concurrency.Session         // the waiting lease; replaced once it is lost
	free   map[int64][]clientv3.LeaseID // empty leases by TTL in seconds, for the next grants
	closed bool
}

// maxFree bounds the empty leases a Store keeps per TTL.
const maxFree = 8

var _ lock.Backend = (*Store)(nil)

// New returns a Store over cli, with its waiting lease granted under
// ctx, or an error wrapping lock.ErrInvalidOptions for o that cannot
// work, or etcd's error. The Store does not close cli.
func New(ctx context.Context, cli *clientv3.Client, o Options) (*Store, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: etcdstore: nil client", lock.ErrInvalidOptions)
	}
	if o.Prefix == "" {
		o.Prefix = "idgen/lock/"
	}
	if o.WaitTTL == 0 {
		o.WaitTTL = 5 * time.Second
	}
	if o.WaitTTL < time.Second {
		return nil, fmt.Errorf("%w: etcdstore: WaitTTL %v: etcd leases last at least 1s", lock.ErrInvalidOptions, o.WaitTTL)
	}
	s := &Store{cli: cli, prefix: o.Prefix, waitTTL: seconds(o.WaitTTL), free: map[int64][]clientv3.LeaseID{}}
	if _, err := s.session(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Close revokes the waiting lease, which takes this Store's waiters out
// of every queue (waits in progress return ErrClosed), and the empty
// leases it kept. Grants stay until released or lapsed.
func (s *Store) Close() error {
	s.mu.Lock()
	sess, free := s.sess, s.free
	s.closed, s.sess, s.free = true, nil, nil
	s.mu.Unlock()
	for _, ids := range free {
		for _, id := range ids {
			s.revoke(context.Background(), id)
		}
	}
	if sess == nil {
		return nil
	}
	return sess.Close()
}

// session returns the waiting lease, granting a new one if it was lost
// (etcd expired it while this client could not reach a quorum). The lock
// is not held across the grant.
func (s *Store) session(ctx context.Context) (*concurrency.Session, error) {
	s.mu.Lock()
	cur, closed := s.sess, s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if cur != nil {
		select {
		case <-cur.Done():
		default:
			return cur, nil
		}
	}
	// Granted under ctx, kept alive under the client's own context, so
	// that it outlives this call.
	lr, err := s.cli.Grant(ctx, s.waitTTL)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: grant the waiting lease: %w", err)
	}
	sess, err := concurrency.NewSession(s.cli, concurrency.WithLease(lr.ID), concurrency.WithTTL(int(s.waitTTL)))
	if err != nil {
		return nil, fmt.Errorf("etcdstore: keep the waiting lease alive: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		_ = sess.Close()
		return nil, ErrClosed
	case s.sess != cur: // another call replaced it first
		_ = sess.Close()
		return s.sess, nil
	}
	s.sess = sess
	return sess, nil
}

// seconds rounds d up to whole seconds, as etcd counts TTLs: a grant
// then lasts at least what was asked.
func seconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}

// dir is the prefix of name's keys; key is owner's key in it. Both are
// escaped so that no name's directory holds another name's keys.
func (s *Store) dir(name string) string { return s.prefix + url.PathEscape(name) + "/" }
func (s *Store) key(name, owner string) string {
	return s.dir(name) + url.PathEscape(owner)
}

// record is a key's value.
type record struct {
	Owner string `json:"owner"`
	// TTLms is the grant's TTL as asked, 0 while waiting: Renew rebinds
	// the key to a new lease only when the TTL changes.
	TTLms int64 `json:"ttl_ms,omitempty"`
	// Queued and Granted are when the owner arrived and when it was
	// granted, in Unix nanoseconds by the client's clock; Granted is 0
	// while it waits.
	Queued  int64 `json:"queued"`
	Granted int64 `json:"granted,omitempty"`
}

func (r record) encode() string {
	b, _ := json.Marshal(r) // strings and integers: cannot fail
	return string(b)
}

func decode(kv *mvccpb.KeyValue) record {
	var r record
	_ = json.Unmarshal(kv.Value, &r) // another writer's garbage reads as an empty owner
	return r
}

// grantLease grants a lease for one grant of ttl.
func (s *Store) grantLease(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	lr, err := s.cli.Grant(ctx, seconds(ttl))
	if err != nil {
		return 0, fmt.Errorf("etcdstore: grant a lease: %w", err)
	}
	return lr.ID, nil
}

// lease returns an empty lease of ttl for one grant, reset to its full
// TTL at the time it returns with: one this Store kept, kept alive once
// (a renewal is answered by the leader without a disk write), or else a
// new one (a write through the log, to disk).
func (s *Store) lease(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, time.Time, error) {
	secs := seconds(ttl)
	for {
		s.mu.Lock()
		ids := s.free[secs]
		if len(ids) == 0 {
			s.mu.Unlock()
			break
		}
		id := ids[len(ids)-1]
		s.free[secs] = ids[:len(ids)-1]
		s.mu.Unlock()
		at := time.Now()
		_, err := s.cli.KeepAliveOnce(ctx, id)
		if err == nil {
			return id, at, nil
		}
		// Not found: it lapsed in the list; try the next. Another error:
		// etcd did not answer; give this one up.
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.revoke(ctx, id)
			if ctx.Err() != nil {
				return 0, at, fmt.Errorf("etcdstore: renew a kept lease: %w", err)
			}
		}
	}
	at := time.Now()
	id, err := s.grantLease(ctx, ttl)
	return id, at, err
}

// recycle keeps id, a lease of ttl that is known to have no key (a
// transaction that would have bound it failed, or the key was deleted),
// for the next grant of the same TTL, or revokes it. A lease whose fate
// is unknown (a write that failed in flight) must be revoked instead:
// revoking also deletes a key the write may have bound.
func (s *Store) recycle(ctx context.Context, id clientv3.LeaseID, ttl time.Duration) {
	if id == 0 {
		return
	}
	secs := seconds(ttl)
	s.mu.Lock()
	if !s.closed && len(s.free[secs]) < maxFree {
		s.free[secs] = append(s.free[secs], id)
		id = 0
	}
	s.mu.Unlock()
	if id != 0 {
		s.revoke(ctx, id)
	}
}

// revoke revokes a lease no key needs any more. A failure only leaves
// an empty lease to lapse by itself, so it is not reported.
func (s *Store) revoke(ctx context.Context, id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = s.cli.Revoke(ctx, id)
}

// errRetry makes Acquire start over: the keys changed under it.
var errRetry = errors.New("etcdstore: retry")

// Acquire implements lock.Backend. The uncontended path is a lease (one
// a Release left empty, kept alive once, or a new one) and one
// transaction that binds owner's key to it if the name's directory is
// empty.
func (s *Store) Acquire(ctx context.Context, name, owner string, ttl time.Duration, wait bool) (lock.Grant, error) {
	dir, key := s.dir(name), s.key(name, owner)
	for {
		lid, start, err := s.lease(ctx, ttl)
		if err != nil {
			return lock.Grant{}, err
		}
		rec := record{Owner: owner, TTLms: ttl.Milliseconds(), Queued: start.UnixNano(), Granted: start.UnixNano()}
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(dir), "=", 0).WithPrefix()). // no key at all
			Then(clientv3.OpPut(key, rec.encode(), clientv3.WithLease(lid))).
			Else(clientv3.OpGet(dir, clientv3.WithFirstCreate()...)).
			Commit()
		if err != nil {
			s.revoke(ctx, lid)
			return lock.Grant{}, fmt.Errorf("etcdstore: acquire %q: %w", name, err)
		}
		if resp.Succeeded {
			// The put is the transaction's only write: the key's create
			// revision is the header's.
			return lock.Grant{Name: name, Owner: owner, Token: resp.Header.Revision, Expires: start.Add(ttl)}, nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			s.recycle(ctx, lid, ttl)
			continue // emptied since the compare: impossible within one txn, but cheap to survive
		}
		head := kvs[0]
		if string(head.Key) == key {
			// owner holds it (or, from another process, is about to):
			// the same token, a TTL from now.
			g, err := s.rebind(ctx, name, head, lid, rec, start, ttl)
			switch {
			case errors.Is(err, errRetry):
				s.recycle(ctx, lid, ttl)
				continue
			case err != nil:
				s.revoke(ctx, lid)
			}
			return g, err
		}
		if !wait {
			s.recycle(ctx, lid, ttl)
			return lock.Grant{}, s.held(ctx, name, head)
		}
		g, err := s.wait(ctx, name, owner, ttl, lid, start)
		if errors.Is(err, errRetry) {
			continue
		}
		return g, err
	}
}

// rebind moves kv, owner's key at the head of name's queue, to lease
// lid with rec's TTL, if kv is unchanged, and revokes the lease of the
// grant it replaces. The token stays kv's create revision: a put to an
// existing key keeps it. It returns errRetry if kv changed.
func (s *Store) rebind(ctx context.Context, name string, kv *mvccpb.KeyValue, lid clientv3.LeaseID, rec record, start time.Time, ttl time.Duration) (lock.Grant, error) {
	old := decode(kv)
	if old.Granted != 0 {
		rec.Queued, rec.Granted = old.Queued, old.Granted // Since is the token's grant
	} else {
		rec.Queued = old.Queued
	}
	key := string(kv.Key)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpPut(key, rec.encode(), clientv3.WithLease(lid))).
		Commit()
	if err != nil {
		return lock.Grant{}, fmt.Errorf("etcdstore: acquire %q: %w", name, err)
	}
	if !resp.Succeeded {
		return lock.Grant{}, errRetry
	}
	// Only a granted key's lease is its own; a waiting key's is a
	// Store's waiting lease, which other waits hang on.
	if old.Granted != 0 && kv.Lease != 0 {
		s.revoke(ctx, clientv3.LeaseID(kv.Lease))
	}
	return lock.Grant{Name: name, Owner: rec.Owner, Token: kv.CreateRevision, Expires: start.Add(ttl)}, nil
}

// held returns the *lock.HeldError naming head, the key at the front of
// name's queue, with its lease's remaining TTL as the expiry.
func (s *Store) held(ctx context.Context, name string, head *mvccpb.KeyValue) error {
	g := lock.Grant{Name: name, Owner: decode(head).Owner, Token: head.CreateRevision}
	g.Expires = s.expires(ctx, head)
	return &lock.HeldError{Holder: g}
}

// expires asks etcd how long kv's lease has left. A failure, after which
// the lease may be gone anyway, reads as now.
func (s *Store) expires(ctx context.Context, kv *mvccpb.KeyValue) time.Time {
	now := time.Now()
	if kv.Lease == 0 {
		return now
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	r, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil || r.TTL < 0 {
		return now
	}
	return now.Add(time.Duration(r.TTL) * time.Second)
}

// wait queues owner for name on the waiting lease and takes the lock
// when every older key is gone. It returns errRetry when the queue
// changed so that Acquire must look again: owner's key turned out
// granted (reentrant, from another process), or vanished with a lapsed
// waiting lease. lid, a lease of ttl reset at lidAt, before the wait,
// becomes the grant's; wait gives it up unless it is granted.
func (s *Store) wait(ctx context.Context, name, owner string, ttl time.Duration, lid clientv3.LeaseID, lidAt time.Time) (g lock.Grant, err error) {
	defer func() {
		if err != nil {
			s.recycle(ctx, lid, ttl) // take revoked it if its fate is unknown
		}
	}()
	sess, err := s.session(ctx)
	if err != nil {
		return lock.Grant{}, err
	}
	dir, key := s.dir(name), s.key(name, owner)
	rec := record{Owner: owner, Queued: time.Now().UnixNano()}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, rec.encode(), clientv3.WithLease(sess.Lease()))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return lock.Grant{}, fmt.Errorf("etcdstore: queue for %q: %w", name, err)
	}
	myRev, queued, mine := resp.Header.Revision, rec.Queued, resp.Succeeded
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 || decode(kvs[0]).Granted != 0 {
			return lock.Grant{}, errRetry
		}
		// Another process of owner waits already: wait with it, for
		// the same key.
		myRev, queued = kvs[0].CreateRevision, decode(kvs[0]).Queued
	}
	granted := false
	if mine {
		defer func() {
			if !granted { // leave the queue at once rather than within WaitTTL
				s.leave(ctx, key, myRev, sess.Lease())
			}
		}()
	}
	for {
		// The predecessor: the newest key older than ours.
		pr, err := s.cli.Get(ctx, dir, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(myRev-1))...)
		if err != nil {
			return lock.Grant{}, s.waitErr(ctx, name, err)
		}
		if len(pr.Kvs) == 0 {
			g, lid, err = s.take(ctx, name, owner, key, myRev, queued, ttl, lid, lidAt)
			granted = err == nil
			return g, err
		}
		pred := pr.Kvs[0]
		if err := s.waitGone(ctx, sess, pred, pr.Header.Revision); err != nil {
			return lock.Grant{}, s.waitErr(ctx, name, err)
		}
	}
}

// take grants the key myRev, at the head of name's queue: in one
// transaction that checks the key is still there (its waiting lease did
// not lapse while it waited: the Jepsen bug) and that no older key is,
// it binds the key to lid, a lease of ttl granted at lidAt, before the
// wait. queued is when owner arrived. It returns the lease it used.
//
// lid is kept alive once to reset it to its full TTL: a renewal is
// answered by the leader without a disk write, where a new lease would
// cost one more on the hand-off's path. While lid is young (a short
// wait) the renewal runs beside the transaction, since lid outlives it
// either way; if that renewal fails, the grant is reported with lid's
// first expiry. After a longer wait it runs first, and a lapsed lid is
// replaced by a new lease.
func (s *Store) take(ctx context.Context, name, owner, key string, myRev, queued int64, ttl time.Duration, lid clientv3.LeaseID, lidAt time.Time) (lock.Grant, clientv3.LeaseID, error) {
	start := time.Now()
	var (
		kaErr  error
		kaDone chan struct{}
	)
	if start.Sub(lidAt) < ttl/2 {
		kaDone = make(chan struct{})
		go func() {
			defer close(kaDone)
			_, kaErr = s.cli.KeepAliveOnce(ctx, lid)
		}()
	} else if _, err := s.cli.KeepAliveOnce(ctx, lid); err != nil {
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return lock.Grant{}, lid, fmt.Errorf("etcdstore: take %q: %w", name, err)
		}
		start = time.Now()
		if lid, err = s.grantLease(ctx, ttl); err != nil {
			return lock.Grant{}, 0, err
		}
	}
	rec := record{Owner: owner, TTLms: ttl.Milliseconds(), Queued: queued, Granted: start.UnixNano()}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", myRev),
			clientv3.Compare(clientv3.CreateRevision(s.dir(name)), ">", myRev-1).WithPrefix()).
		Then(clientv3.OpPut(key, rec.encode(), clientv3.WithLease(lid))).
		Commit()
	if kaDone != nil {
		<-kaDone
		if kaErr != nil {
			start = lidAt // lid lapses a TTL after its grant
		}
	}
	if err != nil {
		s.revoke(ctx, lid) // the put may have bound the key: revoking deletes it
		return lock.Grant{}, 0, fmt.Errorf("etcdstore: take %q: %w", name, err)
	}
	if !resp.Succeeded {
		return lock.Grant{}, lid, errRetry
	}
	return lock.Grant{Name: name, Owner: owner, Token: myRev, Expires: start.Add(ttl)}, lid, nil
}

// waitGone returns once pred, read at revision rev, is deleted, or the
// waiting lease sess is lost (errRetry), or ctx ends.
func (s *Store) waitGone(ctx context.Context, sess *concurrency.Session, pred *mvccpb.KeyValue, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// No start revision: the server adds a synced watcher that hears of
	// the deletion as it commits. A watch from rev+1 would be unsynced
	// whenever anything was written since, and etcd catches unsynced
	// watchers up every 100 ms.
	wch := s.cli.Watch(wctx, string(pred.Key), clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
	select {
	case wr, ok := <-wch:
		if !ok {
			return ctx.Err()
		}
		if err := wr.Err(); err != nil {
			return err
		}
		if wr.Header.Revision != rev {
			// Something was written between the read and the watch: the
			// predecessor may be gone already. Look again.
			r, err := s.cli.Get(ctx, string(pred.Key))
			if err != nil {
				return err
			}
			if len(r.Kvs) == 0 || r.Kvs[0].CreateRevision != pred.CreateRevision {
				return nil
			}
		}
	case <-sess.Done():
		return errRetry
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		select {
		case wr, ok := <-wch:
			if !ok {
				return ctx.Err()
			}
			if err := wr.Err(); err != nil {
				return err
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					return nil
				}
			}
		case <-sess.Done():
			return errRetry
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitErr turns the error that ended a wait into Acquire's: a
// *lock.HeldError naming the holder if ctx ended, or err.
func (s *Store) waitErr(ctx context.Context, name string, err error) error {
	if errors.Is(err, errRetry) || ctx.Err() == nil {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	r, gerr := s.cli.Get(rctx, s.dir(name), clientv3.WithFirstCreate()...)
	if gerr != nil || len(r.Kvs) == 0 {
		return fmt.Errorf("etcdstore: wait for %q: %w", name, ctx.Err())
	}
	return s.held(rctx, name, r.Kvs[0])
}

// leave deletes the waiting key myRev if it is still this Store's.
func (s *Store) leave(ctx context.Context, key string, myRev int64, lease clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", myRev),
			clientv3.Compare(clientv3.LeaseValue(key), "=", lease)).
		Then(clientv3.OpDelete(key)).
		Commit() // a failure leaves it to lapse with the waiting lease
}

// Renew implements lock.Backend: g is renewed only while owner's key
// still has g's token as its create revision and its lease is alive.
// With the grant's TTL it keeps the lease alive; with another TTL it
// binds the key to a new lease.
func (s *Store) Renew(ctx context.Context, g lock.Grant, ttl time.Duration) (lock.Grant, error) {
	// Another process of the same owner may move the key to a lease of
	// its own (a reentrant acquire) between the read and the renewal:
	// the grant stands, so look again. The read finds a real loss.
	for try := 0; ; try++ {
		ng, err := s.renew(ctx, g, ttl)
		if !errors.Is(err, errRetry) {
			return ng, err
		}
		if try == 2 {
			return lock.Grant{}, fmt.Errorf("%w: %q (token %d) by %q: its lease keeps changing", lock.ErrLost, g.Name, g.Token, g.Owner)
		}
	}
}

// renew is one try of Renew, or errRetry if the key moved to another
// lease under it.
func (s *Store) renew(ctx context.Context, g lock.Grant, ttl time.Duration) (lock.Grant, error) {
	key := s.key(g.Name, g.Owner)
	lost := fmt.Errorf("%w: %q (token %d) by %q", lock.ErrLost, g.Name, g.Token, g.Owner)
	start := time.Now()
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", g.Token)).
		Then(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return lock.Grant{}, fmt.Errorf("etcdstore: renew %q: %w", g.Name, err)
	}
	if !resp.Succeeded {
		return lock.Grant{}, lost
	}
	kv := resp.Responses[0].GetResponseRange().Kvs[0]
	rec := decode(kv)
	if rec.Granted == 0 || kv.Lease == 0 {
		return lock.Grant{}, lost
	}
	if seconds(time.Duration(rec.TTLms)*time.Millisecond) != seconds(ttl) {
		lid, err := s.grantLease(ctx, ttl)
		if err != nil {
			return lock.Grant{}, err
		}
		rec.TTLms = ttl.Milliseconds()
		ng, err := s.rebind(ctx, g.Name, kv, lid, rec, start, ttl)
		if errors.Is(err, errRetry) {
			s.revoke(ctx, lid)
		}
		return ng, err
	}
	lid := clientv3.LeaseID(kv.Lease)
	if _, err := s.cli.KeepAliveOnce(ctx, lid); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return lock.Grant{}, lost // lapsed: etcd deletes the key, or did
		}
		return lock.Grant{}, fmt.Errorf("etcdstore: renew %q: %w", g.Name, err)
	}
	// The lease renewed is still the key's: no process of owner moved
	// the key to another lease in between.
	resp, err = s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", g.Token),
			clientv3.Compare(clientv3.LeaseValue(key), "=", lid)).
		Commit()
	if err != nil {
		return lock.Grant{}, fmt.Errorf("etcdstore: renew %q: %w", g.Name, err)
	}
	if !resp.Succeeded {
		return lock.Grant{}, errRetry
	}
	g.Expires = start.Add(ttl)
	return g, nil
}

// Release implements lock.Backend: it deletes owner's key only if its
// create revision is g's token, so that a release retried after a
// newer grant of the same owner leaves that grant alone (etcd issue
// #22082). The grant's lease, empty now, is kept for the next grant of
// its TTL.
func (s *Store) Release(ctx context.Context, g lock.Grant) error {
	key := s.key(g.Name, g.Owner)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", g.Token)).
		Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		return fmt.Errorf("etcdstore: release %q: %w", g.Name, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %q (token %d) by %q", lock.ErrNotHeld, g.Name, g.Token, g.Owner)
	}
	if prev := resp.Responses[0].GetResponseDeleteRange().PrevKvs; len(prev) == 1 && prev[0].Lease != 0 {
		if rec := decode(prev[0]); rec.Granted != 0 {
			s.recycle(ctx, clientv3.LeaseID(prev[0].Lease), time.Duration(rec.TTLms)*time.Millisecond)
		}
	}
	return nil
}

// Describe implements lock.Backend with one read of name's keys.
func (s *Store) Describe(ctx context.Context, name string) (lock.Info, error) {
	r, err := s.cli.Get(ctx, s.dir(name), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return lock.Info{}, fmt.Errorf("etcdstore: describe %q: %w", name, err)
	}
	info := lock.Info{Name: name}
	for i, kv := range r.Kvs {
		rec := decode(kv)
		if i == 0 && rec.Granted != 0 {
			g := lock.Grant{Name: name, Owner: rec.Owner, Token: kv.CreateRevision, Expires: s.expires(ctx, kv)}
			info.Holder, info.Since = &g, time.Unix(0, rec.Granted)
			continue
		}
		info.Waiters = append(info.Waiters, lock.Waiter{Owner: rec.Owner, Since: time.Unix(0, rec.Queued)})
	}
	return info, nil
}
