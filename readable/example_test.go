package readable_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/idgen/idgen/readable"
)

func ExampleEncode() {
	s, err := readable.Encode("order", 123456789)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s)
	// Output: order_BukQL3x
}

func ExampleDecode() {
	// The tag may contain '_': the number starts after the last one.
	tag, id, err := readable.Decode("a_b_j1T")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(tag, id)
	// Output: a_b 42
}

// A typo, in the number or in the tag, is caught instead of naming another
// ID.
func ExampleDecode_typo() {
	for _, s := range []string{
		"order_BukQL3x", // as written
		"order_BukQK3x", // L mistyped as K
		"order_BkuQL3x", // u and k swapped
		"ordre_BukQL3x", // e and r swapped in the tag
	} {
		_, id, err := readable.Decode(s)
		fmt.Println(s, id, errors.Is(err, readable.ErrInvalid))
	}
	// Output:
	// order_BukQL3x 123456789 false
	// order_BukQK3x 0 true
	// order_BkuQL3x 0 true
	// ordre_BukQL3x 0 true
}

func ExampleDecode_error() {
	_, _, err := readable.Decode("order_BukQK3x")
	fmt.Println(err)
	// Output: readable: invalid ID: bad checksum: look for a mistyped character or two swapped ones
}
