package sqlstore

import (
	"fmt"
	"regexp"
)

// SequenceTable names the table a Store reserves segments from and the
// column that records its last change. idgen's own is IDSequence; LeafAlloc
// is Meituan Leaf's leaf_alloc, used as it is, so that Leaf's servers and
// idgen can serve the same tags from one table while callers move.
type SequenceTable struct {
	// Name is the table.
	Name string
	// UpdatedColumn is the timestamp column set on every change.
	UpdatedColumn string
}

// The sequence tables idgen knows. Both have biz_tag, max_id, step and
// description columns with the same meaning: max_id is the first ID not
// reserved yet, and a reservation moves it up by at least step under the
// row lock.
var (
	IDSequence = SequenceTable{Name: "id_sequence", UpdatedColumn: "updated_at"}
	LeafAlloc  = SequenceTable{Name: "leaf_alloc", UpdatedColumn: "update_time"}
)

// ParseSequenceTable returns the known table called name.
func ParseSequenceTable(name string) (SequenceTable, error) {
	switch name {
	case "", IDSequence.Name:
		return IDSequence, nil
	case LeafAlloc.Name:
		return LeafAlloc, nil
	}
	return SequenceTable{}, fmt.Errorf("store: unknown sequence table %q: use %s (idgen's own) or %s (Leaf's, shared with Leaf servers)",
		name, IDSequence.Name, LeafAlloc.Name)
}

// Own reports whether t is idgen's own table, the one its migrations create.
func (t SequenceTable) Own() bool { return t == IDSequence || t == SequenceTable{} }

var (
	reTable   = regexp.MustCompile(`\bid_sequence\b`)
	reUpdated = regexp.MustCompile(`\bupdated_at\b`)
	reDescSel = regexp.MustCompile(`\bstep, description,`)
)

// OnTable returns d with its segment statements rewritten to run on t
// instead of id_sequence. The worker_node statements are left alone.
// description may be NULL in tables idgen did not create (Leaf's is), so
// List reads it as ”.
func (d Dialect) OnTable(t SequenceTable) Dialect {
	if t.Own() {
		return d
	}
	rw := func(q string) string {
		q = reTable.ReplaceAllLiteralString(q, t.Name)
		return reUpdated.ReplaceAllLiteralString(q, t.UpdatedColumn)
	}
	d.LockRow = rw(d.LockRow)
	d.Advance = rw(d.Advance)
	d.Insert = rw(d.Insert)
	d.Release = rw(d.Release)
	d.SetStep = rw(d.SetStep)
	d.List = reDescSel.ReplaceAllLiteralString(rw(d.List), "step, COALESCE(description, ''),")
	return d
}
