package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/sqlite"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "idgen-example")
	defer os.RemoveAll(dir)

	store, err := sqlite.Open(ctx, "sqlite://"+filepath.Join(dir, "idgen.db"))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if _, err := store.Migrate(ctx, nil); err != nil {
		panic(err)
	}
	if err := store.CreateTag(ctx, segment.Tag{Name: "order", MaxID: 1000, Step: 100}); err != nil {
		panic(err)
	}

	alloc, err := segment.New(store, nil)
	if err != nil {
		panic(err)
	}
	defer alloc.Close()
	for range 3 {
		id, _ := alloc.Next(ctx, "order")
		fmt.Println(id)
	}
	// Output:
	// 1000
	// 1001
	// 1002
}
