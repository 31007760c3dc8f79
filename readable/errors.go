package readable

import (
	"errors"
	"fmt"

	"github.com/idgen/idgen"
)

// Errors of Encode, which are the caller's mistakes.
var (
	// ErrInvalidTag is returned by Encode when the tag is not 1 to 64
	// characters of [A-Za-z0-9_.:-]. It is idgen.ErrInvalidTag.
	ErrInvalidTag = idgen.ErrInvalidTag

	// ErrNegativeID is returned by Encode when the ID is below zero. IDs
	// handed out by idgen never are.
	ErrNegativeID = errors.New("readable: negative ID: only IDs of 0 or more can be encoded")
)

// ErrInvalid is returned by Decode when its input is not a readable ID as
// Encode writes it: a typo, a truncated copy, an ID of another format. The
// wrapping error says what is wrong; callers should match with errors.Is
// and not parse the message, which is meant for people.
var ErrInvalid = errors.New("readable: invalid ID")

// invalid wraps ErrInvalid with a description of what is wrong.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func negativeID(id int64) error { return fmt.Errorf("%w: got %d", ErrNegativeID, id) }
