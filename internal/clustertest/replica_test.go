package clustertest

import (
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testkit"
)

// timeoutReplay bounds the wait for a replica to apply a commit.
const timeoutReplay = 30 * time.Second

// The replica rigs must lose what they are meant to lose: a commit made
// after the replica stopped is gone after the promotion, one made before
// is kept, and the promoted replica takes writes.

func TestPGReplicaLosesCommitsAfterStop(t *testing.T) {
	p := StartPGReplica(t)
	for _, q := range []string{"CREATE TABLE kept (v int)", "INSERT INTO kept VALUES (1)"} {
		if _, err := p.Primary.Query(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := testkit.WaitFor(timeoutReplay, pollEvery, func() error {
		_, err := p.Replica.Query("SELECT v FROM kept")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := p.StopReplica(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Primary.Query("INSERT INTO kept VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	lost, err := p.KillPrimary()
	if err != nil {
		t.Fatal(err)
	}
	if lost <= 0 {
		t.Errorf("the replica lacked %d bytes of WAL at the kill, want some", lost)
	}
	if err := p.Promote(); err != nil {
		t.Fatalf("%v\n%s", err, p.Logs(20))
	}
	if got, err := p.Replica.Query("SELECT string_agg(v::text, ',' ORDER BY v) FROM kept"); err != nil || got != "1" {
		t.Errorf("rows on the promoted replica: %q, %v; want 1 (2 was committed after the replica stopped)", got, err)
	}
	if tl, err := p.Replica.Query("SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)"); err != nil || tl == "00000001" {
		t.Errorf("timeline of the promoted replica: %q, %v; want a new one", tl, err)
	}
	if _, err := p.Replica.Query("INSERT INTO kept VALUES (3)"); err != nil {
		t.Errorf("the promoted replica refused a write: %v", err)
	}
}

func TestMariaDBReplicaLosesCommitsAfterStop(t *testing.T) {
	r := StartMariaDBReplica(t)
	r.SQL(r.Primary, "CREATE TABLE idgen.kept (v int); INSERT INTO idgen.kept VALUES (1)")
	if err := testkit.WaitFor(timeoutReplay, pollEvery, func() error {
		_, err := r.query(r.Replica, "SELECT v FROM idgen.kept")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.StopReplicaIO(); err != nil {
		t.Fatal(err)
	}
	r.SQL(r.Primary, "INSERT INTO idgen.kept VALUES (2)")
	primary, replica, err := r.KillPrimary()
	if err != nil {
		t.Fatal(err)
	}
	if primary == replica {
		t.Errorf("GTID positions at the kill: primary %q, replica %q; want the replica behind", primary, replica)
	}
	if err := r.Promote(); err != nil {
		t.Fatalf("%v\n%s", err, r.Logs(20))
	}
	if got := strings.TrimSpace(r.SQL(r.Replica, "SELECT GROUP_CONCAT(v ORDER BY v) FROM idgen.kept")); got != "1" {
		t.Errorf("rows on the promoted replica: %q; want 1 (2 was committed after the IO thread stopped)", got)
	}
	r.SQL(r.Replica, "INSERT INTO idgen.kept VALUES (3)")
}
