package lockcheck

import (
	"fmt"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/clustertest"
)

// TestMariaDB checks the SQL lock store on an asynchronous MariaDB
// primary and GTID replica: the replica's IO thread stops, grants go on
// on the primary alone, the primary is killed with SIGKILL and the stale
// replica promoted under the running workers.
func TestMariaDB(t *testing.T) {
	skipShort(t)
	t.Parallel()
	r := clustertest.StartMariaDBReplica(t)
	run(t, backend{name: "mariadb", dsn: r.DSN(""), failover: func(t *testing.T, f *fleet) (string, error) {
		if err := r.StopReplicaIO(); err != nil {
			return "", fmt.Errorf("stop the replica's IO thread: %w", err)
		}
		if err := f.waitGrants(f.grantCount(), 5, 30*time.Second); err != nil {
			return "", fmt.Errorf("grants on the primary alone: %w", err)
		}
		primary, replica, err := r.KillPrimary()
		if err != nil {
			return "", fmt.Errorf("kill the primary: %w", err)
		}
		killed := time.Now()
		if err := r.Promote(); err != nil {
			return "", fmt.Errorf("promote the replica: %w\n%s", err, r.Logs(20))
		}
		return fmt.Sprintf("failover: replica's IO thread stopped, 5 grants on the primary alone, kill -9 of the primary (GTID %s; the replica had %s), replica promoted after %v",
			primary, replica, time.Since(killed).Round(100*time.Millisecond)), nil
	}})
}
