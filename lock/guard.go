package lock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
)

// Dialect is the SQL spoken by the database a Guard writes to. Its
// values are the names idgen's stores register under, so a store's
// driver name converts to it.
type Dialect string

// The dialects a Guard speaks.
const (
	// Postgres is PostgreSQL 9.5 or later (ON CONFLICT), through any
	// database/sql driver, such as pgx's stdlib ("pgx").
	Postgres Dialect = "postgres"
	// MySQL is MySQL 5.7 or later, or MariaDB 10.3 or later, with
	// InnoDB tables, through go-sql-driver/mysql ("mysql").
	MySQL Dialect = "mysql"
	// SQLite is SQLite 3.35 or later (RETURNING), such as modernc's
	// ("sqlite").
	SQLite Dialect = "sqlite"
)

// GuardTable is the side table a Guard keeps tokens in when
// GuardConfig.Table is empty.
const GuardTable = "lock_guard"

// ErrInvalidGuardConfig is returned by NewGuard for a GuardConfig that
// cannot work, and by CreateTable on a guard of a table of yours.
var ErrInvalidGuardConfig = errors.New("lock: invalid guard config")

// GuardConfig configures a Guard. There are two variants:
//
//   - Side table (Key and Column empty): the tokens live in a table of
//     their own, (resource, token), one row per resource, created by
//     CreateTable or by the DDL in docs/locks.md. Use it for tables you
//     cannot alter, or for resources that are not one row.
//   - Column (Key and Column set): the token lives in a BIGINT NOT NULL
//     DEFAULT 0 column of the table you protect, on each row, next to
//     the data it guards; no extra table, and no extra row to lock.
type GuardConfig struct {
	// Dialect is the database's SQL. Required.
	Dialect Dialect
	// Table names the table that keeps the tokens, optionally
	// schema-qualified (schema.table). Empty means GuardTable, a side
	// table; it must be set for the column variant.
	Table string
	// Key is the column of Table that identifies a row, such as its
	// primary key, and Column is its token column. Both empty select the
	// side-table variant.
	Key, Column string
	// Observer, when set, is told the outcome of every Check, so that a
	// program can count stale tokens refused (the server's *Metrics is
	// one) without this package knowing any metrics library.
	Observer GuardObserver
}

// GuardObserver is told the outcome of each Guard.Check: nil for a token
// accepted, an error wrapping ErrStaleToken for one refused as stale, or
// any other error Check returned. It is called after the check, in the
// caller's goroutine, and must not block.
type GuardObserver interface {
	TokenChecked(err error)
}

// Guard is the check a protected resource makes of a fencing token: a
// write succeeds only if its token is at least the highest token the
// resource has seen. It works in the caller's own transaction, so the
// check, the token's raise and the caller's write commit or roll back
// together, and no other transaction can slip between them. It holds no
// state of its own and is safe for concurrent use.
type Guard struct {
	dialect Dialect
	column  bool   // the column variant
	check   string // the statement that raises and reads the token
	locked  string // MySQL only: the locking read after check (see Check)
	create  string // the side table's DDL, "" for the column variant
	obs     GuardObserver
}

