package opaque_test

import (
	"fmt"

	"github.com/idgen/idgen/opaque"
)

func Example() {
	// In production the key comes from a file or an environment variable,
	// the same on every instance.
	key, err := opaque.ParseKey("000102030405060708090a0b0c0d0e0f")
	if err != nil {
		panic(err)
	}
	id, _ := key.Encode("order", 1001) // the 1001st order
	counter, _ := key.Decode("order", id)
	fmt.Println(id > 0, id != 1001, counter, key.Fingerprint() != "")
	// Output: true true 1001 true
}
