package postgres_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/postgres"
)

// A leaf_alloc row whose update_time is NULL lists with a zero time
// instead of failing GET /admin/tags (issue 19 item 3).
func TestOpenTable_LeafAllocNullUpdateTime(t *testing.T) {
	srv := dbtest.Start(t, dbtest.Postgres)
	ctx := context.Background()
	db, err := sql.Open("pgx", srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`DROP TABLE IF EXISTS leaf_alloc`,
		`CREATE TABLE leaf_alloc (biz_tag VARCHAR(128) PRIMARY KEY, max_id BIGINT NOT NULL DEFAULT 1, step INT NOT NULL,
			description VARCHAR(256), update_time TIMESTAMP NULL)`,
		`INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('leaf-null', 7, 10)`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), `DROP TABLE IF EXISTS leaf_alloc`) })
	st, err := postgres.OpenTable(ctx, srv.DSN, "leaf_alloc")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx, nil); err != nil { // idgen's own tables beside Leaf's
		t.Fatal(err)
	}
	tags, err := st.ListTags(ctx)
	if err != nil || len(tags) != 1 || tags[0].MaxID != 7 || !tags[0].UpdatedAt.IsZero() {
		t.Fatalf("ListTags = %+v, %v; want leaf-null at 7 with no update time", tags, err)
	}
}
