package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store"
)

// sourceRow is one tag of another service's table, with the first ID that
// service can no longer hand out.
type sourceRow struct {
	name, description string
	next, step        int64
	// problem, if not empty, is why the row cannot be imported.
	problem string
}

// importSource is a service's table: its query, and how a row of it
// becomes a sourceRow.
type importSource struct {
	query string
	scan  func(r *sql.Rows) (sourceRow, error)
}

func source(name string) (importSource, bool) {
	switch name {
	case "leaf":
		return leafSource, true
	case "tinyid":
		return tinyidSource, true
	}
	return importSource{}, false
}

var (
	// Leaf hands out [max_id - step, max_id): max_id is the first free ID.
	leafSource = importSource{
		query: `SELECT biz_tag, max_id, step, COALESCE(description, '') FROM leaf_alloc ORDER BY biz_tag`,
		scan: func(r *sql.Rows) (sourceRow, error) {
			var s sourceRow
			err := r.Scan(&s.name, &s.next, &s.step, &s.description)
			return s, err
		},
	}
	// tinyid hands out (max_id - step, max_id], every delta-th ID with
	// id % delta == remainder: max_id itself may be taken.
	tinyidSource = importSource{
		query: `SELECT biz_type, max_id, COALESCE(step, 0), delta, remainder FROM tiny_id_info ORDER BY biz_type`,
		scan: func(r *sql.Rows) (sourceRow, error) {
			var s sourceRow
			var delta, remainder int64
			if err := r.Scan(&s.name, &s.next, &s.step, &delta, &remainder); err != nil {
				return s, err
			}
			if delta != 1 {
				s.problem = fmt.Sprintf("delta %d, remainder %d: tinyid splits this tag's IDs between %d databases, and idgen issues every integer; "+
					"stop tinyid, then import every database's row at once by setting delta to 1 and max_id to the largest max_id of them", delta, remainder, delta)
			}
			if s.next < math.MaxInt64 {
				s.next++
			}
			s.description = "imported from tinyid"
			return s, nil
		},
	}
)

func newImport() *cobra.Command {
	cmd := &cobra.Command{ //nolint:gosec // G101: the Example's DSNs hold placeholder passwords
		Use:   "import leaf|tinyid --from DSN",
		Short: "Copy Leaf's leaf_alloc or tinyid's tiny_id_info rows into idgen's own table",
		Long: `Copy every tag of Leaf's leaf_alloc or tinyid's tiny_id_info into
idgen's id_sequence (--store), so that idgen continues each sequence
where the other service left it, plus --margin. Run it after the other
service's servers have stopped, or give a --margin larger than they can
hand out before they do.

It is idempotent: a tag that exists is raised to the imported value if it
is below, and otherwise left alone; max_id never moves down. It checks
every row first and imports nothing if any cannot be imported: tags
idgen's naming rules refuse, or tinyid rows with a delta other than 1.`,
		Example: "  idgen import leaf --from mysql://leaf:pw@db:3306/leaf --store mysql://idgen:pw@db:3306/idgen --margin 10000 --dry-run",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, ok := source(args[0])
			if !ok {
				return fmt.Errorf("import from %q: use leaf or tinyid", args[0])
			}
			from, _ := cmd.Flags().GetString("from")
			margin, _ := cmd.Flags().GetInt64("margin")
			dry, _ := cmd.Flags().GetBool("dry-run")
			if from == "" {
				return errors.New("--from is required: the DSN of the database holding " + args[0] + "'s table")
			}
			if margin < 0 {
				return errors.New("--margin must be 0 or more")
			}
			ctx := cmd.Context()
			rows, err := readSource(ctx, from, src.query, src.scan)
			if err != nil {
				return fmt.Errorf("read %s's table: %w", args[0], err)
			}
			if err := checkRows(rows, margin); err != nil {
				return err
			}
			if name, _ := cmd.Flags().GetString("sequence-table"); name != "" && name != store.IDSequence {
				return errors.New("import writes idgen's own table; leave --sequence-table at id_sequence")
			}
			run := withStore
			if dry {
				run = withExistingStore // a dry run creates nothing, not even the store
			}
			return run(cmd, func(st *store.Store) error {
				return importRows(ctx, cmd.OutOrStdout(), st, rows, margin, dry)
			})
		},
	}
	cmd.Flags().String("from", "", "DSN of the database with the source table (mysql://…, postgres://…)")
	int64Flag(cmd.Flags(), "margin", 0, "IDs to skip past the source's max_id, for servers still handing out")
	cmd.Flags().Bool("dry-run", false, "print what would change, change nothing")
	return cmd
}

