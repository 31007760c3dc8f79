package ff1_test

import (
	"fmt"

	"github.com/idgen/idgen/opaque/internal/ff1"
)

// An order counter encrypted to a 63-bit value and back: the same counter
// under another tweak (another tag) maps elsewhere.
func Example() {
	key := []byte("0123456789abcdef") // 16 bytes: AES-128; keep real keys secret
	c, err := ff1.New(key, 2)
	if err != nil {
		panic(err)
	}
	orders, err := c.Uint(63, []byte("order"))
	if err != nil {
		panic(err)
	}
	enc, _ := orders.Encrypt(1001)
	dec, _ := orders.Decrypt(enc)
	fmt.Println(enc != 1001, enc < 1<<63, dec)
	// Output: true true 1001
}
