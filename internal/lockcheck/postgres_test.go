package lockcheck

import (
	"fmt"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/clustertest"
)

// TestPostgres checks the SQL lock store on an asynchronous PostgreSQL
// primary and replica: the replica stops receiving, grants go on on the
// primary alone, the primary is killed with SIGKILL and the stale
// replica promoted under the running workers.
func TestPostgres(t *testing.T) {
	skipShort(t)
	t.Parallel()
	p := clustertest.StartPGReplica(t)
	run(t, backend{name: "postgres", dsn: p.DSN, failover: func(t *testing.T, f *fleet) (string, error) {
		if err := p.StopReplica(); err != nil {
			return "", fmt.Errorf("stop the replica: %w", err)
		}
		if err := f.waitGrants(f.grantCount(), 5, 30*time.Second); err != nil {
			return "", fmt.Errorf("grants on the primary alone: %w", err)
		}
		lost, err := p.KillPrimary()
		if err != nil {
			return "", fmt.Errorf("kill the primary: %w", err)
		}
		killed := time.Now()
		if err := p.Promote(); err != nil {
			return "", fmt.Errorf("promote the replica: %w\n%s", err, p.Logs(20))
		}
		return fmt.Sprintf("failover: replica stopped, 5 grants on the primary alone, kill -9 of the primary (%d bytes of WAL the replica lacked), replica promoted after %v",
			lost, time.Since(killed).Round(100*time.Millisecond)), nil
	}})
}