func readSource(ctx context.Context, dsn, query string, scan func(*sql.Rows) (sourceRow, error)) ([]sourceRow, error) {
	if err := requireStoreFile(dsn); err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	st, err := openStore(ctx, dsn, store.IDSequence)
	if err != nil {
		return nil, err
	}
	// Read only: a failed close loses nothing.
	defer func() { _ = st.Close() }()
	r, err := st.DB().QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }() // r.Err below reports what matters
	var out []sourceRow
	for r.Next() {
		s, err := scan(r)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, r.Err()
}

// checkRows reports every row that cannot be imported, or nil.
func checkRows(rows []sourceRow, margin int64) error {
	var problems []string
	for _, r := range rows {
		p := r.problem
		switch {
		case p != "":
		case idgen.CheckTag(r.name) != nil:
			p = idgen.CheckTag(r.name).Error() + "; rename it in the source table (callers too) or keep it on the source service"
		case r.step < 1 || r.step > math.MaxInt32:
			p = fmt.Sprintf("step %d: idgen needs 1 to %d", r.step, math.MaxInt32)
		case r.next < 0 || r.next > math.MaxInt64-margin:
			p = fmt.Sprintf("max_id %d plus margin %d does not fit", r.next, margin)
		default:
			// The checks CreateTag makes, before anything is written: a
			// max_id that leaves no room for one step below the int64
			// limit, or a description no database can store.
			if err := r.tag(margin).Validate(); err != nil {
				p = err.Error()
			}
		}
		if p != "" {
			problems = append(problems, fmt.Sprintf("  %q: %s", r.name, p))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("nothing imported: %d of %d rows cannot be:\n%s", len(problems), len(rows), strings.Join(problems, "\n"))
	}
	return nil
}

// tag is the id_sequence row r becomes.
func (r sourceRow) tag(margin int64) segment.Tag {
	return segment.Tag{Name: r.name, MaxID: r.next + margin, Step: r.step, Description: r.description}
}

// importRows imports rows in one transaction, or, with dry, prints what
// it would do.
func importRows(ctx context.Context, w io.Writer, st *store.Store, rows []sourceRow, margin int64, dry bool) error {
	if dry {
		return planImport(ctx, w, st, rows, margin)
	}
	tags := make([]segment.Tag, len(rows))
	for i, r := range rows {
		tags[i] = r.tag(margin)
	}
	before, err := st.Import(ctx, tags)
	if err != nil {
		return fmt.Errorf("nothing imported: %w", err)
	}
	out := &printer{w: w}
	for i, t := range tags {
		switch b := before[i]; {
		case b < 0:
			out.printf("%s: create, next ID %d, step %d\n", t.Name, t.MaxID, t.Step)
		case b < t.MaxID:
			out.printf("%s: raise next ID from %d to %d\n", t.Name, b, t.MaxID)
		default:
			out.printf("%s: keep next ID %d, already at or past %d\n", t.Name, b, t.MaxID)
		}
	}
	return out.err
}

// planImport prints what importRows would do, changing nothing.
func planImport(ctx context.Context, w io.Writer, st *store.Store, rows []sourceRow, margin int64) error {
	out := &printer{w: w}
	tags, err := st.ListTags(ctx)
	if err != nil {
		return err
	}
	have := map[string]int64{}
	for _, t := range tags {
		have[t.Name] = t.MaxID
	}
	for _, r := range rows {
		to := r.next + margin
		cur, exists := have[r.name]
		switch {
		case !exists:
			out.printf("%s: would create, next ID %d, step %d\n", r.name, to, r.step)
		case cur < to:
			out.printf("%s: would raise next ID from %d to %d\n", r.name, cur, to)
		default:
			out.printf("%s: keep next ID %d, already at or past %d\n", r.name, cur, to)
		}
	}
	return out.err
}
