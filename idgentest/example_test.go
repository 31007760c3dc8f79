package idgentest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/idgen/idgen/idgentest"
)

// A service's own test gets a real idgen server: the client could be
// handed to the code under test.
func ExampleNewServer() {
	var t *testing.T // your test's *testing.T

	srv := idgentest.NewServer(t, &idgentest.Options{Mode: "snowflake"})
	id, err := srv.Client().Next(context.Background(), "order")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(id > 0)
}

// A program that embeds idgen as a library gets an allocator over a
// throw-away store.
func ExampleNewAllocator() {
	var t *testing.T // your test's *testing.T

	alloc := idgentest.NewAllocator(t)
	id, err := alloc.Next(context.Background(), "order")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(id)
}
