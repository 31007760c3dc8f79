package sqlite_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/sqlite"
)

// A key lost with the commits that recorded it (here, a file put back
// from a copy taken before them, as an async replica promoted before it
// got them) is a new key to its retry: the retry runs again and gets
// new IDs, never the lost answer's (the fence keeps them apart), and
// its repeats replay those. What docs/idempotency.md says of a failover.
func TestIdempotency_KeyLostWithItsCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idgen.db")
	// run starts a process on the file, sends key "order-1" n times
	// and returns the IDs of each answer and whether it was a replay.
	run := func(create bool, n int) (ids [][]int64, replayed []bool) {
		s, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Migrate(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.ConfigureFence(fence.Config{Margin: 10_000}, nil); err != nil {
			t.Fatal(err)
		}
		if create {
			if err := s.CreateTag(ctx, segment.Tag{Name: "order", MaxID: 1, Step: 100}); err != nil {
				t.Fatal(err)
			}
			return nil, nil
		}
		a, err := segment.New(s, segment.Options{FixedStep: true})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		k, err := idempotency.New(s.Idempotency(), idempotency.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		for range n {
			ans, rep, err := k.Do(ctx, idempotency.Request{Scope: "s", Key: "order-1", Fingerprint: "fp"},
				func(ctx context.Context) (idempotency.Answer, error) {
					got, err := a.NextN(ctx, "order", 3)
					if err != nil {
						return idempotency.Answer{}, err
					}
					b, err := json.Marshal(got)
					return idempotency.Answer{Status: 200, Body: b}, err
				})
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			if err := json.Unmarshal(ans.Body, &got); err != nil {
				t.Fatal(err)
			}
			ids, replayed = append(ids, got), append(replayed, rep)
		}
		return ids, replayed
	}
	run(true, 0)
	copyFile(t, path, path+".copy")
	before, rep := run(false, 2)
	if !slices.Equal(before[0], before[1]) || !rep[1] {
		t.Fatalf("before the loss: %v replayed %v; want one answer, replayed", before, rep)
	}
	copyFile(t, path+".copy", path) // the key's commit is lost
	after, rep := run(false, 2)
	if rep[0] || !rep[1] || !slices.Equal(after[0], after[1]) {
		t.Fatalf("after the loss: %v replayed %v; want a new answer, then its replay", after, rep)
	}
	for _, id := range after[0] {
		if slices.Contains(before[0], id) {
			t.Fatalf("the retry got %v, the lost answer had %v: ID %d twice", after[0], before[0], id)
		}
	}
	t.Logf("key order-1: %v before the loss, %v after", before[0], after[0])
}
