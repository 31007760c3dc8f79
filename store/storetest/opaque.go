package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/idgen/idgen/api/errcode"
	"github.com/idgen/idgen/opaque"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
)

// The keys of OpaqueRecords: the fleet's, and another one.
const (
	opaqueKeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	otherKeyHex  = "1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100"
)

// OpaqueRecords checks where a store keeps a tag's opaque flag, and that
// it fails closed whenever the flag is in doubt. Each case starts from an
// opaque tag created by the store, then does to the database what a
// restore or an operator would, and opens a new store, as a restarted
// instance, that knows nothing of the tag:
//
//   - a dump of id_sequence alone, restored: the tag is still opaque,
//     under its key; an instance with another key refuses it
//     (opaque_key_mismatch), one with none too (opaque_key_missing);
//   - a row restored from a dump of before migration 00013, without the
//     flag, beside its tag_opaque row: still opaque;
//   - the row and tag_opaque naming different keys: refused
//     (opaque_key_conflict), and never a raw counter;
//   - idgen import over the tag (Import raises its row): still opaque;
//   - a store of before 00013, its opaque tags only in tag_opaque,
//     migrated: the flag is copied onto the rows.
//
// open returns a store over the same database, migrated. The cases run
// DDL on id_sequence (a copy table, and the migration case drops the
// column and applies 00013 again), so nothing else may use the database
// meanwhile.
func OpaqueRecords(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	key, err := opaque.ParseKey(opaqueKeyHex)
	if err != nil {
		t.Fatal(err)
	}
	other, err := opaque.ParseKey(otherKeyHex)
	if err != nil {
		t.Fatal(err)
	}
	admin := open(t)
	exec := func(t *testing.T, q string) {
		t.Helper()
		if _, err := admin.DB().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// create makes an opaque tag with a few IDs handed out, as a tag in
	// use is. Names are UniqueTag's, safe to write as literals.
	create := func(t *testing.T) string {
		t.Helper()
		tag := segmenttest.UniqueTag("opq")
		if err := admin.CreateTag(ctx, segment.Tag{Name: tag, MaxID: 1, Step: 100, Opaque: key.Fingerprint()}); err != nil {
			t.Fatalf("CreateTag: %v", err)
		}
		if _, err := admin.Reserve(ctx, tag, 100); err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		return tag
	}
	// serve is a restarted instance holding k (nil for none): the tag's
	// next ID, from a fresh allocator and Generator over a fresh store.
	serve := func(t *testing.T, k *opaque.Key, tag string) (int64, error) {
		t.Helper()
		st := open(t)
		alloc, err := segment.New(st, segment.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = alloc.Close() })
		return opaque.NewGenerator(alloc, st, k).Next(ctx, tag)
	}
	// encoded checks that id is one of tag's opaque IDs under key: it
	// decodes to a counter the store reserved, and is not that counter.
	encoded := func(t *testing.T, tag string, id int64) {
		t.Helper()
		c, err := key.Decode(tag, id)
		if err != nil {
			t.Fatalf("Decode(%d): %v", id, err)
		}
		var maxID int64
		q := fmt.Sprintf("SELECT max_id FROM id_sequence WHERE biz_tag = '%s'", tag)
		if err := admin.DB().QueryRowContext(ctx, q).Scan(&maxID); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if c == id || c < 1 || c >= maxID {
			t.Fatalf("ID %d of opaque %s decodes to counter %d: want an encoded counter below max_id %d", id, tag, c, maxID)
		}
	}
	code := func(err error) string {
		c, _ := errcode.ForError(err)
		return c.Name
	}
	tagOpaqueRows := func(t *testing.T, tag string) int {
		t.Helper()
		var n int
		q := fmt.Sprintf("SELECT COUNT(*) FROM tag_opaque WHERE biz_tag = '%s'", tag)
		if err := admin.DB().QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}

	t.Run("RestoreOfTheSequenceTableAlone", func(t *testing.T) {
		tag := create(t)
		// What a dump of id_sequence restored over a database that lost
		// the tag holds: the row, every column of it, and nothing else.
		exec(t, "DROP TABLE IF EXISTS idgen_opaque_dump")
		exec(t, fmt.Sprintf("CREATE TABLE idgen_opaque_dump AS SELECT * FROM id_sequence WHERE biz_tag = '%s'", tag))
		t.Cleanup(func() { _, _ = admin.DB().ExecContext(ctx, "DROP TABLE IF EXISTS idgen_opaque_dump") })
		exec(t, fmt.Sprintf("DELETE FROM tag_opaque WHERE biz_tag = '%s'", tag))
		exec(t, fmt.Sprintf("DELETE FROM id_sequence WHERE biz_tag = '%s'", tag))
		exec(t, "INSERT INTO id_sequence SELECT * FROM idgen_opaque_dump")
		if n := tagOpaqueRows(t, tag); n != 0 {
			t.Fatalf("tag_opaque still has %d rows of the tag", n)
		}

		if fp, err := open(t).TagOpaque(ctx, tag); err != nil || fp != key.Fingerprint() {
			t.Fatalf("TagOpaque after the restore = %q, %v; want %q", fp, err, key.Fingerprint())
		}
		listed := false
		tags, err := open(t).ListTags(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range tags {
			listed = listed || tg.Name == tag && tg.Opaque == key.Fingerprint()
		}
		if !listed {
			t.Errorf("ListTags after the restore does not show %s opaque under %s", tag, key.Fingerprint())
		}
		id, err := serve(t, key, tag)
		if err != nil {
			t.Fatalf("Next with the tag's key: %v", err)
		}
		encoded(t, tag, id)
		for _, tc := range []struct {
			name string
			k    *opaque.Key
			want error
			code string
		}{
			{"another key", other, opaque.ErrKeyMismatch, "opaque_key_mismatch"},
			{"no key", nil, opaque.ErrNoKey, "opaque_key_missing"},
		} {
			id, err := serve(t, tc.k, tag)
			if !errors.Is(err, tc.want) || code(err) != tc.code {
				t.Errorf("Next with %s = %d, %v (code %q); want %v, code %s", tc.name, id, err, code(err), tc.want, tc.code)
			}
		}
	})

	t.Run("RowWithoutTheFlagBesideTagOpaque", func(t *testing.T) {
		tag := create(t)
		// A row restored from a dump of before 00013 has the column's
		// default; its tag_opaque row, still there, keeps it opaque.
		exec(t, fmt.Sprintf("UPDATE id_sequence SET opaque_fingerprint = '' WHERE biz_tag = '%s'", tag))
		if fp, err := open(t).TagOpaque(ctx, tag); err != nil || fp != key.Fingerprint() {
			t.Fatalf("TagOpaque = %q, %v; want %q from tag_opaque", fp, err, key.Fingerprint())
		}
		id, err := serve(t, key, tag)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		encoded(t, tag, id)
	})

	t.Run("RecordsThatDisagreeAreRefused", func(t *testing.T) {
		tag := create(t)
		exec(t, fmt.Sprintf("UPDATE tag_opaque SET key_fingerprint = '%s' WHERE biz_tag = '%s'", other.Fingerprint(), tag))
		if fp, err := open(t).TagOpaque(ctx, tag); !errors.Is(err, segment.ErrOpaqueConflict) {
			t.Fatalf("TagOpaque = %q, %v; want ErrOpaqueConflict", fp, err)
		}
		for _, k := range []*opaque.Key{key, other, nil} {
			id, err := serve(t, k, tag)
			if !errors.Is(err, segment.ErrOpaqueConflict) || code(err) != "opaque_key_conflict" {
				t.Errorf("Next with key %v = %d, %v (code %q); want ErrOpaqueConflict, code opaque_key_conflict", k != nil, id, err, code(err))
			}
		}
	})

	t.Run("ImportOverAnOpaqueTagKeepsIt", func(t *testing.T) {
		// idgen import raises a tag that exists to the source's max_id:
		// the row stays, and with it the flag.
		tag := create(t)
		if _, err := admin.Import(ctx, []segment.Tag{{Name: tag, MaxID: 5000, Step: 100}}); err != nil {
			t.Fatalf("Import: %v", err)
		}
		if fp, err := open(t).TagOpaque(ctx, tag); err != nil || fp != key.Fingerprint() {
			t.Fatalf("TagOpaque after an import = %q, %v; want %q", fp, err, key.Fingerprint())
		}
		id, err := serve(t, key, tag)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		encoded(t, tag, id)
	})

	t.Run("MigrationCopiesTagOpaque", func(t *testing.T) {
		tag := create(t)
		plain := segmenttest.UniqueTag("pln")
		if err := admin.CreateTag(ctx, segment.Tag{Name: plain, MaxID: 1, Step: 100}); err != nil {
			t.Fatal(err)
		}
		// Back to the schema of before 00013: the flag only in tag_opaque.
		exec(t, "ALTER TABLE id_sequence DROP COLUMN opaque_fingerprint")
		exec(t, "DELETE FROM goose_db_version WHERE version_id = 13")
		if _, err := admin.Migrate(ctx, nil); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		for want, name := range map[string]string{key.Fingerprint(): tag, "": plain} {
			var fp string
			q := fmt.Sprintf("SELECT opaque_fingerprint FROM id_sequence WHERE biz_tag = '%s'", name)
			if err := admin.DB().QueryRowContext(ctx, q).Scan(&fp); err != nil || fp != want {
				t.Errorf("%s after migration 00013 = %q, %v; want %q", q, fp, err, want)
			}
		}
	})
}
