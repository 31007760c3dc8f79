// Package etcdstore is a lock.Backend on etcd, for users who want their
// locks on a consensus store: a grant survives the loss of any minority
// of members, and its fencing token never goes backwards.
//
// # Keys and tokens
//
// Each lock name is a directory of keys, one per owner that holds or
// waits for it:
//
//	<Prefix><escaped name>/<escaped owner>
//
// The holder is the key with the lowest create revision; the others wait
// behind it in create-revision order, which is arrival order. The token
// of a grant is its key's create revision: etcd's revision is
// cluster-wide, raised by every write and agreed by a quorum, so a later
// grant of a name always has a larger token, after a member failure too.
// The token is never the lease ID, which etcd picks without order (etcd
// issue #11788).
//
// A granted key is bound to a lease of its own, whose TTL is the
// grant's: it lapses unless renewed, and etcd deletes the key when it
// does. A waiting key is bound to the Store's waiting lease (a
// concurrency.Session, kept alive at a third of Options.WaitTTL by this
// client), so a waiter that dies leaves the queue within WaitTTL
// whatever TTL it asked for.
//
// # Why not concurrency.Mutex
//
// concurrency.Mutex binds its key to one Session: every lock on it has
// the session's TTL and lives as long as the process keeps the session
// alive. lock.Backend asks for a TTL per grant and for grants that lapse
// unless renewed, by an owner that may be another process (reentrancy
// by owner), so this package uses the same primitives as the Mutex
// (a key per contender, create-revision order, a watch on the
// predecessor's deletion) in transactions of its own, and keeps the two
// safety checks the Mutex had to learn:
//
//   - A waiter takes the lock in one transaction that compares its own
//     key's create revision and that no older key remains, so a waiter
//     whose session lapsed while it waited is never granted (the
//     Jepsen finding on etcd 3.4's lock).
//   - Renew and Release compare the key's create revision with the
//     grant's token, so a retried release never deletes a newer grant of
//     the same owner (etcd issue #22082).
//
// A waiter watches its predecessor from the current revision (a synced
// watcher, told of the deletion at once), not from an older revision,
// which etcd would catch up with its 100 ms unsynced-watcher loop.
//
// # Cost
//
// Every write to etcd goes through its log to disk; a lease renewal does
// not (the leader answers it). So a Store keeps the leases its Releases
// empty, per TTL, and the next grant renews one instead of granting a
// new lease: an uncontended acquire and release is a renewal and two
// transactions, near a bare concurrency.Mutex's two writes. A waiter's
// lease is taken before it queues and renewed beside the transaction
// that grants it, so a hand-off is the release's write, the watch event
// and one write (BenchmarkAcquireRelease, TestStore_HandOffLatency).
//
// Killing etcd's leader stalls a write sent in the next election
// timeout until etcd's request timeout (7 s by default): a follower
// forwards it to the dead leader. Leases are extended by the new leader,
// so no grant lapses for it.
package etcdstore
