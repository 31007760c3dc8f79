// Package lockbench measures idgen's lock backends against a floor on
// the same server, in one run, as issue 41 asks: an uncontended acquire
// and release through each lock.Backend and through a lock.Locker
// (whose Lease starts and stops a watchdog), beside the least a lock on
// that server can cost, and on Redis beside bsm/redislock and
// go-redsync; and the hand-off from a release to a queued waiter.
//
// It lives in the bench module so that the peers it imports never
// become dependencies of github.com/idgen/idgen. It has benchmarks only,
// so a plain go test compiles it and runs nothing. Each backend's server
// comes from store/dbtest, as the backends' own tests get theirs: a
// backend whose server is missing is skipped (failed where CI or
// IDGEN_REQUIRE_DOCKER=1 says it must be there). The command that
// produced docs/benchmarks.md's "Locks" section is in that section.
package lockbench
