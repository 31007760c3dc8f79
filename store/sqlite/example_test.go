package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/snowflake"
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

	alloc, err := segment.New(store, segment.Options{})
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

// Snowflake mode: worker IDs leased from the same file.
func ExampleStore_Leases() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "idgen-example")
	defer os.RemoveAll(dir)

	store, err := sqlite.Open(ctx, "sqlite://"+filepath.Join(dir, "idgen.db"))
	if err != nil {
		panic(err)
	}
	defer store.Close() // after the generator's Close, which needs the store
	if _, err := store.Migrate(ctx, nil); err != nil {
		panic(err)
	}

	leases := store.Leases() // a snowflake.LeaseTable: a LeaseStore that also lists its rows
	gen, err := snowflake.NewLeased(ctx, leases, snowflake.LeasedConfig{})
	if err != nil {
		panic(err)
	}
	id, err := gen.Next(ctx, "order")
	if err != nil {
		panic(err)
	}
	p, _ := gen.Layout().Decode(id)
	fmt.Println(gen.WorkerID(), p.WorkerID, gen.Ready())

	// Close releases the worker ID, recording the last timestamp used.
	if err := gen.Shutdown(ctx); err != nil {
		panic(err)
	}
	workers, _ := leases.Workers(ctx)
	fmt.Printf("worker %d: owner %q, last timestamp recorded: %v\n", workers[0].WorkerID, workers[0].Owner, !workers[0].LastTimestamp.IsZero())
	// Output:
	// 0 0 <nil>
	// worker 0: owner "", last timestamp recorded: true
}

// Locks from the same file: one user's checkout at a time, each grant
// with a fencing token that the protected write must carry.
func ExampleStore_Locks() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "idgen-example")
	defer os.RemoveAll(dir)

	store, err := sqlite.Open(ctx, "sqlite://"+filepath.Join(dir, "idgen.db"))
	if err != nil {
		panic(err)
	}
	defer store.Close() // after the leases are released
	if _, err := store.Migrate(ctx, nil); err != nil {
		panic(err)
	}
	locks, err := lock.New(store.Locks(), lock.Options{})
	if err != nil {
		panic(err)
	}
	for range 2 {
		err := locks.Do(ctx, "checkout:user-42", "instance-a", 10*time.Second, func(ctx context.Context, le *lock.Lease) error {
			fmt.Println("token", le.Token()) // written with the order, checked by the resource
			return nil
		})
		if err != nil {
			panic(err)
		}
	}
	// Output:
	// token 1
	// token 2
}
