package snowflake

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

var (
	// ErrLayoutMismatch is returned by LayoutClaimer.ClaimLayout, and so by
	// NewLeased, when the lease table's worker IDs have issued IDs in
	// another layout or epoch that the claim's IDs could equal. The
	// wrapping error names both layouts.
	ErrLayoutMismatch = errors.New("snowflake: layout mismatch")

	// ErrLayoutInUse is returned by Relayout while a lease on the table is
	// live: its holder may go on issuing IDs in the old layout.
	ErrLayoutInUse = errors.New("snowflake: layout in use")
)

// LayoutClaimer is a LeaseStore that records the layouts its worker IDs
// issue IDs in, so that no claim can reissue an ID under another layout or
// epoch. Leased finds it by type assertion and then claims only through
// it; so do all of idgen's stores.
type LayoutClaimer interface {
	// ClaimLayout is ClaimStatic of static if static >= 0, and otherwise
	// ClaimRange of the lowest free worker ID in workers, for IDs in
	// layout. In the same transaction it admits the claim against the
	// table's layout records (AdmitLayout) and records it; the first claim
	// of a table records its layout. It returns an error wrapping
	// ErrLayoutMismatch, and leases nothing, if another layout's IDs could
	// equal this claim's. The Lease's LastTimestamp is at least the
	// layout's NotBefore.
	ClaimLayout(ctx context.Context, owner string, now time.Time, ttl time.Duration, layout Layout, workers WorkerRange, static int64) (Lease, error)
}

// LayoutRecord is one layout recorded for a lease table: the IDs its
// worker IDs have issued, or may issue, in that layout.
type LayoutRecord struct {
	// Layout is the epoch and bit widths.
	Layout Layout
	// Workers spans every worker ID a claim in Layout has asked for, so
	// every ID issued in Layout has a worker ID in it. The zero range
	// means none yet.
	Workers WorkerRange
	// NotBefore is a floor for every claim in Layout, set by Relayout so
	// that the IDs of the new layout are above those of the old ones. The
	// zero Time means none.
	NotBefore time.Time
	// Retired is the zero Time while Layout is in use. After Relayout it
	// is a time at or after every ID issued in Layout, and claims in
	// Layout are admitted only where their IDs cannot equal those.
	Retired time.Time
}

// String returns the layout's widths and epoch, as "41/10/12 epoch
// 2026-01-01T00:00:00Z".
func (l Layout) String() string {
	l = l.norm()
	return strconv.Itoa(int(l.timeBits)) + "/" + strconv.Itoa(int(l.workerBits)) + "/" + strconv.Itoa(int(l.sequenceBits)) +
		" epoch " + l.Epoch().Format(time.RFC3339Nano)
}

func (r LayoutRecord) String() string {
	s := r.Layout.String()
	if r.Workers != (WorkerRange{}) {
		s += " on worker IDs " + r.Workers.String()
	}
	if !r.Retired.IsZero() {
		s += ", retired at " + r.Retired.Format(time.RFC3339Nano)
	}
	return s
}

