// Package lock grants named locks with fencing tokens, for the step of
// an order flow that must not run twice at once (one user's checkout,
// one account's balance), on the databases idgen already uses.
//
// Why a token: a lease cannot give mutual exclusion by itself. A holder
// paused past its TTL (a GC pause, a stopped VM) wakes up believing it
// still holds the lock and writes after another holder took over. Every
// grant therefore carries a token, strictly increasing per lock name
// across every grant, and the protected resource refuses a write whose
// token is below one it has already accepted (Guard). Only that check
// makes the lock exclusive; the lease only makes it rare to need.
//
// There are few types: a Backend stores the grants (store.Store.Locks
// for PostgreSQL, MySQL and SQLite, whose tokens the store's fence
// raises after a failover or a restore as it raises IDs; package
// lock/redisstore; package lock/etcdstore); a Locker hands out Leases
// over it; a Lease renews itself at a third of its TTL while the holder
// works, and says when it is lost (Lost, Context); a Guard checks
// tokens in the caller's own transaction.
//
// Reentrancy is by explicit owner: an owner that acquires a lock it
// holds gets the same grant back, with the same token and a TTL
// extended from now; one Release frees it. Waiters are granted in
// arrival order; a waiter that died is skipped once its own short TTL
// lapses.
package lock
