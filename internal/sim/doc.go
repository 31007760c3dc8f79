// Package sim is a deterministic simulation of idgen's store under
// faults, run against the production code, as hashicorp/raft's fuzzy/
// runs real raft over a faulty transport: several processes, each a real
// store.Store (over store/internal/sqlstore) on one SQLite file with its
// own fence memory, allocator, leased generator or presence, and lock
// client. One seeded source picks every step and fault (a failover, a
// restore, a connection broken around its commit, a crash, a pause past
// the TTL); an oracle checks after every step that no ID or lock token
// was handed out twice, that IDs increase, and that no store that lost
// nothing was fenced. Nothing here implements the store.
//
// Files follow fuzzy/'s roles: world.go (the run), process.go (a
// process), ops.go (the ops and losses), oracle.go (the promises),
// gate.go (the allocators' store calls), faults.go (the faulty
// database/sql layer), history.go (the snapshots losses go back to).
//
// A run replays from its seed: it runs in a testing/synctest bubble
// whose fake clock is every time.Now, store calls run one at a time when
// the simulator lets them, and every step is traced and hashed
// (Result.TraceHash). A few seeds (10, 11, 29 and 33 of the default
// world) take one of two paths late in the run, through a commit counted
// or not in a loss's lag, even replayed alone.
package sim
