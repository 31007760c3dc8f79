// Package snowflake issues unique, roughly time-ordered 64-bit IDs with no
// coordination per ID: each running generator owns a worker ID, and an ID
// is the millisecond it was issued in, that worker ID and a sequence number
// within the millisecond. It is idgen's answer for callers that cannot
// afford the database round trip that a segment reservation occasionally
// costs, or that want IDs which sort by creation time.
//
// The scheme is old and simple; what is hard is keeping its one promise —
// never the same ID twice — when time misbehaves, and that is why this
// package exists rather than one of the many small implementations:
//
//   - The wall clock can be stepped backwards (by NTP, an operator, a VM
//     migration). A Generator takes its time from the monotonic clock,
//     anchored to the wall clock, and notices when the two disagree. A
//     backward step of up to Config.MaxBackward is waited out; a larger one
//     makes Next return ErrClockMovedBackwards until the clock has caught
//     up again. It never issues IDs at a time it has already used.
//   - A restarted process has no memory of the timestamps it issued before,
//     so a clock that is now behind would let it reissue them (the restart
//     hole, Leaf issue #97). Config.NotBefore, filled from the lease
//     table's last_timestamp, carries that memory across restarts; the same
//     waiting and refusing applies to it.
//   - A worker ID must belong to one process at a time. Worker IDs are
//     leased (see Leased and LeaseStore), and a Generator can be paused
//     when its lease is lost and given a deadline past which it stops by
//     itself, so that a stalled heartbeat cannot let two processes share a
//     worker ID.
//   - Time bits run out; Next then returns ErrTimeExhausted instead of a
//     wrapped or negative ID.
//
// # Layout
//
// An ID is a non-negative int64. Below the sign bit, from high to low, are
// the time (milliseconds since the layout's epoch), the worker ID and the
// sequence. The default Layout uses 41, 10 and 12 bits from an epoch of
// 2026-01-01 UTC: 69 years of timestamps, 1024 workers and 4096 IDs per
// millisecond per worker. All generators sharing a keyspace must use the
// same Layout.
//
// IDs from one Generator strictly increase, and IDs from different
// generators are ordered by millisecond as far as their clocks agree.
//
// # Leased worker IDs
//
// Leased runs a Generator on a worker ID leased from a database table
// (LeaseStore; the SQL stores keep it in worker_node), so that instances
// need no configured worker IDs and no ZooKeeper. A lease is claimed at
// start, renewed by a heartbeat every TTL/3 and released on Close; a
// process that dies without releasing it frees the worker ID when its TTL
// has passed. Each renewal also records the generator's LastTimestamp.
//
// Reusing a worker ID is the dangerous moment: the new holder could issue
// an ID its predecessor already issued. Two rules make it safe, without
// trusting the clocks of the two processes to agree:
//
//   - The old holder stamps no ID at or after its lease's expiry, less a
//     margin (Generator.SetDeadline). It stops on its own, whether or not
//     its heartbeat runs, on its monotonic clock and in the timestamps it
//     writes, so neither a stalled process nor a wall clock that jumps
//     forward (a suspended VM waking up) carries it past the expiry.
//   - The new holder issues only after the last timestamp the old one
//     may have used: Claim returns as the lease's LastTimestamp the later
//     of the recorded last_timestamp and, if the old lease expired rather
//     than being released, its expiry. The generator takes it as its
//     NotBefore floor.
//
// So the old holder's IDs are stamped before the expiry and the new
// holder's after it, however far apart their clocks are. Clock skew costs
// availability, not uniqueness: a new holder whose clock is behind the
// floor waits (up to MaxBackward) or returns ErrClockMovedBackwards until
// it catches up, which is also what protects a restarted process whose
// clock was stepped back. A released lease's last_timestamp is exact,
// because Close pauses the generator before reading it, so the worker ID
// can be reused at once.
//
// When renewals fail, the generator keeps issuing until the deadline,
// then is paused (ErrNoWorkerLease) while the heartbeat keeps trying to
// renew or, once the lease has expired, to claim a worker ID again; it
// resumes under whichever it gets, its IDs still increasing.
//
// A worker ID's floor is a time, and a time means an ID only under one
// layout and epoch: the same lease table used with another would reissue
// IDs. A store that is a LayoutClaimer, as idgen's all are, records the
// layouts its worker IDs have issued IDs in, and refuses a claim whose IDs
// could equal theirs (ErrLayoutMismatch, see AdmitLayout). A table moves
// to another layout only by Relayout, which puts every new ID above every
// old one (PlanRelayout).
//
// # Batches
//
// NextN and AppendN take as many sequence numbers of the current
// millisecond as they need under one acquisition of the generator's lock,
// so a batch of n IDs costs about one lock round per 4096 IDs rather than
// n of them.
package snowflake
