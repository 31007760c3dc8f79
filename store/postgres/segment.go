package postgres

import (
	"context"
	"log/slog"

	"github.com/idgen/idgen/fence"
	"github.com/idgen/idgen/segment"
)

// The tag table's methods, spelled out rather than promoted from the
// shared SQL implementation, so that the package's API names only types
// that users can name too.

var (
	_ segment.Store    = (*Store)(nil)
	_ segment.Releaser = (*Store)(nil)
	_ segment.Raiser   = (*Store)(nil)
)

// Reserve implements segment.Store: it advances the tag's max_id by step
// in one transaction and returns the range it covered.
func (s *Store) Reserve(ctx context.Context, tag string, step int64) (segment.Range, error) {
	return s.seg.Reserve(ctx, tag, step)
}

// Raise implements segment.Raiser: it moves the tag's max_id up to to,
// never down, and reports whether it moved.
func (s *Store) Raise(ctx context.Context, tag string, to int64) (bool, error) {
	return s.seg.Raise(ctx, tag, to)
}

// Bump moves the tag's max_id up by n, skipping n IDs, and returns the new
// max_id: the repair after a restore or a failover that lost commits.
func (s *Store) Bump(ctx context.Context, tag string, n int64) (int64, error) {
	return s.seg.Bump(ctx, tag, n)
}

// CreateTag implements segment.Store.
func (s *Store) CreateTag(ctx context.Context, t segment.Tag) error { return s.seg.CreateTag(ctx, t) }

// Release implements segment.Releaser: it hands the unused end of a range
// back, if no one reserved after it.
func (s *Store) Release(ctx context.Context, tag string, from, to int64) (bool, error) {
	return s.seg.Release(ctx, tag, from, to)
}

// ListTags returns every tag, ordered by name.
func (s *Store) ListTags(ctx context.Context) ([]segment.Tag, error) { return s.seg.ListTags(ctx) }

// TagOpaque returns the fingerprint of the key the tag was created
// under, "" for a plain tag, or an error wrapping segment.ErrTagNotFound;
// it implements opaque.Tags.
func (s *Store) TagOpaque(ctx context.Context, tag string) (string, error) {
	return s.seg.TagOpaque(ctx, tag)
}

// SetStep changes a tag's configured step; allocators pick it up at their
// next reservation.
func (s *Store) SetStep(ctx context.Context, tag string, step int64) error {
	return s.seg.SetStep(ctx, tag, step)
}

// ObserveRetries makes f count the reservations and worker-ID claims this
// store retried after a deadlock or a serialization failure, by operation:
// "reserve", "claim" or "fence". f must not block.
func (s *Store) ObserveRetries(f func(op string)) {
	s.seg.ObserveRetries(f)
	s.leases.ObserveRetries(f)
	s.guard.ObserveRetries(f)
}

// ConfigureFence sets how the store fences when its history changes (a
// failover, a restore; see package fence) and where it logs the fence.
// Call it before the first reservation or claim.
func (s *Store) ConfigureFence(c fence.Config, log *slog.Logger) error {
	return s.guard.Configure(c, log)
}

// ObserveFences makes f hear of every fence this process performs. f
// must not block.
func (s *Store) ObserveFences(f func(fence.Event)) { s.guard.ObserveFences(f) }

// CheckIdentity reads the server's identity and the store's record of it
// now, recording or fencing as a reservation would: what an instance
// does at start.
func (s *Store) CheckIdentity(ctx context.Context) error { return s.guard.Check(ctx) }

// Identity returns the server's identity and the store's record of it,
// without checking them.
func (s *Store) Identity(ctx context.Context) (fence.Identity, fence.Record, error) {
	return s.guard.Read(ctx)
}

// Import creates every tag that has no row and raises every other to at
// least its MaxID, never lowering one, in one transaction: all or
// nothing, as `idgen import` promises. before[i] is tags[i]'s max_id
// before, or -1 when Import created it.
func (s *Store) Import(ctx context.Context, tags []segment.Tag) (before []int64, err error) {
	return s.seg.Import(ctx, tags)
}
