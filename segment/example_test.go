package segment_test

import (
	"context"
	"fmt"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
)

func Example() {
	ctx := context.Background()
	// A real program opens store/sqlite, store/postgres or store/mysql.
	store := segmenttest.NewMemory()

	alloc, err := segment.New(store, segment.Options{AutoCreate: true})
	if err != nil {
		panic(err)
	}
	defer alloc.Close()

	id, err := alloc.Next(ctx, "order")
	if err != nil {
		panic(err)
	}
	fmt.Println("order", id)

	ids, _ := alloc.NextN(ctx, "order", 3)
	fmt.Println("batch", ids)

	// A hot loop keeps the handle and skips the tag lookup.
	seq, _ := alloc.Sequence("invoice")
	id, _ = seq.Next(ctx)
	fmt.Println("invoice", id)
	// Output:
	// order 1
	// batch [2 3 4]
	// invoice 1
}
