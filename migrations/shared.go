package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"

	"github.com/pressly/goose/v3"
)

// UpShared is Up for instances that reserve segments from another
// system's table (Leaf's leaf_alloc): it applies every pending migration
// except those of idgen's own id_sequence table, so idgen creates no
// sequence table of its own there. A later Up applies the skipped ones.
func UpShared(ctx context.Context, db *sql.DB, d Dialect, logger *slog.Logger) (int64, error) {
	skip, err := sequenceFiles(d)
	if err != nil {
		return 0, err
	}
	return up(ctx, db, d, logger, goose.WithExcludeNames(skip))
}

// sequenceFiles names the migrations of d whose Up section mentions
// id_sequence.
func sequenceFiles(d Dialect) ([]string, error) {
	entries, err := fs.ReadDir(files, string(d))
	if err != nil {
		return nil, fmt.Errorf("migrations: unknown dialect %q: %w", d, err)
	}
	var out []string
	for _, e := range entries {
		b, err := fs.ReadFile(files, string(d)+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		upPart, _, _ := strings.Cut(string(b), "-- +goose Down")
		if strings.Contains(upPart, "id_sequence") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
