// Package store is idgen's SQL store: the segment table, the worker
// leases of snowflake mode, fencing and the idempotency keys, written
// once over every SQL backend. The backends are store/sqlite,
// store/postgres and store/mysql.
package store

import "github.com/idgen/idgen/store/internal/sqlstore"

// The sequence tables a store can reserve segments from. IDSequence is
// idgen's own, which its migrations create; LeafAlloc is Meituan Leaf's,
// used as it is, so that Leaf's servers and idgen can serve the same
// tags from one table while callers move.
const (
	IDSequence = sqlstore.IDSequenceName
	LeafAlloc  = sqlstore.LeafAllocName
)

// CheckTable returns an error unless name is a known sequence table;
// "" means IDSequence.
func CheckTable(name string) error {
	_, err := sqlstore.ParseSequenceTable(name)
	return err
}
