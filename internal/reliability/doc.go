// Package reliability holds idgen's reliability tests: real `idgen serve`
// processes on real PostgreSQL and MySQL servers, driven over real HTTP
// while processes are killed with SIGKILL, the database is restarted or
// frozen, a worker's persisted clock floor is moved ahead, and malformed
// requests arrive.
//
// It exists because the guarantees that matter most — no ID handed out
// twice, IDs that increase within a process, a worker ID never shared by
// two live processes, an outage that yields quick 503s rather than a pile
// of hung requests — are properties of the whole system under failure,
// which unit tests of the segment and snowflake packages cannot show on
// their own. Every test here counts every ID it receives and fails on a
// single duplicate.
//
// The package has tests only. TestScaleOut runs three instances on one
// database (PostgreSQL and MySQL) and kills one of them mid-load; TestFaults
// runs the fault scenarios on PostgreSQL. TestClusterPatroni and
// TestClusterGalera run three instances on real database clusters
// (internal/clustertest) while the leader, or a node, is killed.
// TestReplicas fails over to a stale asynchronous PostgreSQL or MariaDB
// replica under two running processes and starts a third;
// TestLostCreation does so after two tags were created and served
// during the lag, and the third process creates them again; TestRestore
// puts a PostgreSQL data directory or a SQLite file back to an earlier
// copy, under running processes and with every process restarted;
// TestOneTableRestore sets id_sequence alone back. Each ends with a
// table of faults injected, IDs issued, duplicates, errors by code and
// the longest stall, printed with t.Logf and, with
// IDGEN_RELIABILITY_WRITE=1, written to results/latest.md (the database
// tests: results/clusters.md). docs/reliability.md describes the scenarios and
// shows the latest table.
//
// Knobs, all environment variables:
//
//	IDGEN_SCALEOUT_SECONDS  load time of TestScaleOut per database (default 10)
//	IDGEN_FAULT_PROFILE     "ci" (default: 60 s of kills, one outage of each
//	                        kind) or "long" (300 s of kills, three outages)
//	IDGEN_FAULT_SEED        seed of the random kill schedule (default: time)
//	IDGEN_CLUSTER_PROFILE   "ci" (default: one failover per replication
//	                        mode, one Galera node kill) or "long" (four
//	                        failovers each, three node kills)
//	IDGEN_LOSTCREATION_RUNS runs of TestLostCreation (default 2)
//	IDGEN_ONETABLE_RUNS     runs of TestOneTableRestore (default 6)
//	IDGEN_RELIABILITY_WRITE 1 writes results/latest.md (results/clusters.md
//	                        for the cluster tests)
//	IDGEN_RELIABILITY_TAGS  build tags of the idgen binary under test:
//	                        idgenplant with IDGEN_PLANT=F3 re-opens a fixed
//	                        hole (store/internal/plant), to show that a test
//	                        finds it; for that check only
//
// They need Docker, like the other integration tests (see store/dbtest);
// the cluster tests need Debian's cluster packages and root instead.
package reliability