// AdmitLayout decides a claim of worker IDs in workers for IDs in layout,
// given the records of the lease table, oldest first. It returns the
// record to store at index at: records[at] updated to span workers (or
// replaced, if no claim has used it), or, if at == len(records), a new
// record to append. The claim's floor is the
// returned record's NotBefore.
//
// A claim is admitted if, against every other record, one of two things
// holds, so that no ID it can issue equals one the record's layout has
// issued or may issue:
//
//   - Some bits of an ID hold worker-ID bits in both layouts, and the two
//     spans of worker IDs never agree in them. With equal bit widths that
//     is simply disjoint worker IDs, whatever the two epochs.
//   - One layout is retired, and every ID of the other, from its
//     NotBefore on, is greater than every ID the retired one issued.
//
// Neither a plain epoch change nor a change of widths on the same worker
// IDs passes: moving the epoch by d makes a worker's IDs equal those it
// issued d earlier, and a worker ID under 41/10/12 with a sequence of 2048
// or more equals another worker's under 41/11/11. Relayout is the way to
// change them.
func AdmitLayout(records []LayoutRecord, layout Layout, workers WorkerRange) (rec LayoutRecord, at int, err error) {
	layout = layout.norm()
	if workers.From < 0 || workers.To <= workers.From || workers.To > layout.MaxWorkerID()+1 {
		return LayoutRecord{}, 0, fmt.Errorf("%w: worker IDs %s are not within 0-%d of %s", ErrInvalidWorkerID, workers, layout.MaxWorkerID(), layout)
	}
	at = len(records)
	for i, r := range records {
		if r.Layout.norm() == layout && r.Retired.IsZero() {
			at = i
			break
		}
	}
	rec = LayoutRecord{Layout: layout, Workers: workers}
	if at < len(records) {
		rec = records[at]
		rec.Workers = hull(rec.Workers, workers)
	} else {
		// A record no claim has used yet, recorded by a claim that lost
		// the race to the lock, stands for no ID: take its place.
		for i, r := range records {
			if r.Workers == (WorkerRange{}) && r.NotBefore.IsZero() && r.Retired.IsZero() {
				at = i
				break
			}
		}
	}
	for i, r := range records {
		if i == at || disjoint(rec.Layout, rec.Workers, r.Layout, r.Workers) || above(rec.Layout, rec.NotBefore, r) {
			continue
		}
		return LayoutRecord{}, 0, fmt.Errorf("%w: the worker IDs of this lease table have issued IDs in %s, and this claim asks for %s on worker IDs %s: their IDs could be equal",
			ErrLayoutMismatch, r, layout, workers)
	}
	return rec, at, nil
}

// PlanRelayout returns the records of a lease table moved to layout to:
// every record in use retired at last, a time at or after every ID the
// table's worker IDs have issued (the latest last_timestamp or lease
// expiry of any worker ID, once no lease is live), and a new record for to
// whose NotBefore puts its first ID above the greatest any record can have
// issued. That works for every change of epoch or widths, because an ID's
// time is its top bits: IDs compare as their times do, whatever the layout.
// What a change costs is time: moving the epoch later by d, or adding a
// time bit, pushes the first new ID out by d, or by as long again as the
// old epoch is past. PlanRelayout refuses with ErrInvalidConfig if that is
// more than maxWait after now, saying which epoch would allow the change
// at once; the generators of the new layout wait until NotBefore.
func PlanRelayout(records []LayoutRecord, last time.Time, to Layout, now time.Time, maxWait time.Duration) ([]LayoutRecord, error) {
	to = to.norm()
	if len(records) == 0 {
		return nil, errors.New("snowflake: no layout is recorded for this lease table, so the IDs it has issued are unknown: start one instance with the layout it has been used with, which records it, stop it, then relayout")
	}
	out := append([]LayoutRecord(nil), records...)
	greatest := int64(-1)
	for i, r := range out {
		if r.Retired.IsZero() {
			out[i].Retired = last
		}
		greatest = max(greatest, lastID(out[i].Layout, out[i].Retired))
	}
	floor, ok := floorAbove(to, greatest)
	if !ok {
		return nil, fmt.Errorf("%w: %s cannot go above the IDs already issued (up to %d): its time bits end at %s; choose an earlier epoch or more time bits",
			ErrInvalidConfig, to, greatest, to.End().Format(time.RFC3339Nano))
	}
	if wait := time.UnixMilli(floor).Sub(now); wait > maxWait {
		msg := fmt.Sprintf("%s would have to wait %v, until %s, for its IDs to be above the %d already issued; allow that with a longer wait",
			to, wait.Round(time.Millisecond), time.UnixMilli(floor).UTC().Format(time.RFC3339Nano), greatest)
		// The latest epoch whose floor is now: epoch + greatest>>k <= now.
		if e := now.UnixMilli() - greatest>>(to.workerBits+to.sequenceBits); e > 0 {
			msg += ", or choose an epoch at or before " + time.UnixMilli(e).UTC().Format(time.RFC3339Nano)
		}
		return nil, fmt.Errorf("%w: %s", ErrInvalidConfig, msg)
	}
	next := LayoutRecord{Layout: to}
	if floor > 0 {
		next.NotBefore = time.UnixMilli(floor).UTC()
	}
	return append(out, next), nil
}

