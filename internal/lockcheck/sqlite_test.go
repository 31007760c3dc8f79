package lockcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSQLite checks the SQL lock store on a SQLite file that is put
// back to an earlier copy: the workers are killed, the file (with its
// -wal and -shm) copied, the workers restarted; after more grants they
// are killed again, the copy put back and the workers restarted on it.
// What the store keeps beside the file is not put back, so it can tell.
func TestSQLite(t *testing.T) {
	skipShort(t)
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "locks.db")
	files := []string{"locks.db", "locks.db-wal", "locks.db-shm"}
	run(t, backend{name: "sqlite", dsn: "sqlite://" + path, failover: func(t *testing.T, f *fleet) (string, error) {
		backup := t.TempDir()
		restart := func(do func() error) error {
			live := f.live()
			for _, p := range live {
				f.kill(p)
			}
			if err := do(); err != nil {
				return err
			}
			for _, p := range live {
				f.start(p.name + "r")
			}
			return nil
		}
		if err := restart(func() error { return copyFiles(dir, backup, files) }); err != nil {
			return "", fmt.Errorf("copy: %w", err)
		}
		from := f.grantCount()
		if err := f.waitGrants(from, 10, 30*time.Second); err != nil {
			return "", fmt.Errorf("grants after the copy: %w", err)
		}
		if err := restart(func() error { return copyFiles(backup, dir, files) }); err != nil {
			return "", fmt.Errorf("put back: %w", err)
		}
		return fmt.Sprintf("restore: every worker killed, the file copied, %d grants, every worker killed, the copy put back", f.grantCount()-from), nil
	}})
}

// copyFiles copies the named files that exist from one directory to
// another, removing those that do not exist in from.
func copyFiles(from, to string, names []string) error {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(from, n))
		if os.IsNotExist(err) {
			if err := os.Remove(filepath.Join(to, n)); err != nil && !os.IsNotExist(err) {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, n), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}
