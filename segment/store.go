package segment

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idgen/idgen"
)

// Store reserves segments in the id_sequence table. Implementations live
// in store/sqlite, store/postgres and store/mysql, so that this package
// pulls in no database driver. The shared conformance suite in
// segment/segmenttest defines the exact behaviour.
type Store interface {
	// Reserve advances the tag's max_id by step in one transaction and
	// returns the reserved half-open range. A step below the row's own
	// step is raised to it, so step 0 means "the row's step". Near the
	// int64 limit the range is cut to end at the largest int64 (see
	// ClampEnd), so that every ID below it is handed out. It returns
	// ErrTagNotFound when the tag has no row and ErrExhausted when no ID
	// is left.
	Reserve(ctx context.Context, tag string, step int64) (Range, error)

	// CreateTag inserts a new row. It returns ErrTagExists when the tag
	// already has one.
	CreateTag(ctx context.Context, t Tag) error
}

// Releaser is implemented by stores that can take back the unused end of
// a segment. The allocator finds it by type assertion and uses it on
// Close to avoid leaving gaps.
type Releaser interface {
	// Release moves the tag's max_id from to back to from, but only if
	// max_id still equals to, that is, only if nobody reserved past the
	// range since. It reports whether the range was taken back.
	Release(ctx context.Context, tag string, from, to int64) (bool, error)
}

// Raiser is implemented by stores that can move a tag's max_id up to a
// floor. The allocator uses it to repair a regression: a store that went
// back in time (a restore, a failover to a replica that lost the last
// commits, a max_id lowered by hand) is moved above every ID this process
// has handed out before it reserves again.
type Raiser interface {
	// Raise sets the tag's max_id to to if it is lower, and reports
	// whether it changed.
	Raise(ctx context.Context, tag string, to int64) (bool, error)
}

// MaxOpaqueLen bounds Tag.Opaque, the width of its column.
const MaxOpaqueLen = 64

// Range is a reserved segment: the IDs Start, Start+1, …, End-1.
type Range struct {
	Start int64
	End   int64
	// Step is the row's configured step at the time of the reservation,
	// the floor for the dynamic step.
	Step int64
}

// ClampEnd returns the end of a reservation of step IDs from maxID: a
// step that would pass the largest int64 is cut to what is left, so a tag
// near the limit hands out every ID below it instead of refusing a grown
// step while thousands remain. It returns ErrExhausted when nothing is
// left. Store implementations use it, so that all of them agree.
func ClampEnd(tag string, maxID, step int64) (int64, error) {
	if maxID == math.MaxInt64 {
		return 0, fmt.Errorf("%w: tag %q is at %d", ErrExhausted, tag, maxID)
	}
	return maxID + min(step, math.MaxInt64-maxID), nil
}

// Size returns the number of IDs in the range.
func (r Range) Size() int64 { return r.End - r.Start }

// Tag is one row of id_sequence.
type Tag struct {
	Name string
	// MaxID is the first ID not reserved yet. When creating a tag it is the
	// first ID the tag hands out.
	MaxID       int64
	Step        int64
	Description string
	UpdatedAt   time.Time
	// Opaque is the fingerprint of the key (opaque.Key.Fingerprint) under
	// which every instance hands out this tag's IDs encrypted, or "" for
	// a plain tag. It is set when the tag is created and never changes:
	// plain and opaque IDs of one counter could collide. The allocator
	// hands out counters either way; opaque.Generator encodes them.
	Opaque string
}

// Validate checks a row before it is created, so that every Store
// refuses the same input before any I/O: a valid name (idgen.CheckTag),
// a step from 1 to 2^31-1
// (an INT column in every dialect), a first ID from 1 up to where one
// step still fits below the int64 limit, so that no reservation's
// arithmetic can wrap, and a description every database can store
// (CheckDescription).
func (t Tag) Validate() error {
	if err := idgen.CheckTag(t.Name); err != nil {
		return err
	}
	if t.Step < 1 || t.Step > math.MaxInt32 {
		return fmt.Errorf("%w: step %d is not from 1 to %d", ErrInvalidStep, t.Step, math.MaxInt32)
	}
	if len(t.Opaque) > MaxOpaqueLen {
		return fmt.Errorf("%w: key fingerprint of %d bytes, at most %d", ErrInvalidTag, len(t.Opaque), MaxOpaqueLen)
	}
	if t.MaxID < 1 || t.MaxID > math.MaxInt64-t.Step {
		// 0 is no ID: most databases and languages read it as unset.
		return fmt.Errorf("%w: start %d is not from 1 to %d (the int64 limit less one step); IDs are never 0", ErrInvalidStep, t.MaxID, math.MaxInt64-t.Step)
	}
	return CheckDescription(t.Description)
}

// MaxDescription is the most characters a tag's description holds: the
// description columns are VARCHAR(256).
const MaxDescription = 256

// CheckDescription checks a tag's description: at most MaxDescription
// characters of valid UTF-8, without NUL, which PostgreSQL cannot store
// in text and the other databases would keep where PostgreSQL fails.
func CheckDescription(d string) error {
	switch {
	case !utf8.ValidString(d):
		return fmt.Errorf("%w: description is not valid UTF-8", ErrInvalidDescription)
	case strings.ContainsRune(d, 0):
		return fmt.Errorf("%w: description holds a NUL character (U+0000), which no description may hold", ErrInvalidDescription)
	case utf8.RuneCountInString(d) > MaxDescription:
		return fmt.Errorf("%w: description is limited to %d characters, got %d", ErrInvalidDescription, MaxDescription, utf8.RuneCountInString(d))
	}
	return nil
}
