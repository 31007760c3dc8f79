package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store"
	_ "github.com/idgen/idgen/store/sqlite" // registers sqlite:// (store/postgres and store/mysql register theirs)
)

// Open takes the backend from the DSN's scheme, as database/sql takes a
// driver by name: the same program serves from SQLite, PostgreSQL or
// MySQL by its configuration alone.
func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "idgen-example")
	defer os.RemoveAll(dir)

	st, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, "idgen.db"), store.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx, nil); err != nil {
		panic(err)
	}
	if err := st.CreateTag(ctx, segment.Tag{Name: "order", MaxID: 1000, Step: 100}); err != nil {
		panic(err)
	}
	r, err := st.Reserve(ctx, "order", 100)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Start, r.End)

	_, err = store.Open(ctx, "redis://cache:6379", store.Options{})
	fmt.Println(err != nil)
	// Output:
	// 1000 1100
	// true
}
