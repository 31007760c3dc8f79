package snowflake

import (
	"fmt"
	"math"
	"time"
)

const (
	// idBits is every bit of an int64 but the sign, which stays clear so
	// that IDs are positive in every language and database that reads them.
	idBits = 63

	defaultEpochMs      = 1767225600000 // 2026-01-01T00:00:00Z
	defaultTimeBits     = 41
	defaultWorkerBits   = 10
	defaultSequenceBits = 12
)

// Layout is how an ID's 63 bits are divided between time, worker ID and
// sequence, and the epoch its time counts from. A Layout is valid by
// construction: the zero Layout is the default (41 time bits, 10 worker
// bits and 12 sequence bits from 2026-01-01 UTC), and NewLayout checks any
// other.
type Layout struct {
	epochMs                            int64
	timeBits, workerBits, sequenceBits uint8
}

// NewLayout returns the layout of IDs with the given bit widths whose time
// counts whole milliseconds from epoch.
//
// Zero arguments select the defaults: a zero epoch means 2026-01-01 UTC,
// and all three widths zero mean 41, 10 and 12. Otherwise each width must
// be positive and the three must sum to 63. The epoch must not be before
// 1970; any part of it below a millisecond is dropped.
//
// NewLayout does not know the time, so it cannot check that the epoch is
// in the past or that the time bits will last; New does that.
func NewLayout(epoch time.Time, timeBits, workerBits, sequenceBits int) (Layout, error) {
	if timeBits == 0 && workerBits == 0 && sequenceBits == 0 {
		timeBits, workerBits, sequenceBits = defaultTimeBits, defaultWorkerBits, defaultSequenceBits
	}
	if timeBits <= 0 || workerBits <= 0 || sequenceBits <= 0 {
		return Layout{}, fmt.Errorf("%w: TimeBits, WorkerBits and SequenceBits must all be zero (for the default 41/10/12) or all positive, got %d/%d/%d",
			ErrInvalidConfig, timeBits, workerBits, sequenceBits)
	}
	// Checked one by one so that huge widths cannot overflow the sum.
	if timeBits >= idBits || workerBits >= idBits || sequenceBits >= idBits || timeBits+workerBits+sequenceBits != idBits {
		return Layout{}, fmt.Errorf("%w: TimeBits+WorkerBits+SequenceBits must be 63, got %d+%d+%d",
			ErrInvalidConfig, timeBits, workerBits, sequenceBits)
	}
	epochMs := int64(defaultEpochMs)
	if !epoch.IsZero() {
		if epoch.Before(time.Unix(0, 0)) {
			return Layout{}, fmt.Errorf("%w: Epoch %s is before 1970-01-01; choose a later Epoch",
				ErrInvalidConfig, epoch.Format(time.RFC3339Nano))
		}
		// The last timestamp, epochMs + 2^timeBits - 1 ms, must fit in an
		// int64 of Unix milliseconds for Decode to be able to return it.
		if limit := time.UnixMilli(math.MaxInt64 - (int64(1) << timeBits)); epoch.After(limit) {
			return Layout{}, fmt.Errorf("%w: Epoch %s is too far in the future for %d TimeBits; choose an earlier Epoch",
				ErrInvalidConfig, epoch.Format(time.RFC3339Nano), timeBits)
		}
		epochMs = epoch.UnixMilli()
	}
	return Layout{
		epochMs:      epochMs,
		timeBits:     uint8(timeBits),
		workerBits:   uint8(workerBits),
		sequenceBits: uint8(sequenceBits),
	}, nil
}

// norm maps the zero Layout to the default one, so that every method can
// assume a complete layout.
func (l Layout) norm() Layout {
	if l.timeBits == 0 {
		return Layout{defaultEpochMs, defaultTimeBits, defaultWorkerBits, defaultSequenceBits}
	}
	return l
}

// Epoch returns the instant the time bits count from.
func (l Layout) Epoch() time.Time { return time.UnixMilli(l.norm().epochMs).UTC() }

