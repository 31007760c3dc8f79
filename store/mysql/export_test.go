package mysql

import "github.com/idgen/idgen/store/internal/sqlstore"

// UnfencedForTest is s's reservation without the identity check, what
// every reservation was before fencing, for the benchmark beside it.
func UnfencedForTest(s *Store) *sqlstore.Store {
	return sqlstore.New(sqlstore.StdDB{DB: s.DB()}, dialect)
}
