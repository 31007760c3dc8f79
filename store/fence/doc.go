// Package fence decides when a store's database has lost history, and
// what to do about it before another ID is handed out.
//
// idgen's uniqueness rests on the database keeping every commit it
// acknowledged. An asynchronous failover (the promoted replica lacks the
// last commits), a restore from a backup, or a file put back from a copy
// breaks that: max_id rows go back below ranges already handed out, and
// worker leases go back to before claims and renewals whose holders are
// still stamping IDs. Each store reads an Identity of the server in the
// same transaction as every reservation and every lease claim or
// renewal, beside the Record it keeps in its own idgen_fence row, and
// calls Decide with the Memory of what this process saw before. When the
// verdict is Fence, the first process to see the change fences the store
// once, under a lock, with a Plan: every tag's max_id moves up by a
// margin, every lease live within the last TTL is held one more TTL plus
// a margin, every worker's floor moves past the time a lost holder may
// still stamp at, and a new Record with a new generation tells every
// other process that the event has been dealt with. The record also
// carries the sum of every fence's margin (Record.Floor), which tags
// created afterwards start above (Start) and which a process remembers,
// so that a fence after a loss that took earlier fences with it adds
// what they added (Plan.Lost).
//
// This package is the decision and the protocol, in plain Go, with no
// SQL: Decide and NewPlan decide, and RunFence, Check, First and Witness
// are the steps a store takes, over the primitives of Tx, which the SQL
// stores implement in SQL (store/internal/sqlstore). The simulator
// (internal/sim) runs those stores themselves over a faulty SQLite.
package fence