// TimeBits returns the number of bits holding milliseconds since the epoch.
func (l Layout) TimeBits() int { return int(l.norm().timeBits) }

// WorkerBits returns the number of bits holding the worker ID.
func (l Layout) WorkerBits() int { return int(l.norm().workerBits) }

// SequenceBits returns the number of bits holding the sequence number.
func (l Layout) SequenceBits() int { return int(l.norm().sequenceBits) }

// MaxWorkerID returns the largest worker ID the layout can hold; worker IDs
// run from 0 to MaxWorkerID, so a lease table needs MaxWorkerID()+1 rows.
func (l Layout) MaxWorkerID() int64 { return int64(1)<<l.norm().workerBits - 1 }

// MaxSequence returns the largest sequence number; one worker can issue
// MaxSequence()+1 IDs per millisecond.
func (l Layout) MaxSequence() int64 { return int64(1)<<l.norm().sequenceBits - 1 }

// End returns the last millisecond the layout can represent. After it,
// generators return ErrTimeExhausted.
func (l Layout) End() time.Time {
	l = l.norm()
	return time.UnixMilli(l.epochMs + l.maxTime()).UTC()
}

func (l Layout) maxTime() int64 { return int64(1)<<l.timeBits - 1 }

// Parts are the fields of an ID.
type Parts struct {
	// Time is the start of the millisecond the ID was issued in, in UTC.
	Time time.Time
	// WorkerID is the worker ID of the generator that issued the ID.
	WorkerID int64
	// Sequence is the ID's position among those the worker issued in that
	// millisecond, from 0.
	Sequence int64
}

// Decode splits id into its parts. Every non-negative int64 is a valid ID
// in every layout; a negative one returns ErrInvalidID.
func (l Layout) Decode(id int64) (Parts, error) {
	if id < 0 {
		return Parts{}, fmt.Errorf("%w: %d is negative", ErrInvalidID, id)
	}
	l = l.norm()
	return Parts{
		Time:     time.UnixMilli(l.epochMs + id>>(l.workerBits+l.sequenceBits)).UTC(),
		WorkerID: id >> l.sequenceBits & l.MaxWorkerID(),
		Sequence: id & l.MaxSequence(),
	}, nil
}

// Encode joins parts into an ID, the inverse of Decode. Time is truncated
// to the millisecond. Encode returns ErrInvalidWorkerID if the worker ID
// does not fit, and ErrInvalidID if the time or sequence does not.
//
// Generators do not need Encode; it is for tools and tests, such as
// building the smallest ID of a millisecond to query a range by time.
func (l Layout) Encode(p Parts) (int64, error) {
	l = l.norm()
	if p.WorkerID < 0 || p.WorkerID > l.MaxWorkerID() {
		return 0, fmt.Errorf("%w: %d is not in 0..%d", ErrInvalidWorkerID, p.WorkerID, l.MaxWorkerID())
	}
	if p.Sequence < 0 || p.Sequence > l.MaxSequence() {
		return 0, fmt.Errorf("%w: sequence %d is not in 0..%d", ErrInvalidID, p.Sequence, l.MaxSequence())
	}
	// Compared as times first, so that absurd times cannot overflow the
	// millisecond arithmetic below.
	if p.Time.Before(l.Epoch()) || !p.Time.Before(l.End().Add(time.Millisecond)) {
		return 0, fmt.Errorf("%w: time %s is outside the layout's range %s to %s", ErrInvalidID,
			p.Time.Format(time.RFC3339Nano), l.Epoch().Format(time.RFC3339Nano), l.End().Format(time.RFC3339Nano))
	}
	ms := p.Time.UnixMilli() - l.epochMs
	return ms<<(l.workerBits+l.sequenceBits) | p.WorkerID<<l.sequenceBits | p.Sequence, nil
}

// Decode splits id into its parts in the default Layout. It is shorthand
// for Layout{}.Decode(id); IDs from generators with a configured layout
// need that generator's Decode or Layout.
func Decode(id int64) (Parts, error) { return Layout{}.Decode(id) }
