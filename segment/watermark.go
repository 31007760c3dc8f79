package segment

// watermark remembers what one tag's reservations returned, so that a
// range the store hands out again (it went back in time: a restore, a
// failover to a replica that lost commits, a max_id lowered by hand) is
// recognised and never handed out.
//
// A range is a regression if it starts below the end of a range that was
// returned before its own call began, or overlaps one returned while its
// call was in flight. The second rule matters because reservations of
// one tag run concurrently (the background load and ReserveRange calls):
// the store serialises them, so a later call's range may legitimately
// start below an earlier-finishing call's, but never overlaps it; and a
// rollback during the call shows up as exactly such an overlap. Ranges
// are logged only while calls are in flight, and only as far back as the
// oldest one began, so memory stays bounded by the calls in flight.
//
// The Allocator keeps one per tag, apart from the tag's Sequence (which
// is dropped when the row is missing and made again later), and guards
// them all with one mutex: reservations are rare.
type watermark struct {
	high     int64          // end of the highest range returned
	done     uint64         // ranges returned so far
	log      []logged       // ranges returned while calls were in flight
	inflight map[uint64]int // calls in flight, by the done count at their start
	// freed are spans handed back by ReleaseRange while calls were in
	// flight: such a call may get them again from the store, which is no
	// regression, since nobody handed them out.
	freed []logged
}

type logged struct {
	n uint64 // done count after this range; its position in the log
	r Range
}

// begin records a call's start; pass its result to end.
func (w *watermark) begin() (high int64, at uint64) {
	if w.inflight == nil {
		w.inflight = map[uint64]int{}
	}
	w.inflight[w.done]++
	return w.high, w.done
}

// end records a call's outcome: ok false for a failed call. It reports
// whether r is a regression; a regression is not recorded.
func (w *watermark) end(high int64, at uint64, r Range, ok bool) (regressed bool) {
	if ok {
		regressed = r.Start < high && !w.wasFreed(at, r.Start, min(high, r.End))
		for _, l := range w.log {
			if l.n > at && r.Start < l.r.End && l.r.Start < r.End {
				regressed = true
			}
		}
		if !regressed {
			w.high = max(w.high, r.End)
			w.done++
			w.log = append(w.log, logged{n: w.done, r: r})
		}
	}
	if w.inflight[at]--; w.inflight[at] == 0 {
		delete(w.inflight, at)
	}
	// Drop what no call in flight can overlap with any more.
	oldest := w.done
	for a := range w.inflight {
		oldest = min(oldest, a)
	}
	i := 0
	for i < len(w.log) && w.log[i].n <= oldest {
		i++
	}
	w.log = append(w.log[:0], w.log[i:]...)
	if len(w.inflight) == 0 {
		w.freed = w.freed[:0]
	}
	return regressed
}

// release records that [from, to), the unused end of a range returned
// before, was handed back (or is being handed back) to the store, which
// may hand it out again: the high-water mark comes down to from if to
// was the highest end, a logged range ending at to now ends at from, and
// calls in flight may get the span without it counting as a regression.
// The span is recorded before the store call, whatever its outcome: the
// holder says no ID of it was handed out, so getting any of it again is
// never a duplicate.
func (w *watermark) release(from, to int64) {
	if w.high == to {
		w.high = from
	}
	for i := range w.log {
		if w.log[i].r.End == to && w.log[i].r.Start <= from {
			w.log[i].r.End = from
		}
	}
	if len(w.inflight) > 0 {
		w.freed = append(w.freed, logged{n: w.done, r: Range{Start: from, End: to}})
	}
}

// wasFreed reports whether [start, end) lies in a span freed while a
// call that began at done count at was in flight.
func (w *watermark) wasFreed(at uint64, start, end int64) bool {
	for _, f := range w.freed {
		if f.n >= at && f.r.Start <= start && end <= f.r.End {
			return true
		}
	}
	return false
}

// idle reports whether nothing was ever reserved and nothing is in
// flight: then there is nothing to remember.
func (w *watermark) idle() bool { return w.done == 0 && len(w.inflight) == 0 }
