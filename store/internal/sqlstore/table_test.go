package sqlstore

import (
	"errors"
	"strings"
	"testing"
)

// The segment statements follow the sequence table a store is opened on;
// the worker, layout and fence statements name their own tables whatever
// it is. description may be NULL in tables idgen did not create (Leaf's
// is), so List reads it as an empty string there.
func TestDialect_OnTable(t *testing.T) {
	sp := Spelling{Numbered: true, ForUpdate: " FOR UPDATE", Now: "now()", Greatest: "GREATEST", Int: "INTEGER",
		NoRows: errors.New("none"), Identity: &ServerIdentity{Server: "'', '', '', ''"}}
	own, err := NewDialect(sp, IDSequence)
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewDialect(sp, LeafAlloc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ got, want string }{
		{own.LockRow, `SELECT max_id, step FROM id_sequence WHERE biz_tag = $1 FOR UPDATE`},
		{own.List, `SELECT biz_tag, max_id, step, description, updated_at FROM id_sequence ORDER BY biz_tag`},
		{got.LockRow, `SELECT max_id, step FROM leaf_alloc WHERE biz_tag = $1 FOR UPDATE`},
		{got.Advance, `UPDATE leaf_alloc SET max_id = $1, update_time = now() WHERE biz_tag = $2`},
		{got.List, `SELECT biz_tag, max_id, step, COALESCE(description, ''), update_time FROM leaf_alloc ORDER BY biz_tag`},
		{got.WorkerSelectFree, own.WorkerSelectFree},
		{got.LayoutUpdate, own.LayoutUpdate},
		{got.Identity.Bump[LeafAlloc.Name], `UPDATE leaf_alloc SET max_id = CASE WHEN max_id <= $1 THEN max_id + $2 ELSE 9223372036854775807 END, update_time = now()`},
		{got.Identity.Bump[IDSequence.Name], own.Identity.Bump[IDSequence.Name]},
	} {
		if want.got != want.want {
			t.Errorf("got  %s\nwant %s", want.got, want.want)
		}
	}
	for name, q := range map[string]string{"LockRow": got.LockRow, "Advance": got.Advance, "Insert": got.Insert, "Release": got.Release,
		"List": got.List, "SetStep": got.SetStep, "OpaqueSelect": got.OpaqueSelect} {
		if strings.Contains(q, "id_sequence") || strings.Contains(q, "updated_at") {
			t.Errorf("%s still names id_sequence or updated_at: %s", name, q)
		}
	}
	if !strings.Contains(got.LayoutUpdate, "updated_at") {
		t.Errorf("LayoutUpdate, of snowflake_layout, moved off its own updated_at: %s", got.LayoutUpdate)
	}
}

func TestParseSequenceTable(t *testing.T) {
	for in, want := range map[string]SequenceTable{"": IDSequence, "id_sequence": IDSequence, "leaf_alloc": LeafAlloc} {
		if got, err := ParseSequenceTable(in); err != nil || got != want {
			t.Errorf("ParseSequenceTable(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseSequenceTable("tiny_id_info"); err == nil || !strings.Contains(err.Error(), "leaf_alloc") {
		t.Errorf("ParseSequenceTable(tiny_id_info) = %v, want an error naming the choices", err)
	}
}
