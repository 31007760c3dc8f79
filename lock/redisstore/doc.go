// Package redisstore keeps lock grants in Redis, for services that
// already run it: a lock.Backend over github.com/redis/go-redis/v9, on
// one Redis, Sentinel or Redis Cluster, and a guard (Guarded) for data
// kept in Redis.
//
// # Keys and scripts
//
// A lock is three keys that share its name as a hash tag, so that on a
// cluster each lock lives in one slot and every script over it runs on
// one master: prefix{name} (a hash: owner, token, expiry, a lower
// bound of the hash's own expiry, so that a grant need not set its TTL
// each time, and a mark set while the queue may exist, so that a lock
// nobody waits for never touches the queue's keys), prefix{name}:q
// (the queue: a sorted set of waiting owners by arrival) and
// prefix{name}:w (each waiter's own expiry). A name containing a brace, or starting with
// '~', is tagged as '~' and its hex instead. Every state change is one
// Lua script, atomic on the master, that checks owner and token
// together by the master's clock (TIME): a grant, a reentrant acquire,
// a renewal, a release. A renewal of a lapsed grant is ErrLost even if
// no one took it; a release of another owner's or an older token's
// grant is ErrNotHeld.
//
// # Tokens
//
// A grant's token is the master's clock in microseconds at the grant,
// and it must be above the name's last token, which the hash keeps
// after a release. When the clock reads at or behind the last token (a
// clock stepped back), the grant waits for it up to 50ms and otherwise
// fails with ErrClockBehind: it fails closed rather than grant a token
// that is not the clock. Hence every token of a name is at most the
// clock of the master that granted it, and the next token is above it
// as long as the clock serving the name reads later than that: with
// the name's hash in Redis by the check, and without it (expired,
// lost) by the clock alone.
//
// Nothing leaks (Redisson's RFencedLock keeps one counter key per name
// forever; #6510 reports 25 million): the hash expires Options.Retain
// (an hour), or up to a quarter more, after the lock's last grant or
// renewal lapses, and the queue's keys two WaiterTTLs after their last
// waiter.
//
// What survives, measured by this package's tests with the Debian
// redis-server 7.0:
//
//   - The hash expiring after Retain: tokens go on rising (the clock).
//   - A restart without persistence (no RDB, no AOF): every grant is
//     lost. The holder's renewal says ErrLost and its Lease is lost, but
//     another owner is granted at once: until the old holder notices,
//     two hold the lock, which only a checked token tells apart. The
//     next token is above every earlier one by the restart's duration
//     (about 50ms in the test).
//   - An async failover to a replica that missed the last writes: the
//     replica's hash is older. A release it missed is undone (the old
//     holder holds again until its TTL, and its renewals succeed); a
//     grant it missed is lost (that holder's renewal says ErrLost), and
//     a lost grant's owner, or another, is granted again with a token
//     from the new master's clock: above the lost one as long as the new
//     master's clock reads later than the old one's did at the lost
//     grant, that is, while the clocks' offset is below the time the
//     failover took (seconds: cluster-node-timeout or Sentinel's
//     down-after-milliseconds, against NTP's milliseconds).
//   - With Options.Replicas, a grant returns only once that many
//     replicas acknowledged it (WAIT), and is undone otherwise
//     (ErrNotReplicated): a failover to an acknowledging replica keeps
//     it. WAIT does not make Redis consistent: Redis may still promote a
//     replica that did not acknowledge, and renewals and releases are
//     not waited for.
//   - Fail closed: a Store refuses a grant (ErrClockBehind) from a
//     master whose clock reads more than Options.MaxClockSkew behind the
//     highest time it has read from any master, which is what a
//     failover to a host with a lagging clock, or a clock stepped back,
//     looks like to a running process.
//
// What is not guaranteed: a token above every earlier one after the
// name's hash is lost and the serving master's clock reads earlier
// than an earlier grant's master did (a clock stepped back by more than
// the time since that grant), unless a running Store saw the later
// time. Mutual exclusion is never guaranteed by the lease alone, on any
// Redis setup: protect the resource with the token (Guarded, or
// lock.Guard for SQL).
//
// # Waiting
//
// Waiters are granted in arrival order. A waiter queues itself (its
// arrival and its own expiry, WaiterTTL from now) and renews its place
// at a third of WaiterTTL while it waits; a waiter that died is skipped
// once that expiry passes, and all dead waiters ahead together, not one
// delay per dead waiter (Redisson #1353). A release with waiters
// publishes on the channel named as the lock's hash, and each waiter,
// subscribed for as long as it waits, asks again at once: the hand-off
// takes about half a millisecond on loopback. While waiters are queued,
// a free lock is the head waiter's: a TryAcquire by another owner gets
// a *lock.HeldError naming that waiter, with token 0 and the waiter's
// expiry.
//
// Redis must keep keys until they expire: New refuses any
// maxmemory-policy but noeviction (ErrEvictionPolicy).
package redisstore
