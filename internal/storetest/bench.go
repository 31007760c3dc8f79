package storetest

import (
	"context"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
)

// BenchReserve measures one reservation through today, a store on the
// same database without the identity check, and through fenced, the
// store as Open returns it, which checks the identity in the reservation's
// transaction: side by side in one run, so that benchstat compares them.
func BenchReserve(b *testing.B, today, fenced segment.Store) {
	ctx := context.Background()
	tag := segmenttest.UniqueTag("bench")
	if err := fenced.CreateTag(ctx, segment.Tag{Name: tag, MaxID: 1, Step: 1000}); err != nil {
		b.Fatal(err)
	}
	for _, s := range []struct {
		name  string
		store segment.Store
	}{{"check=today", today}, {"check=fenced", fenced}} {
		b.Run(s.name, func(b *testing.B) {
			// The first reservation records the identity; keep it out.
			if _, err := s.store.Reserve(ctx, tag, 0); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := s.store.Reserve(ctx, tag, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
