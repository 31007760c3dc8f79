// Package segment hands out 64-bit IDs from ranges ("segments") reserved in
// a shared database, so that a database round trip is paid once per
// segment rather than once per ID.
//
// An Allocator keeps two buffers per tag. While callers consume the current
// segment, the next one is reserved in the background, once a configurable
// share of the current one has been handed out. Callers therefore only wait
// on the database when it is slower than their own consumption, or down.
//
// # Ranges
//
// The id_sequence row of a tag holds max_id, the first ID that nobody has
// reserved yet. Reserving a segment of size step moves max_id to
// max_id+step in one short transaction and gives the reserver the
// half-open range [old max_id, old max_id+step). A tag created with
// start 1 therefore hands out 1, 2, 3, … first.
//
// # Guarantees
//
//   - Uniqueness: every ID is handed out at most once across all
//     allocators (processes, machines) that share one database, because
//     ranges are reserved under a row lock and never overlap.
//   - Order: within one Allocator, the IDs of a tag are strictly increasing
//     in the order the allocator hands them out, and each goroutine sees
//     its own IDs strictly increase. Across allocators IDs are only roughly
//     increasing: two instances hand out interleaved ranges.
//   - Gaps: IDs are not dense. A restart, a crash or a segment that is
//     abandoned leaves the rest of its range unused. Close hands the unused
//     rest back when nothing else has reserved past it, which avoids most
//     gaps on an orderly shutdown, but a kill -9 always leaves one.
//
// # Hot path
//
// In the steady state Next costs one atomic add on the current buffer and
// allocates nothing. A lock is taken only when a buffer runs out, when the
// prefetch point is crossed, or when a tag is seen for the first time.
// Sequence returns a per-tag handle that also skips the tag lookup.
package segment
