package mysql_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/mysql"
	"github.com/idgen/idgen/store/storetest"
)

func TestStore_SharedLeafAlloc(t *testing.T) {
	storetest.RunLeafAlloc(t, storetest.LeafBackend{
		Kind: dbtest.MySQL,
		Open: func(ctx context.Context, dsn string) (storetest.Store, error) {
			return mysql.OpenTable(ctx, dsn, "leaf_alloc")
		},
		SQL: func(dsn string) (*sql.DB, error) {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return nil, err
			}
			return sql.Open("mysql", cfg.FormatDSN())
		},
		CurrentSchema: "DATABASE()",
		Rebind:        func(q string) string { return q },
		// Leaf's scripts/leaf_alloc.sql.
		CreateTable: "CREATE TABLE `leaf_alloc` (\n" +
			"  `biz_tag` varchar(128) NOT NULL DEFAULT '',\n" +
			"  `max_id` bigint(20) NOT NULL DEFAULT '1',\n" +
			"  `step` int(11) NOT NULL,\n" +
			"  `description` varchar(256) DEFAULT NULL,\n" +
			"  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
			"  PRIMARY KEY (`biz_tag`)\n" +
			") ENGINE=InnoDB",
		RowLockWaits: func(ctx context.Context, db *sql.DB) (int64, error) {
			var name string
			var n int64
			err := db.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'`).Scan(&name, &n)
			return n, err
		},
	})
}
