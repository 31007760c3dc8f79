package sqlstore

import "fmt"

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
