package idempotency_test

import (
	"context"
	"fmt"

	"github.com/idgen/idgen/idempotency"
)

// Do runs the function once per key; a retry gets its recorded answer.
func ExampleKeeper_Do() {
	k, err := idempotency.New(idempotency.NewMemory(), idempotency.Config{})
	if err != nil {
		panic(err)
	}
	defer k.Close()
	orders := 0
	createOrder := func(ctx context.Context) (idempotency.Answer, error) {
		orders++ // stop when ctx ends: the key's hold is lost then
		return idempotency.Answer{Status: 201, Body: fmt.Appendf(nil, "order %d", orders)}, nil
	}
	req := idempotency.Request{Scope: "user:ann", Key: "c7f1", Fingerprint: idempotency.Fingerprint("POST", "/orders", "book")}
	for range 2 {
		ans, replayed, err := k.Do(context.Background(), req, createOrder)
		fmt.Println(string(ans.Body), replayed, err)
	}
	fmt.Println("orders:", orders)
	// Output:
	// order 1 false <nil>
	// order 1 true <nil>
	// orders: 1
}
