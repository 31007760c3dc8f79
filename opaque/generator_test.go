package opaque_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/idgen/idgen/opaque"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
)

// TestGenerator_Kinds runs each kind of tag through a Generator over a
// real allocator: plain tags pass through, opaque ones are encoded, and a
// tag under another key, or with no key, is refused on the first call
// and every later one, never answered with a raw counter.
func TestGenerator_Kinds(t *testing.T) {
	ctx := context.Background()
	mine, other := testKey(t), otherKey(t)
	store, alloc := allocWith(t, []segment.Tag{
		{Name: "plain", MaxID: 1, Step: 10},
		{Name: "mine", MaxID: 1, Step: 10, Opaque: mine.Fingerprint()},
		{Name: "other", MaxID: 1, Step: 10, Opaque: other.Fingerprint()},
	}...)
	for _, tc := range []struct {
		name    string
		key     *opaque.Key
		tag     string
		wantErr error
		encoded bool
	}{
		{"plain with a key", mine, "plain", nil, false},
		{"plain without a key", nil, "plain", nil, false},
		{"opaque under this key", mine, "mine", nil, true},
		{"opaque under another key", mine, "other", opaque.ErrKeyMismatch, false},
		{"opaque without a key", nil, "mine", opaque.ErrNoKey, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := opaque.NewGenerator(alloc, store, tc.key)
			for call := range 3 { // the first call learns the tag, later ones use what it learnt
				id, err := g.Next(ctx, tc.tag)
				ids, errN := g.NextN(ctx, tc.tag, 3)
				_, errR := g.ReserveRange(ctx, tc.tag, 5)
				if tc.wantErr != nil {
					if !errors.Is(err, tc.wantErr) || !errors.Is(errN, tc.wantErr) || !errors.Is(errR, tc.wantErr) || id != 0 || ids != nil {
						t.Fatalf("call %d: Next = %d, %v; NextN = %v, %v; ReserveRange: %v; want %v", call, id, err, ids, errN, errR, tc.wantErr)
					}
					continue
				}
				if err != nil || errN != nil {
					t.Fatalf("call %d: %v, %v", call, err, errN)
				}
				if tc.encoded {
					c, err := tc.key.Decode(tc.tag, id)
					if err != nil || c == id || c < 1 || c > 100 {
						t.Fatalf("call %d: opaque ID %d decodes to %d, %v", call, id, c, err)
					}
					if !errors.Is(errR, opaque.ErrRangeRefused) {
						t.Fatalf("call %d: ReserveRange of an opaque tag: %v, want ErrRangeRefused", call, errR)
					}
				} else if id > 100 || errR != nil {
					t.Fatalf("call %d: plain ID %d (range err %v)", call, id, errR)
				}
			}
		})
	}
}

func otherKey(t testing.TB) *opaque.Key {
	t.Helper()
	k, err := opaque.ParseKey("0f0e0d0c0b0a09080706050403020100")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type failingTags struct{}

func (failingTags) TagOpaque(context.Context, string) (string, error) {
	return "", errors.New("conn closed")
}

// A store that cannot say what a tag is makes the call fail as an outage
// (segment.ErrUnavailable: 503 with Retry-After), never a 500, and never
// hands out the counter it already took.
func TestGenerator_LookupFailureIsUnavailable(t *testing.T) {
	ctx := context.Background()
	_, alloc := allocWith(t, segment.Tag{Name: "t", MaxID: 1, Step: 10})
	g := opaque.NewGenerator(alloc, failingTags{}, testKey(t))
	if id, err := g.Next(ctx, "t"); !errors.Is(err, segment.ErrUnavailable) || id != 0 {
		t.Fatalf("Next with a failing lookup = %d, %v; want ErrUnavailable", id, err)
	}
	if ids, err := g.NextN(ctx, "t", 2); !errors.Is(err, segment.ErrUnavailable) || ids != nil {
		t.Fatalf("NextN with a failing lookup = %v, %v; want ErrUnavailable", ids, err)
	}
	if _, err := g.ReserveRange(ctx, "t", 5); !errors.Is(err, segment.ErrUnavailable) {
		t.Fatalf("ReserveRange with a failing lookup = %v; want ErrUnavailable", err)
	}
}

// TestGenerator_NextAhead takes an opaque tag's IDs from many goroutines
// at once, one by one (encoded Ahead at a time) and in batches: every ID
// is distinct and decodes to a counter, and the counters taken beyond
// those handed out are fewer than two batches ahead (the one being taken
// and the one encoded after it).
func TestGenerator_NextAhead(t *testing.T) {
	ctx := context.Background()
	key := testKey(t)
	store, alloc := allocWith(t, segment.Tag{Name: "o", MaxID: 1, Step: 100, Opaque: key.Fingerprint()})
	g := opaque.NewGenerator(alloc, store, key)
	const workers, each = 8, 300
	got := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if i%50 == 49 {
					ids, err := g.NextN(ctx, "o", 7)
					if err != nil {
						t.Error(err)
						return
					}
					got[w] = append(got[w], ids...)
					continue
				}
				id, err := g.Next(ctx, "o")
				if err != nil {
					t.Error(err)
					return
				}
				got[w] = append(got[w], id)
			}
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	var maxCounter int64
	for _, ids := range got {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("ID %d handed out twice", id)
			}
			seen[id] = true
			c, err := key.Decode("o", id)
			if err != nil || c < 1 {
				t.Fatalf("ID %d decodes to %d, %v", id, c, err)
			}
			maxCounter = max(maxCounter, c)
		}
	}
	if handed := int64(len(seen)); maxCounter >= handed+2*opaque.Ahead {
		t.Errorf("%d IDs handed out, but counters up to %d taken: %d or more ahead", handed, maxCounter, 2*opaque.Ahead)
	}
}

// allocWith is an allocator over an in-memory store holding tags, closed
// when the test ends.
func allocWith(t *testing.T, tags ...segment.Tag) (*segmenttest.Memory, *segment.Allocator) {
	t.Helper()
	store := segmenttest.NewMemory()
	for _, tg := range tags {
		if err := store.CreateTag(t.Context(), tg); err != nil {
			t.Fatal(err)
		}
	}
	alloc, err := segment.New(store, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alloc.Close() })
	return store, alloc
}
