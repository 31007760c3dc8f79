// Package sim is a deterministic simulation of idgen's two protocols, in
// the style FoundationDB and TigerBeetle made known: one seeded random
// source drives several simulated processes, each with a segment
// allocator and a leased snowflake generator, over one simulated
// database (an id_sequence table, a worker lease table and the fence
// record) and simulated clocks, and injects faults between every step.
// After every step it checks the promises idgen makes: no ID handed out
// twice, IDs strictly increasing per process and tag, every segment ID
// inside a range the store reserved for its process, no range handed
// back that holds an ID already handed out, and, once the faults stop,
// progress.
//
// The code under test is the real segment and snowflake packages, and
// the store's fencing protocol is the real package fence's: the fake
// store implements fence.Tx's primitives in memory (tx.go) and runs
// fence.Check, fence.RunFence, fence.First and the witness raise over
// them, with a fence.HighWater per incarnation, exactly as
// store/internal/sqlstore runs them over SQL; it starts tags it creates
// at the record's floor (fence.Start), as the store does. The planted
// bugs break one rule each in those primitives or in the world, never
// in product code. The world is PostgreSQL (timelines, now and then a
// promotion that reuses a number) or MariaDB (a server_id, no numbered
// failovers), picked per seed; processes lose their memory of the store
// when they restart; one process runs with a cap four times the others',
// tags' steps reach ten times a cap; every process with a worker lease
// holds a presence lease beside it under the same owner, as serve does,
// and process 2 holds a presence lease alone on half the seeds. The
// faults include lossy failovers (a
// new server history that lacks the last commits, among them, now and
// then, the last fence or the last tag created) and restores (the same
// history, its position back), which only fencing keeps from handing out
// IDs twice. History is lost only while, and only back to commits made
// while, every clock was within half the fence's lease margin of true
// time: the hold assumes that much.
//
// The files follow the roles of hashicorp/raft's fuzzy/ and pebble's
// metamorphic/: world.go (the run and its phases), process.go (a
// simulated process and its lifecycle), ops.go (the weight table and the
// ops), oracle.go (the promises and the trace hash), store.go (the
// segment store's calls and their delivery), db.go (the database and
// the fence), history.go (what a failover or a restore loses),
// leases.go (the lease table and presence leases), tx.go (the fence's
// primitives) and clock.go.
//
// What makes a run replay exactly from its seed is that nothing happens
// unless the simulator lets it:
//   - It runs in a testing/synctest bubble: time is the bubble's fake
//     clock, so segment's real timeouts and backoff and the generators'
//     sleeps run in simulated time, and after every step the simulator
//     waits (synctest.Wait) until every goroutine it started is done or
//     durably blocked, which is a state that is the same on every run.
//   - Every segment store call parks until the simulator completes it, in
//     an order it picks from the seed, with a fault or without.
//   - Snowflake heartbeats run on the simulator's goroutine
//     (LeasedConfig.RenewInterval < 0).
//
// Every step is named in the trace, and the trace is hashed
// (Result.TraceHash), so a replay is checked step by step, not by its
// counters.
package sim
