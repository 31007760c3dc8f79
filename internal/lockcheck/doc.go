// Package lockcheck is a Jepsen-style checker of package lock: real
// worker processes take one lock over a real backend and write to a
// guarded resource (a PostgreSQL table behind lock.Guard, every
// accepted write appended to a log table in the same transaction),
// while the test pauses holders past their TTL (SIGSTOP, SIGCONT), kills
// them with SIGKILL and fails the lock store over to a stale
// asynchronous replica. The verifier then reads the workers' events and
// the log, and fails on a stale write accepted, two holders writing
// interleaved, a token that went backwards or was granted twice, and a
// lease lost silently.
//
// The roles live in files of their own, as hashicorp/raft's fuzzy/
// does: event.go (what a worker prints, one JSON line per event),
// worker/ (the worker program), verifier.go (the oracle, over a
// History), and, in the tests, workers_test.go (the processes),
// nemesis_test.go (the pauses and kills), run_test.go (one run and its
// counts) and one small _test.go per backend with its own fault:
// postgres_test.go and mariadb_test.go (an async failover to a stale
// replica), sqlite_test.go (the file put back to an earlier copy),
// redis_test.go (a failover to a replica that missed the last grants,
// measured, not asserted), etcd_test.go (the leader of three members
// killed); pause_test.go is the focused case of one stale holder.
//
// Each run injects at least 3 pauses past the TTL, 3 kills and its
// backend's fault, then goes on alternating pauses and kills for
// IDGEN_LOCKCHECK_SECONDS. Knobs, environment variables:
//
//	IDGEN_LOCKCHECK_SECONDS  faults after the minimum, per backend
//	                         (default 10: a run takes 20–30 s)
//	IDGEN_LOCKCHECK_NOGUARD  1 runs the workers without the guard's
//	                         check: the run must then find violations
//	                         (it fails if it finds none)
package lockcheck