// ident is an unquoted SQL identifier, optionally schema-qualified.
// Names are spliced into SQL, so only these are accepted: no quoting
// rules to get wrong, no injection, and each database folds case as it
// does for the caller's own unquoted SQL.
var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// NewGuard returns a Guard for c, or an error wrapping
// ErrInvalidGuardConfig. It does no I/O: the side table may be created
// afterwards (CreateTable).
func NewGuard(c GuardConfig) (*Guard, error) {
	column := c.Key != "" || c.Column != ""
	if c.Table == "" && !column {
		c.Table = GuardTable
	}
	switch {
	case c.Dialect != Postgres && c.Dialect != MySQL && c.Dialect != SQLite:
		return nil, fmt.Errorf("%w: dialect %q: want %q, %q or %q", ErrInvalidGuardConfig, c.Dialect, Postgres, MySQL, SQLite)
	case column && (c.Key == "" || c.Column == ""):
		return nil, fmt.Errorf("%w: Key %q and Column %q: set both for a table of yours, or neither for the side table", ErrInvalidGuardConfig, c.Key, c.Column)
	case column && c.Table == "":
		return nil, fmt.Errorf("%w: Key and Column need the Table they belong to", ErrInvalidGuardConfig)
	case !ident.MatchString(c.Table):
		return nil, fmt.Errorf("%w: Table %q: want an unquoted identifier, optionally schema.table", ErrInvalidGuardConfig, c.Table)
	case column && (!ident.MatchString(c.Key) || !ident.MatchString(c.Column) || c.Key == c.Column):
		return nil, fmt.Errorf("%w: Key %q, Column %q: want two distinct unquoted column names", ErrInvalidGuardConfig, c.Key, c.Column)
	}
	g := &Guard{dialect: c.Dialect, column: column, obs: c.Observer}
	t, k, v := c.Table, c.Key, c.Column
	if !column {
		k, v = "resource", "token"
	}
	// Every statement raises the token to GREATEST(stored, given) and
	// reads back the result, so that one comparison in Go tells a stale
	// token (result > given) from a passing one, whatever the driver
	// reports as rows affected, and the row stays locked until the
	// caller's transaction ends.
	switch {
	case column && c.Dialect == Postgres:
		g.check = fmt.Sprintf(`UPDATE %s SET %s = GREATEST(%[2]s, $1) WHERE %s = $2 RETURNING %[2]s`, t, v, k)
	case column && c.Dialect == SQLite:
		g.check = fmt.Sprintf(`UPDATE %s SET %s = MAX(%[2]s, ?1) WHERE %s = ?2 RETURNING %[2]s`, t, v, k)
	case column && c.Dialect == MySQL:
		// MySQL has no RETURNING; see Check.
		g.check = fmt.Sprintf(`UPDATE %s SET %s = GREATEST(%[2]s, ?) WHERE %s = ?`, t, v, k)
		g.locked = fmt.Sprintf(`SELECT %s FROM %s WHERE %s = ? FOR UPDATE`, v, t, k)
	case c.Dialect == Postgres:
		// The alias lets GREATEST name the stored row's token, also when
		// the table is schema-qualified.
		g.check = fmt.Sprintf(`INSERT INTO %s AS g (resource, token) VALUES ($1, $2)
			ON CONFLICT (resource) DO UPDATE SET token = GREATEST(g.token, EXCLUDED.token) RETURNING token`, t)
		g.create = fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (resource TEXT PRIMARY KEY, token BIGINT NOT NULL)`, t)
	case c.Dialect == SQLite:
		g.check = fmt.Sprintf(`INSERT INTO %s (resource, token) VALUES (?1, ?2)
			ON CONFLICT (resource) DO UPDATE SET token = MAX(token, excluded.token) RETURNING token`, t)
		g.create = fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (resource TEXT PRIMARY KEY NOT NULL, token INTEGER NOT NULL) WITHOUT ROWID`, t)
	case c.Dialect == MySQL:
		// GREATEST(token, ?) rather than VALUES(token), which MySQL 8.0.20
		// deprecates and MariaDB spells differently: the token is bound
		// twice instead.
		g.check = fmt.Sprintf(`INSERT INTO %s (resource, token) VALUES (?, ?)
			ON DUPLICATE KEY UPDATE token = GREATEST(token, ?)`, t)
		g.locked = fmt.Sprintf(`SELECT token FROM %s WHERE resource = ? FOR UPDATE`, t)
		// VARBINARY: resources compare byte for byte, trailing spaces
		// included. Under a _ci or PAD SPACE collation, "Order" and
		// "order " would share a row, and tokens of unrelated locks
		// would refuse each other's writes.
		g.create = fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (resource VARBINARY(255) NOT NULL PRIMARY KEY, token BIGINT NOT NULL) ENGINE=InnoDB`, t)
	}
	return g, nil
}

// CreateTable creates the guard's side table if it does not exist. It
// returns an error wrapping ErrInvalidGuardConfig for the column
// variant, whose table is yours. Teams that run migrations with their
// own tool use the DDL in docs/locks.md instead.
func (g *Guard) CreateTable(ctx context.Context, db interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}) error {
	if g.create == "" {
		return fmt.Errorf("%w: CreateTable is for the side table; the column variant guards a table of yours", ErrInvalidGuardConfig)
	}
	if _, err := db.ExecContext(ctx, g.create); err != nil {
		return fmt.Errorf("lock: create the guard's table: %w", err)
	}
	return nil
}

// Check admits a write with token to the resource key, in tx: if token
// is at least the highest token the resource has seen, it raises that
// to token and returns nil; otherwise it returns an error wrapping
// ErrStaleToken, and the caller must not write and should roll tx back.
// Equal tokens pass, so one holder may write several times.
//
// key is the resource's name, a string following the rules of lock names
// (often the lock's own name), for the side table; for the column
// variant, it is the value of the Key column of the row to be written,
// and a missing row is an error wrapping sql.ErrNoRows.
//
// Check locks the resource's row until tx ends, so concurrent writers
// of one resource take turns: of two transactions with tokens 5 and 6,
// 5 is refused if 6 committed first, and both pass the other way round.
// If tx rolls back, so does the raise. Call Check before the write it
// guards, and commit both together.
//
// Under REPEATABLE READ or SERIALIZABLE, PostgreSQL may refuse Check with
// a serialization failure (40001) when another transaction raised the
// token meanwhile: retry the transaction with the same token, which is
// then refused if stale. On SQLite, begin tx with BEGIN IMMEDIATE
// (modernc's _txlock=immediate) so that it waits for the write lock
// instead of failing with SQLITE_BUSY.
func (g *Guard) Check(ctx context.Context, tx *sql.Tx, key any, token int64) error {
	err := g.checkToken(ctx, tx, key, token)
	if g.obs != nil {
		g.obs.TokenChecked(err)
	}
	return err
}

func (g *Guard) checkToken(ctx context.Context, tx *sql.Tx, key any, token int64) error {
	// A *sql.Tx, not an interface that a *sql.DB satisfies: on its own
	// connection in autocommit, the check would end before the write it
	// guards, and a newer holder could come between them.
	if tx == nil {
		return errors.New("lock: Check needs the caller's transaction, got nil")
	}
	if token < 1 {
		// Every grant's token is at least 1; a zero token is a Lease
		// never acquired, which no resource should admit.
		return fmt.Errorf("lock: Check: token %d was never granted", token)
	}
	if !g.column {
		name, ok := key.(string)
		if !ok {
			return fmt.Errorf("%w: the side table's resource is a string, got %T", ErrInvalidName, key)
		}
		if err := checkText(name, MaxNameLen); err != nil {
			return fmt.Errorf("%w: resource: %w", ErrInvalidName, err)
		}
	}
	var seen int64
	var err error
	switch {
	case g.dialect != MySQL && g.column:
		err = tx.QueryRowContext(ctx, g.check, token, key).Scan(&seen)
	case g.dialect != MySQL:
		err = tx.QueryRowContext(ctx, g.check, key, token).Scan(&seen)
	default:
		// MySQL: raise, then read back under FOR UPDATE. The rows
		// affected cannot tell the outcome (an unchanged row counts 0,
		// or 1 under clientFoundRows), and a plain SELECT under
		// REPEATABLE READ could read the transaction's snapshot, older
		// than the row when the raise changed nothing; a locking read
		// sees the latest committed row, which the raise has locked.
		args := []any{key, token, token}
		if g.column {
			args = []any{token, key}
		}
		if _, err = tx.ExecContext(ctx, g.check, args...); err == nil {
			err = tx.QueryRowContext(ctx, g.locked, key).Scan(&seen)
		}
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("lock: guard: no row with key %#v to check the token of: %w", key, err)
	case err != nil:
		return fmt.Errorf("lock: guard: check token %d for %#v: %w", token, key, err)
	case seen > token:
		return fmt.Errorf("%w: token %d for %#v, which has accepted token %d", ErrStaleToken, token, key, seen)
	}
	return nil
}