// hull returns the smallest range holding a and b; the zero range is
// empty.
func hull(a, b WorkerRange) WorkerRange {
	if a == (WorkerRange{}) {
		return b
	}
	if b == (WorkerRange{}) {
		return a
	}
	return WorkerRange{From: min(a.From, b.From), To: max(a.To, b.To)}
}

// disjoint reports whether no ID of layout a on worker IDs wa can equal one
// of layout b on wb, at any times: bits lo..hi-1 of an ID hold worker-ID
// bits in both layouts, and the two ranges never agree in them.
func disjoint(a Layout, wa WorkerRange, b Layout, wb WorkerRange) bool {
	if wa == (WorkerRange{}) || wb == (WorkerRange{}) {
		return true
	}
	a, b = a.norm(), b.norm()
	lo := max(a.sequenceBits, b.sequenceBits)
	hi := min(a.sequenceBits+a.workerBits, b.sequenceBits+b.workerBits)
	if lo >= hi {
		return false
	}
	for _, x := range window(wa, lo-a.sequenceBits, hi-lo) {
		for _, y := range window(wb, lo-b.sequenceBits, hi-lo) {
			if x[0] <= y[1] && y[0] <= x[1] {
				return false
			}
		}
	}
	return true
}

// window returns the values that bits k..k+m-1 of the worker IDs in r
// take, as at most two inclusive intervals (the values wrap around).
func window(r WorkerRange, k, m uint8) [][2]int64 {
	a, b := r.From>>k, (r.To-1)>>k
	size := int64(1) << m
	if b-a+1 >= size {
		return [][2]int64{{0, size - 1}}
	}
	a, b = a&(size-1), b&(size-1)
	if a <= b {
		return [][2]int64{{a, b}}
	}
	return [][2]int64{{a, size - 1}, {0, b}}
}

// above reports whether every ID of layout a issued after notBefore is
// greater than every ID r's retired layout issued.
func above(a Layout, notBefore time.Time, r LayoutRecord) bool {
	if r.Retired.IsZero() {
		return false
	}
	return firstID(a, notBefore) > lastID(r.Layout, r.Retired)
}

// firstID returns the smallest ID layout l can issue after the millisecond
// of floor (as a Generator with NotBefore floor does), or MaxInt64 if its
// time bits end before then.
func firstID(l Layout, floor time.Time) int64 {
	l = l.norm()
	ms := l.epochMs
	if !floor.IsZero() {
		ms = max(ms, floor.UnixMilli()+1)
	}
	if ms-l.epochMs > l.maxTime() {
		return math.MaxInt64
	}
	return (ms - l.epochMs) << (l.workerBits + l.sequenceBits)
}

// lastID returns the greatest ID layout l can have issued at or before t,
// on any worker ID, or -1 if t is before its epoch.
func lastID(l Layout, t time.Time) int64 {
	l = l.norm()
	ms := t.UnixMilli() - l.epochMs
	if t.IsZero() || ms < 0 {
		return -1
	}
	ms = min(ms, l.maxTime())
	// (ms+1)<<k - 1, without passing through 2^63 at the last millisecond.
	k := l.workerBits + l.sequenceBits
	return ms<<k | (int64(1)<<k - 1)
}

// floorAbove returns the Unix millisecond floor from which every ID of l
// is greater than id, or 0 if any will do; ok is false if l's time bits
// end first.
func floorAbove(l Layout, id int64) (floor int64, ok bool) {
	if id < 0 {
		return 0, true
	}
	ms := id >> (l.workerBits + l.sequenceBits) // the first millisecond after ms is above id
	if ms+1 > l.maxTime() {
		return 0, false
	}
	return l.epochMs + ms, true
}
