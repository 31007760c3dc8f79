package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/snowflake"
	st "github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/postgres"
)

// The README's library example, call for call, on PostgreSQL instead of
// its SQLite file (issue 40): with no Presence call, the process holds a
// presence lease while its allocator has a range, the generator's worker
// lease is under the same owner (so neither holds its own reservations
// back after a fence), and both rows are released by the time run
// returns. observe is called at the points the README's comments name.
func TestREADME_LibraryExample(t *testing.T) {
	srv := dbtest.Start(t, dbtest.Postgres)
	var owner string
	rows := func(ctx context.Context, s *st.Store) (presence, worker int) {
		t.Helper()
		leases, err := s.Leases().Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range leases {
			switch {
			case l.Owner != owner:
			case l.WorkerID >= st.PresenceFrom:
				presence++
			default:
				worker++
			}
		}
		return presence, worker
	}
	observe := func(ctx context.Context, s *st.Store, step string) {
		t.Helper()
		owner = s.Owner()
		p, w := rows(ctx, s)
		switch step {
		case "segment":
			if p != 1 || w != 0 {
				t.Fatalf("after alloc.Next: %d presence and %d worker leases of %q, want 1 and 0", p, w, owner)
			}
		case "snowflake":
			if p != 1 || w != 1 {
				t.Fatalf("after gen.Next: %d presence and %d worker leases of %q, want 1 and 1 (one owner)", p, w, owner)
			}
		}
	}

	// The README's run, with sqlite.Open(ctx, "sqlite://./idgen.db")
	// replaced by postgres.Open(ctx, dsn) and observe added.
	run := func(ctx context.Context, dsn string) (err error) {
		store, err := postgres.Open(ctx, dsn)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, store.Close()) }() // last: no -wal/-shm left
		if _, err := store.Migrate(ctx, nil); err != nil {
			return err
		}

		// Segment mode.
		alloc, err := segment.New(store, segment.Options{AutoCreate: true})
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, alloc.Close()) }() // hands the unused rest back
		id, err := alloc.Next(ctx, "order")
		if err != nil {
			return err
		}
		observe(ctx, store, "segment")

		// Snowflake mode, with a worker ID leased from the same database.
		gen, err := snowflake.NewLeased(ctx, store.Leases(), snowflake.LeasedConfig{})
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, gen.Shutdown(ctx)) }() // releases the worker ID
		sid, err := gen.Next(ctx, "order")
		if err != nil {
			return err
		}
		observe(ctx, store, "snowflake")
		fmt.Println(id, sid)
		return nil
	}

	ctx := context.Background()
	if err := run(ctx, srv.DSN); err != nil {
		t.Fatal(err)
	}
	after, err := postgres.Open(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if p, w := rows(ctx, after); p != 0 || w != 0 {
		t.Fatalf("after run returned, %q still holds %d presence and %d worker leases", owner, p, w)
	}
}
