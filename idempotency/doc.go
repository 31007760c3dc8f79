// Package idempotency makes ID requests safe to retry: a request that
// carries an idempotency key (the Idempotency-Key header of the IETF
// httpapi draft) is answered once, and every repeat within the key's TTL
// gets that same answer, byte for byte, from any instance sharing the
// store.
//
// The protocol never allocates twice for one key. The first request
// inserts a placeholder row (in flight, with a lock expiry) if none
// exists; only the request whose insert won allocates, then records its
// answer on the row with a compare-and-set on its own owner token. A
// repeat finds the row and gets the recorded answer (complete, same
// fingerprint), ErrKeyReused (another request under the same key),
// or an *InFlightError (the first is still running). A winner that fails
// removes its placeholder, so that a retry may allocate. A winner that
// crashed stops blocking once its lock expires: the next request takes
// the row over with a compare-and-set on the old owner, and if the old
// winner comes back, its own compare-and-set fails and it answers what
// the row holds instead of its IDs, which are never handed out.
//
// Only successful answers are recorded. A refusal (an unknown tag, the
// tag cap) allocated nothing, so replaying it would only keep a caller
// from succeeding after the cause is fixed.
//
// Keeper.Do runs the protocol around a caller's function, which runs at
// most once per key: while it runs, its hold on the key is renewed, so
// that however slow it is no repeat takes the key over, and its context
// ends if the hold is lost all the same. A key lost from the store (an
// async failover, an eviction) is a new key to its retry; see
// docs/idempotency.md.
//
// Keeper runs the protocol over a Store: package store's Idempotency for
// the SQL backends, package redisstore for Redis, Memory for tests and
// single-process use; package middleware runs it in front of any
// handler. It also sweeps expired keys in batches for as long as they
// come back full, and enforces a per-scope cap on live keys from an
// estimate that it counts again half-way to the cap and before it
// refuses, so that the cap costs a map lookup per request rather than a
// COUNT. A repeat of a key in flight waits briefly for the first
// request's answer before it is told to retry.
package idempotency
