// Package dedupcheck checks consumer dedup (package idempotency/dedup)
// against a real broker that redelivers: a Redis Streams consumer
// group. The test XADDs the messages; consumers, real processes of the
// test binary, read them with XREADGROUP, take over the pending
// messages of dead consumers with XAUTOCLAIM, and for each one write
// an effect row and the dedup record in one SQL transaction (a SQLite
// file, PostgreSQL, MariaDB), then XACK in batches, so that a kill
// often falls between a commit and its acknowledgement. The test kills
// a working consumer with SIGKILL every 30–150 ms, once the consumers
// acknowledged 1 in 200 of the messages since the last kill (so that on
// a loaded machine kills do not outpace the work), and starts a new one,
// until every message is acknowledged; the verifier then finds every
// message's effect exactly once: none twice, none lost.
//
// The roles live in files of their own, as in internal/lockcheck:
// verify.go (the oracle), and in the tests consumer_test.go (the
// consumer program, run by TestMain), fleet_test.go (the processes and
// the kills) and check_test.go (one run per database and its counts).
//
// Knobs, environment variables:
//
//	IDGEN_DEDUPCHECK_MESSAGES  messages per run (default 10000; 2000
//	                           under -race, which slows the consumers)
//	IDGEN_DEDUPCHECK_NODEDUP   1 runs the consumers without dedup: the
//	                           run must then find messages processed
//	                           twice (it fails if it finds none)
package dedupcheck
