package sim

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
)

// The database's history: snapshots of the SQLite file (VACUUM INTO,
// between steps) that a loss puts back in one transaction under the
// running processes: every table, with the store_id kept (a restore) or
// changed (a failover), or id_sequence alone.

// snapshot is a copy of the database after some number of commits.
type snapshot struct {
	path    string
	commits int64
	kind    snapKind
}

// snapKind says what a snapshot was taken just before: going back to it
// loses that.
type snapKind int

const (
	snapPlain  snapKind = iota
	snapCreate          // a tag's creation
	snapClaim           // a process's lease claims
)

// history holds the snapshots and the admin pool that takes and restores them.
type history struct {
	db    *sql.DB
	dir   string
	snaps []snapshot // oldest first, at most keepSnaps
	n     int
}

const keepSnaps = 10

func openHistory(ctx context.Context, dir, path string) (*history, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return &history{db: db, dir: dir}, nil
}

func (h *history) snap(ctx context.Context, commits int64, kind snapKind) error {
	h.n++
	s := snapshot{path: filepath.Join(h.dir, fmt.Sprintf("snap%d.db", h.n)), commits: commits, kind: kind}
	if _, err := h.db.ExecContext(ctx, "VACUUM INTO ?", s.path); err != nil {
		return fmt.Errorf("sim: snapshot: %w", err)
	}
	h.snaps = append(h.snaps, s)
	if len(h.snaps) > keepSnaps {
		h.snaps = h.snaps[1:]
	}
	return nil
}

// restore puts tables (nil: all) back to s, and gives the store a new
// store_id if storeID is not "".
func (h *history) restore(ctx context.Context, s snapshot, tables []string, storeID string) (err error) {
	c, err := h.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if _, err := c.ExecContext(ctx, "ATTACH DATABASE ? AS snap", s.path); err != nil {
		return fmt.Errorf("sim: attach %s: %w", s.path, err)
	}
	defer func() {
		if _, derr := c.ExecContext(ctx, "DETACH DATABASE snap"); err == nil {
			err = derr
		}
	}()
	if tables == nil {
		var all string
		if err := c.QueryRowContext(ctx, "SELECT group_concat(name, ' ') FROM (SELECT name FROM snap.sqlite_master "+
			"WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name)").Scan(&all); err != nil {
			return err
		}
		tables = strings.Fields(all)
	}
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, t := range tables {
		for _, q := range []string{"DELETE FROM main.%[1]q", "INSERT INTO main.%[1]q SELECT * FROM snap.%[1]q"} {
			if _, err := tx.ExecContext(ctx, fmt.Sprintf(q, t)); err != nil {
				return fmt.Errorf("sim: restore %s: %w", t, err)
			}
		}
	}
	if storeID != "" {
		if _, err := tx.ExecContext(ctx, "UPDATE idgen_fence SET store_id = ? WHERE id = 1", storeID); err != nil {
			return fmt.Errorf("sim: new store_id: %w", err)
		}
	}
	return tx.Commit()
}
