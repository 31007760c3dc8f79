// Package sim is a deterministic simulation of idgen's store under
// faults, run against the production code: several processes, each a
// real store.Store (over store/internal/sqlstore) on one shared SQLite
// file with its own fence memory, a real segment allocator and a real
// leased snowflake generator or presence lease. One seeded random source
// picks every step and fault; an oracle checks after every step that no
// ID was handed out twice, that IDs increase per process, and that no
// store that lost nothing was fenced.
//
// Why: the fence exists for failures no unit test meets in the right
// order (a failover that loses the last commits under running processes,
// a restore, a connection that breaks around its commit, a crash that
// leaves a lease behind, a pause past the TTL). The simulator runs them
// against the real SQL, as hashicorp/raft's fuzzy/ runs real raft over a
// faulty transport. Nothing here implements the store.
//
// Files follow fuzzy/'s roles: world.go (the run), process.go (a
// process's lifecycle), ops.go (the ops, their weights, the losses),
// oracle.go (the promises), gate.go (the delivery of the allocators'
// store calls), faults.go (the faulty database/sql layer) and history.go
// (the snapshots a loss goes back to).
//
// A run replays from its seed: it runs in a testing/synctest bubble
// whose fake clock is every time.Now; every allocator's store call parks
// until the simulator lets it run, one at a time; heartbeats run on the
// simulator's goroutine; presence leases have TTLs a few milliseconds
// apart. Every step is traced and hashed (Result.TraceHash). A few seeds
// (10, 11, 29 and 33 of the default world) take one of two paths late
// in the run, through a commit counted or not in a loss's lag, even
// replayed alone; the others replay step for step.
package sim
