package sqlstore

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDialect_OnTable(t *testing.T) {
	d := Dialect{
		LockRow:          `SELECT max_id, step FROM id_sequence WHERE biz_tag = ? FOR UPDATE`,
		Advance:          `UPDATE id_sequence SET max_id = ?, updated_at = now() WHERE biz_tag = ?`,
		List:             `SELECT biz_tag, max_id, step, description, updated_at FROM id_sequence ORDER BY biz_tag`,
		WorkerSelectFree: `SELECT worker_id FROM worker_node WHERE updated_at > 0`,
		NoRows:           errors.New("none"),
	}
	if got := d.OnTable(IDSequence); !reflect.DeepEqual(got, d) {
		t.Fatalf("OnTable(IDSequence) changed the dialect: %+v", got)
	}
	got := d.OnTable(LeafAlloc)
	for _, want := range []struct{ got, want string }{
		{got.LockRow, `SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE`},
		{got.Advance, `UPDATE leaf_alloc SET max_id = ?, update_time = now() WHERE biz_tag = ?`},
		{got.List, `SELECT biz_tag, max_id, step, COALESCE(description, ''), update_time FROM leaf_alloc ORDER BY biz_tag`},
		{got.WorkerSelectFree, d.WorkerSelectFree},
	} {
		if want.got != want.want {
			t.Errorf("got  %s\nwant %s", want.got, want.want)
		}
	}
	v := reflect.ValueOf(got)
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; v.Field(i).Kind() == reflect.String && !strings.HasPrefix(name, "Worker") &&
			strings.Contains(v.Field(i).String(), "id_sequence") {
			t.Errorf("%s still names id_sequence", name)
		}
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
