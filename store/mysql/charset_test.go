package mysql_test

import (
	"context"
	"testing"

	"github.com/testcontainers/testcontainers-go"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/mysql"
)

// On a server whose default charset is latin1 (and collation
// case-insensitive), the schema still stores any UTF-8 description and
// tells ORDER from order: migration 00007 sets utf8mb4 and a binary
// collation on id_sequence, whatever the server's default.
func TestStore_Latin1ServerDefault(t *testing.T) {
	srv := dbtest.StartContainer(t, dbtest.MySQL, func(r *testcontainers.ContainerRequest) {
		r.Cmd = []string{"--character-set-server=latin1", "--collation-server=latin1_swedish_ci"}
	})
	ctx := context.Background()
	st, err := mysql.Open(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var charset string
	if err := st.DB().QueryRowContext(ctx, `SELECT @@character_set_server`).Scan(&charset); err != nil || charset != "latin1" {
		t.Fatalf("server charset %q, %v; the test needs latin1", charset, err)
	}
	if _, err := st.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	segmenttest.Run(t, func(*testing.T) segment.Store { return st })
}
