package mysql

import "github.com/idgen/idgen/store/internal/sqlstore"

// UnfencedForTest is s's reservation without the identity check, what
// every reservation was before fencing, for the benchmark beside it.
func UnfencedForTest(s *Store) *sqlstore.Store {
	return sqlstore.New(sqlstore.StdDB{DB: s.DB()}, unfenced)
}

// unfenced is the dialect without fencing.
var unfenced = func() sqlstore.Dialect {
	sp := spelling
	sp.Identity = nil
	d, err := sqlstore.NewDialect(sp, sqlstore.IDSequence)
	if err != nil {
		panic(err)
	}
	return d
}()

// IsRetryableForTest is isRetryable, for tests that write outside the
// store's own transactions.
var IsRetryableForTest = isRetryable
