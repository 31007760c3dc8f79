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
// the store's fencing decisions are the real package fence's: the fake
// store calls fence.Decide, Memory.Observe and NewPlan as
// store/internal/sqlstore's Guard does, and carries out the plan on its
// tables, and starts tags it creates at the record's floor
// (fence.Start), as the store does. The faults include lossy failovers (a
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
// leases.go (the lease table) and clock.go.
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
