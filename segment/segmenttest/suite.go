package segmenttest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/segment"
)

// Admin is the tag administration a store may offer beside segment.Store.
// Run checks it when the store has it.
type Admin interface {
	ListTags(ctx context.Context) ([]segment.Tag, error)
	SetStep(ctx context.Context, tag string, step int64) error
}

var tagSeq atomic.Int64

// UniqueTag returns a tag name no other test in this process uses, so
// that suites can share one database.
func UniqueTag(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano()%1e9, tagSeq.Add(1))
}

// Run is the conformance suite of segment.Store. Every backend calls it
// with a function that returns a ready store (schema applied); the store
// may be shared between subtests, which use distinct tags.
func Run(t *testing.T, open func(t *testing.T) segment.Store) {
	ctx := context.Background()
	create := func(t *testing.T, s segment.Store, start, step int64) string {
		t.Helper()
		tag := UniqueTag("ct")
		if err := s.CreateTag(ctx, segment.Tag{Name: tag, MaxID: start, Step: step, Description: "conformance"}); err != nil {
			t.Fatalf("CreateTag: %v", err)
		}
		return tag
	}
	reserve := func(t *testing.T, s segment.Store, tag string, step int64) segment.Range {
		t.Helper()
		r, err := s.Reserve(ctx, tag, step)
		if err != nil {
			t.Fatalf("Reserve(%q, %d): %v", tag, step, err)
		}
		return r
	}

	t.Run("ReserveIsHalfOpenAndContiguous", func(t *testing.T) {
		s := open(t)
		tag := create(t, s, 100, 10)
		if r := reserve(t, s, tag, 0); r != (segment.Range{Start: 100, End: 110, Step: 10}) {
			t.Fatalf("first range = %+v, want [100,110) step 10", r)
		}
		if r := reserve(t, s, tag, 0); r != (segment.Range{Start: 110, End: 120, Step: 10}) {
			t.Fatalf("second range = %+v, want [110,120) step 10", r)
		}
	})

	t.Run("StepIsAtLeastTheRowStep", func(t *testing.T) {
		s := open(t)
		tag := create(t, s, 1, 10)
		for _, tc := range []struct{ ask, want int64 }{{5, 10}, {0, 10}, {25, 25}} {
			if got := reserve(t, s, tag, tc.ask).Size(); got != tc.want {
				t.Errorf("Reserve(step %d) size = %d, want %d", tc.ask, got, tc.want)
			}
		}
	})

	t.Run("UnknownTag", func(t *testing.T) {
		s := open(t)
		_, err := s.Reserve(ctx, UniqueTag("missing"), 0)
		if !errors.Is(err, segment.ErrTagNotFound) {
			t.Fatalf("Reserve of unknown tag: err = %v, want ErrTagNotFound", err)
		}
	})

	t.Run("CreateTwice", func(t *testing.T) {
		s := open(t)
		tag := create(t, s, 1, 10)
		err := s.CreateTag(ctx, segment.Tag{Name: tag, MaxID: 1, Step: 10})
		if !errors.Is(err, segment.ErrTagExists) {
			t.Fatalf("second CreateTag: err = %v, want ErrTagExists", err)
		}
	})

	t.Run("CreateRejectsBadInput", func(t *testing.T) {
		s := open(t)
		for _, tc := range []struct {
			name string
			tag  segment.Tag
			want error
		}{
			{"empty tag", segment.Tag{Name: "", MaxID: 1, Step: 1}, segment.ErrInvalidTag},
			{"bad char", segment.Tag{Name: "a b", MaxID: 1, Step: 1}, segment.ErrInvalidTag},
			{"zero step", segment.Tag{Name: UniqueTag("s"), MaxID: 1, Step: 0}, segment.ErrInvalidStep},
			{"huge step", segment.Tag{Name: UniqueTag("s"), MaxID: 1, Step: math.MaxInt32 + 1}, segment.ErrInvalidStep},
			{"negative start", segment.Tag{Name: UniqueTag("s"), MaxID: -1, Step: 1}, segment.ErrInvalidStep},
			{"start past the last step", segment.Tag{Name: UniqueTag("s"), MaxID: math.MaxInt64 - 5, Step: 10}, segment.ErrInvalidStep},
		} {
			if err := s.CreateTag(ctx, tc.tag); !errors.Is(err, tc.want) {
				t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
			}
		}
	})

	t.Run("Exhausted", func(t *testing.T) {
		s := open(t)
		tag := create(t, s, math.MaxInt64-25, 10)
		for range 2 {
			if _, err := s.Reserve(ctx, tag, 0); err != nil {
				t.Fatalf("Reserve below the limit: %v", err)
			}
		}
		// The last 5 IDs: a step that passes the limit is cut to them.
		if r, err := s.Reserve(ctx, tag, 0); err != nil || r.Start != math.MaxInt64-5 || r.End != math.MaxInt64 {
			t.Fatalf("Reserve of the last IDs = %+v, %v; want [%d, %d)", r, err, int64(math.MaxInt64-5), int64(math.MaxInt64))
		}
		if _, err := s.Reserve(ctx, tag, 0); !errors.Is(err, segment.ErrExhausted) {
			t.Fatalf("Reserve past int64: err = %v, want ErrExhausted", err)
		}
	})

	// A step grown under load is cut to what is left below the int64
	// limit: every ID up to it is handed out, none twice.
	t.Run("GrownStepNearTheLimit", func(t *testing.T) {
		s := open(t)
		const start = math.MaxInt64 - 10_000
		tag := create(t, s, start, 1000)
		next, got := int64(start), int64(0)
		for step := int64(1000); ; step *= 2 {
			r, err := s.Reserve(ctx, tag, step)
			if errors.Is(err, segment.ErrExhausted) {
				break
			}
			if err != nil || r.Start != next || r.End <= r.Start {
				t.Fatalf("Reserve(%d) = %+v, %v; want a range from %d", step, r, err, next)
			}
			next, got = r.End, got+r.Size()
		}
		if got != 10_000 || next != math.MaxInt64 {
			t.Fatalf("handed out %d IDs up to %d; want all 10000 up to %d", got, next, int64(math.MaxInt64))
		}
	})

	// Tags are case-sensitive on every backend, and descriptions hold any
	// UTF-8, emoji included (a MySQL column in latin1 or a _ci collation
	// broke both).
	t.Run("CaseSensitiveTagsUTF8Descriptions", func(t *testing.T) {
		s := open(t)
		lower := UniqueTag("case")
		upper := strings.ToUpper(lower)
		const desc = "orders 🚀 ✓ 注文"
		for i, name := range []string{lower, upper} {
			if err := s.CreateTag(ctx, segment.Tag{Name: name, MaxID: int64(1 + 1000*i), Step: 10, Description: desc}); err != nil {
				t.Fatalf("CreateTag(%q) after %q: %v; want two tags", name, lower, err)
			}
		}
		for i, name := range []string{lower, upper} {
			if r, err := s.Reserve(ctx, name, 0); err != nil || r.Start != int64(1+1000*i) {
				t.Fatalf("Reserve(%q) = %+v, %v; want its own row, from %d", name, r, err, 1+1000*i)
			}
		}
		l, ok := s.(interface {
			ListTags(ctx context.Context) ([]segment.Tag, error)
		})
		if !ok {
			return
		}
		tags, err := l.ListTags(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, tg := range tags {
			if tg.Name == lower || tg.Name == upper {
				found++
				if tg.Description != desc {
					t.Errorf("tag %q lists description %q, want %q", tg.Name, tg.Description, desc)
				}
			}
		}
		if found != 2 {
			t.Fatalf("ListTags shows %d of %q and %q, want both", found, lower, upper)
		}
	})

	t.Run("RaiseNeverLowers", func(t *testing.T) {
		s := open(t)
		rs, ok := s.(segment.Raiser)
		if !ok {
			t.Skip("store does not implement segment.Raiser")
		}
		tag := create(t, s, 1, 10)
		if raised, err := rs.Raise(ctx, tag, 500); err != nil || !raised {
			t.Fatalf("Raise to 500 = %v, %v; want true", raised, err)
		}
		if raised, err := rs.Raise(ctx, tag, 100); err != nil || raised {
			t.Fatalf("Raise to 100 below 500 = %v, %v; want false, nil", raised, err)
		}
		if r, err := s.Reserve(ctx, tag, 0); err != nil || r.Start != 500 {
			t.Fatalf("Reserve after Raise = %+v, %v; want a range from 500", r, err)
		}
		if _, err := rs.Raise(ctx, UniqueTag("missing"), 5); !errors.Is(err, segment.ErrTagNotFound) {
			t.Fatalf("Raise of a missing tag: err = %v, want ErrTagNotFound", err)
		}
	})

	t.Run("ConcurrentReservesNeverOverlap", func(t *testing.T) {
		s := open(t)
		const start, step, workers, each = 1, 7, 8, 25
		tag := create(t, s, start, step)
		var mu sync.Mutex
		var got []segment.Range
		inWorkers(t, workers, each, func() error {
			r, err := s.Reserve(ctx, tag, 0)
			if err != nil {
				return fmt.Errorf("Reserve: %w", err)
			}
			mu.Lock()
			got = append(got, r)
			mu.Unlock()
			return nil
		})
		if len(got) != workers*each {
			t.Fatalf("got %d ranges, want %d", len(got), workers*each)
		}
		sort.Slice(got, func(i, j int) bool { return got[i].Start < got[j].Start })
		want := int64(start)
		for _, r := range got {
			if r.Start != want || r.Size() != step {
				t.Fatalf("range %+v: want start %d size %d (ranges must tile without gaps or overlap)", r, want, step)
			}
			want = r.End
		}
	})

	t.Run("CancelledContextLeavesNoLock", func(t *testing.T) {
		s := open(t)
		tag := create(t, s, 1, 10)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Reserve(cctx, tag, 0); err == nil {
			t.Fatal("Reserve with a cancelled context succeeded")
		}
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := s.Reserve(tctx, tag, 0); err != nil {
			t.Fatalf("Reserve after a cancelled one: %v (a lock was left behind?)", err)
		}
	})

	t.Run("ReleaseIsCompareAndSet", func(t *testing.T) {
		s := open(t)
		rel, ok := s.(segment.Releaser)
		if !ok {
			t.Skip("store does not implement segment.Releaser")
		}
		tag := create(t, s, 1, 10)
		r1 := reserve(t, s, tag, 0)
		if ok, err := rel.Release(ctx, tag, r1.Start+3, r1.End); err != nil || !ok {
			t.Fatalf("Release of the latest range = %v, %v; want true", ok, err)
		}
		if r := reserve(t, s, tag, 0); r.Start != r1.Start+3 {
			t.Fatalf("after Release the next range starts at %d, want %d", r.Start, r1.Start+3)
		}
		r3 := reserve(t, s, tag, 0)
		reserve(t, s, tag, 0)
		if ok, err := rel.Release(ctx, tag, r3.Start, r3.End); err != nil || ok {
			t.Fatalf("Release of a range someone reserved past = %v, %v; want false", ok, err)
		}
	})

	t.Run("Admin", func(t *testing.T) {
		s := open(t)
		adm, ok := s.(Admin)
		if !ok {
			t.Skip("store does not implement segmenttest.Admin")
		}
		tag := create(t, s, 50, 10)
		if err := adm.SetStep(ctx, tag, 40); err != nil {
			t.Fatalf("SetStep: %v", err)
		}
		if r := reserve(t, s, tag, 0); r.Start != 50 || r.Size() != 40 {
			t.Fatalf("range after SetStep = %+v, want [50,90)", r)
		}
		tags, err := adm.ListTags(ctx)
		if err != nil {
			t.Fatalf("ListTags: %v", err)
		}
		var found *segment.Tag
		for i := range tags {
			if tags[i].Name == tag {
				found = &tags[i]
			}
		}
		if found == nil || found.MaxID != 90 || found.Step != 40 || found.Description != "conformance" || found.UpdatedAt.IsZero() {
			t.Fatalf("ListTags entry = %+v, want max_id 90, step 40, a description and a time", found)
		}
		if err := adm.SetStep(ctx, UniqueTag("missing"), 5); !errors.Is(err, segment.ErrTagNotFound) {
			t.Fatalf("SetStep of unknown tag: err = %v, want ErrTagNotFound", err)
		}
		if err := adm.SetStep(ctx, tag, 0); !errors.Is(err, segment.ErrInvalidStep) {
			t.Fatalf("SetStep 0: err = %v, want ErrInvalidStep", err)
		}
	})

	t.Run("OpaqueIsRecordedWithTheTag", func(t *testing.T) {
		s := open(t)
		ot, ok := s.(interface {
			TagOpaque(ctx context.Context, tag string) (string, error)
		})
		adm, isAdmin := s.(Admin)
		if !ok || !isAdmin {
			t.Skip("store does not record opaque tags")
		}
		const fp = "ff1:0123456789abcdef"
		opaqueTag, plainTag := UniqueTag("op"), create(t, s, 1, 10)
		if err := s.CreateTag(ctx, segment.Tag{Name: opaqueTag, MaxID: 1, Step: 10, Opaque: fp}); err != nil {
			t.Fatalf("CreateTag opaque: %v", err)
		}
		for _, tc := range []struct {
			tag, want string
		}{{opaqueTag, fp}, {plainTag, ""}} {
			if got, err := ot.TagOpaque(ctx, tc.tag); err != nil || got != tc.want {
				t.Errorf("TagOpaque(%s) = %q, %v; want %q", tc.tag, got, err, tc.want)
			}
		}
		if _, err := ot.TagOpaque(ctx, UniqueTag("missing")); !errors.Is(err, segment.ErrTagNotFound) {
			t.Errorf("TagOpaque of unknown tag: %v, want ErrTagNotFound", err)
		}
		// Creating the tag again, opaque or not, changes nothing.
		if err := s.CreateTag(ctx, segment.Tag{Name: plainTag, MaxID: 1, Step: 10, Opaque: fp}); !errors.Is(err, segment.ErrTagExists) {
			t.Errorf("CreateTag of an existing plain tag as opaque: %v, want ErrTagExists", err)
		}
		if got, _ := ot.TagOpaque(ctx, plainTag); got != "" {
			t.Errorf("plain tag became opaque (%q) after a refused CreateTag", got)
		}
		tags, err := adm.ListTags(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]string{}
		for _, tg := range tags {
			seen[tg.Name] = tg.Opaque
		}
		if seen[opaqueTag] != fp || seen[plainTag] != "" {
			t.Errorf("ListTags: opaque %q, plain %q; want %q and \"\"", seen[opaqueTag], seen[plainTag], fp)
		}
	})

	// Hand-backs of one tag racing each other and reservations, as when
	// clients of one server close together, move the row only as far as
	// what was reserved: a store that took a committed hand-back for a
	// row that went back would fence, and jump the row by the fence's
	// margin.
	t.Run("ConcurrentHandBacksStayDense", func(t *testing.T) {
		s := open(t)
		rel, ok := s.(segment.Releaser)
		if !ok {
			t.Skip("store does not implement segment.Releaser")
		}
		const step, workers, each = 10, 4, 25
		tag := create(t, s, 1, step)
		inWorkers(t, workers, each, func() error {
			r, err := s.Reserve(ctx, tag, 0)
			if err != nil {
				return fmt.Errorf("Reserve: %w", err)
			}
			if _, err := rel.Release(ctx, tag, r.Start+1, r.End); err != nil {
				return fmt.Errorf("Release: %w", err)
			}
			return nil
		})
		if r := reserve(t, s, tag, 0); r.Start > 1+workers*each*step {
			t.Fatalf("after %d reservations of %d the row is at %d, past the %d they can take", workers*each, step, r.Start, 1+workers*each*step)
		}
	})

	t.Run("AllocatorCloseHandsBackTheRest", func(t *testing.T) {
		s := open(t)
		if _, ok := s.(segment.Releaser); !ok {
			t.Skip("store does not implement segment.Releaser")
		}
		tag := create(t, s, 1, 100)
		for want := int64(1); want <= 7; want += 3 {
			a, err := segment.New(s, segment.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range int64(3) {
				if id, err := a.Next(ctx, tag); err != nil || id != want+i {
					t.Fatalf("id %d, %v; want %d: the previous allocator's rest was not handed back", id, err, want+i)
				}
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("AllocatorIsUnique", func(t *testing.T) {
		s := open(t)
		tag := create(t, s, 1, 10)
		a, err := segment.New(s, segment.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		CheckUnique(t, 8, 500, func() (int64, error) { return a.Next(ctx, tag) })
	})
}

// inWorkers calls fn each times in each of workers goroutines at once; a
// goroutine stops at its first error, which fails the test.
func inWorkers(t testing.TB, workers, each int, fn func() error) {
	t.Helper()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if err := fn(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// CheckUnique calls next from workers goroutines, each times, and fails
// the test on any error, any duplicate, or any goroutine whose own IDs do
// not strictly increase. It returns every ID.
func CheckUnique(t testing.TB, workers, each int, next func() (int64, error)) []int64 {
	t.Helper()
	out := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ids := make([]int64, 0, each)
			for range each {
				id, err := next()
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				if n := len(ids); n > 0 && id <= ids[n-1] {
					t.Errorf("worker %d: %d after %d, want strictly increasing", w, id, ids[n-1])
					return
				}
				ids = append(ids, id)
			}
			out[w] = ids
		})
	}
	wg.Wait()
	var all []int64
	for _, ids := range out {
		all = append(all, ids...)
	}
	if d := Duplicates(all); d != 0 {
		t.Errorf("%d duplicate IDs among %d", d, len(all))
	}
	if len(all) != workers*each {
		t.Errorf("got %d IDs, want %d", len(all), workers*each)
	}
	return all
}

// Duplicates returns how many values of ids repeat an earlier one: the
// one count every suite and test of the module uses, and backends
// outside it too. It sorts a copy, which costs less memory than a set of
// millions of IDs, and leaves ids as they are.
func Duplicates(ids []int64) int {
	s := slices.Clone(ids)
	slices.Sort(s)
	return len(s) - len(slices.Compact(s))
}
