// Package sim is a deterministic simulation of idgen's store under
// faults, run against the production code: several processes, each a
// real store.Store (package store over store/internal/sqlstore) on one
// shared SQLite file, each with its own fence memory, a real segment
// allocator and a real leased snowflake generator or presence lease,
// while one seeded random source picks every step and fault, and an
// oracle checks, after every step, that no ID was handed out twice and
// that IDs increase per process.
//
// Why: the store's fencing (package fence, and sqlstore's Guard over it)
// exists for failures no unit test meets in the right order: a failover
// that loses the last commits under running processes, a restore, a
// connection that breaks mid-transaction or after its commit, a crash
// that leaves a lease behind, a pause past the TTL. The simulator runs
// them against the real SQL, as hashicorp/raft's fuzzy/ runs real raft
// over a faulty transport and pebble's metamorphic test the real DB over
// a faulty VFS. Nothing here implements the store.
//
// The files follow fuzzy/'s roles: world.go (the run and its phases),
// process.go (a process's lifecycle), ops.go (the ops, their weights and
// the losses), oracle.go (the promises), gate.go (the delivery of the
// allocators' store calls), faults.go (the faulty database/sql layer) and
// history.go (the snapshots that a failover or a restore goes back to).
//
// A run replays from its seed because nothing happens unless the
// simulator lets it: it runs in a testing/synctest bubble, whose fake
// clock is every time.Now (the store's too); every allocator's store
// call parks until the simulator lets it run, one at a time; snowflake
// heartbeats run on the simulator's goroutine; and the presence leases,
// which renew on timers of their own, have TTLs a few milliseconds
// apart, so that no two renew at one instant. Every step is traced and
// the trace hashed (Result.TraceHash). One gap is left: a few seeds run
// after others in one test process (two of 80 in one check) take
// another path late in the run, through a commit counted or not (the
// losses' lag); a seed replayed alone (IDGEN_SIM_SEED) takes the same
// path every time.
//
// The worlds where today's store hands an ID out twice are in
// TestSimulation_KnownHoles, each from the first seed that shows it.
package sim
