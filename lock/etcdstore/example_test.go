package etcdstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/lock/etcdstore"
)

// A Locker over etcd: the work runs while the lease is held, and passes
// the token to the resource it writes, which refuses lower tokens.
func Example() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	store, err := etcdstore.New(ctx, cli, etcdstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	locker, err := lock.New(store, lock.Options{})
	if err != nil {
		log.Fatal(err)
	}
	err = locker.Do(ctx, "checkout:user-42", "worker-7", 10*time.Second, func(ctx context.Context, le *lock.Lease) error {
		fmt.Println("token", le.Token()) // the key's create revision: pass it to the Guard
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
