package segment

import (
	"errors"

	"github.com/idgen/idgen"
)

// ErrInvalidConfig is returned by New for Options it cannot use, or no
// Store. The wrapping error says what to change.
var ErrInvalidConfig = errors.New("segment: invalid config")

// Errors a caller can cause; each maps to a 4xx answer in the server.
var (
	// ErrInvalidTag is returned when a tag is not 1 to 64 characters of
	// [A-Za-z0-9_.:-]. It is checked before any I/O. It is
	// idgen.ErrInvalidTag.
	ErrInvalidTag = idgen.ErrInvalidTag

	// ErrInvalidCount is returned when NextN is asked for fewer than one
	// ID. It is idgen.ErrInvalidCount.
	ErrInvalidCount = idgen.ErrInvalidCount

	// ErrTagNotFound is returned when a tag has no id_sequence row and the
	// allocator does not create tags on first use.
	ErrTagNotFound = errors.New("segment: tag not found: create it first (idgen tag add) or enable auto-create")

	// ErrTagExists is returned by Store.CreateTag when the tag already exists.
	ErrTagExists = errors.New("segment: tag already exists")

	// ErrInvalidStep is returned when a step or start value is out of range.
	ErrInvalidStep = errors.New("segment: invalid step or start")

	// ErrInvalidDescription is returned by Store.CreateTag for a
	// description that not every database can store: more than
	// MaxDescription characters, invalid UTF-8, or a NUL character, which
	// PostgreSQL's text types refuse. It is checked before any I/O, so
	// every backend refuses the same descriptions.
	ErrInvalidDescription = errors.New("segment: invalid description")

	// ErrTagLimit is returned for a tag the allocator does not hold yet
	// when it already holds Options.MaxTags tags. No row is created.
	ErrTagLimit = errors.New("segment: tag limit reached: the allocator holds Options.MaxTags tags")
)

// Errors of the allocator's own state or of its store.
var (
	// ErrUnavailable is returned when no ID can be handed out because the
	// store could not reserve a segment in time. It wraps the store's
	// error. The allocator keeps retrying with backoff and recovers by
	// itself once the store answers again.
	ErrUnavailable = errors.New("segment: store unavailable")

	// ErrExhausted is returned when a tag's max_id would pass the largest
	// int64, so no further segment can be reserved.
	ErrExhausted = errors.New("segment: tag exhausted: max_id reached the int64 limit")

	// ErrRegressed is returned, wrapped in ErrUnavailable, when the store
	// kept handing out ranges below ones this allocator reserved before
	// and could not be moved above them. No ID of such a range is handed
	// out.
	ErrRegressed = errors.New("segment: the store went back in time: its max_id is below ranges already reserved")

	// ErrRefused is matched by errors of a Store that will fail the same
	// way however often it is asked, such as a remote store that refuses
	// the caller's credentials. The allocator returns such an error as is,
	// not as ErrUnavailable, and asks the store again only after
	// Options.MaxBackoff.
	ErrRefused = errors.New("segment: the store refused the request")

	// ErrClosed is returned by calls made after Close.
	ErrClosed = errors.New("segment: allocator closed")

	// ErrOpaqueConflict is returned by a store whose two records of a
	// tag's opaque key (Tag.Opaque) disagree, as after a partial restore
	// from two backups: serving the tag under either key could repeat
	// IDs of the other, so it is served under neither until an operator
	// makes them agree.
	ErrOpaqueConflict = errors.New("segment: the store's records of the tag's opaque key disagree")
)
