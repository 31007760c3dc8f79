package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/idgen/idgen/segment"
)

// Import creates each tag that has no row and raises each that does to
// at least its MaxID, never lowering one, in one transaction: either
// every tag is imported or none is. Every tag is checked first
// (segment.Tag.Validate), so a row that could not be reserved from, such as
// one whose max_id leaves no room for a step below the int64 limit, fails
// the whole import before anything is written. before[i] is tags[i]'s
// max_id before the import, or -1 when Import created it.
func (s *Store) Import(ctx context.Context, tags []segment.Tag) (before []int64, err error) {
	for _, t := range tags {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("tag %q: %w", t.Name, err)
		}
	}
	var out []int64
	err = retry(ctx, s.d, &s.retryHook, "import", func() error {
		out = out[:0]
		return s.db.InTx(ctx, func(q Querier) error {
			for _, t := range tags {
				done, err := s.importOne(ctx, q, t)
				if err != nil {
					return wrap("import", t.Name, err)
				}
				out = append(out, done)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// importOne creates or raises t under its row lock and returns the
// row's max_id before, or -1 when it created the row.
func (s *Store) importOne(ctx context.Context, q Querier, t segment.Tag) (int64, error) {
	var maxID, step int64
	err := q.QueryRow(ctx, s.d.LockRow, t.Name).Scan(&maxID, &step)
	switch {
	case errors.Is(err, s.d.NoRows):
		from, err := s.start(ctx, q, t.Name, t.MaxID)
		if err != nil {
			return 0, err
		}
		_, err = q.Exec(ctx, s.d.Insert, t.Name, from, t.Step, t.Description)
		return -1, err
	case err != nil:
		return 0, err
	case maxID < t.MaxID:
		_, err := q.Exec(ctx, s.d.Advance, t.MaxID, t.Name)
		return maxID, err
	}
	return maxID, nil
}
