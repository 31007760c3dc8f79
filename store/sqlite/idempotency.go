package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/idgen/idgen/store/internal/sqlstore"
)

// openIdem opens the two pools of the idempotency key store, with one
// connection each, so that keyed requests queue for SQLite's one write
// lock in Go, in order, rather than poll for it against each other
// (busy_timeout) and time out under load: answers are recorded with
// synchronous FULL; the other statements run with synchronous NORMAL,
// whose commits reach the disk with the next FULL one (one WAL file),
// since losing them in a crash is harmless (see
// store.Store.Idempotency). If the file cannot be opened again, both run
// on the Store's pool.
func openIdem(path string) (durable, lazy sqlstore.DB, closeIdem func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err1 := openFile(ctx, path, "FULL")
	l, err2 := openFile(ctx, path, "NORMAL")
	pools := []*sql.DB{l, d}
	closeAll := func() {
		for _, db := range pools {
			if db != nil {
				_ = db.Close()
			}
		}
	}
	if err1 != nil || err2 != nil {
		closeAll()
		return nil, nil, nil
	}
	for _, db := range pools {
		db.SetMaxOpenConns(1)
	}
	return sqlstore.StdDB{DB: d}, sqlstore.StdDB{DB: l}, closeAll
}
