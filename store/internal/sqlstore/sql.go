package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/template"

	"github.com/idgen/idgen/store/fence"
)

// Spelling is what one database writes its own way in idgen's SQL. Every
// statement is written once, below, as a template over a Spelling and a
// sequence table, and rendered once when a store opens (NewDialect).
type Spelling struct {
	// Numbered makes placeholders $1, $2, … (PostgreSQL); otherwise ?.
	Numbered bool
	// ForUpdate is the suffix of a locking read: " FOR UPDATE", or ""
	// where every transaction holds the write lock from its start
	// (SQLite's BEGIN IMMEDIATE).
	ForUpdate string
	// SkipLocked is the suffix of the free-worker read: " FOR UPDATE SKIP
	// LOCKED" (MySQL 8.0+, MariaDB 10.6+, PostgreSQL), or "".
	SkipLocked string
	// Now is the current time, for updated_at: now(), CURRENT_TIMESTAMP.
	Now string
	// Greatest is the function of the larger of two values: GREATEST, or
	// SQLite's two-argument MAX.
	Greatest string
	// Int is the integer type of a CAST: INTEGER, SIGNED.
	Int string
	// InsertIgnore writes insert-if-absent as INSERT IGNORE (MySQL)
	// rather than INSERT … ON CONFLICT (…) DO NOTHING.
	InsertIgnore bool
	// IdemSweep deletes up to limit idempotency keys expired at now, with
	// ? placeholders. Args: now, limit.
	IdemSweep string
	// DedupSweep deletes up to limit consumer dedup records expired at
	// now, with ? placeholders. Args: now, limit.
	DedupSweep string

	// Notify, if set, wakes the waiters of a lock that other connections
	// hold, in the transaction that frees it: PostgreSQL's
	// SELECT pg_notify('idgen_lock', ?), which the store's listener
	// (Conn.Listen) hears once the transaction commits. Args: the lock's
	// name. Empty: waiters poll (see Locks).
	Notify string

	// WritingWith says the database writes in a WITH clause and returns
	// an UPDATE's rows (PostgreSQL's WITH … AS (INSERT …), UPDATE …
	// RETURNING): a lock's grant and its mark are then one statement,
	// and so are a release and its wake-up (LockStatements).
	WritingWith bool
	// UpdateJoin says the database updates two tables in one UPDATE …
	// JOIN … SET (MySQL, MariaDB): a lock's grant and its existing mark
	// are then one statement.
	UpdateJoin bool

	// NoRows, IsDuplicate and IsRetryable are as in Dialect.
	NoRows      error
	IsDuplicate func(error) bool
	IsRetryable func(error) bool

	// Identity, if set, is the server's part of fencing; the store's
	// part, the idgen_fence statements, is rendered beside it. Nil turns
	// fencing off.
	Identity *ServerIdentity
}

// ServerIdentity is how a database names its server and history, the
// part of IdentitySQL each backend writes itself (see IdentitySQL for
// the fields).
type ServerIdentity struct {
	Kind       fence.Kind
	Server     string
	ConnSystem func(ctx context.Context, q Querier) (string, error)
	Tick       string
	Tables     string
}

// NewDialect renders idgen's SQL, every statement written once here as
// a template, for the database sp spells and segments in table t. In a
// template, {{.T}} is the sequence table and {{.U}} its updated column,
// {{.D}} its description as read (Leaf's may be NULL), and {{ins}} …
// {{conflict "cols"}} is insert-if-absent.
func NewDialect(sp Spelling, t SequenceTable) (Dialect, error) {
	r := renderer{sp: sp, t: t}
	d := Dialect{
		LockRow:       r.sql(`SELECT max_id, step FROM {{.T}} WHERE biz_tag = ?{{.ForUpdate}}`),
		Advance:       r.sql(`UPDATE {{.T}} SET max_id = ?, {{.U}} = {{.Now}} WHERE biz_tag = ?`),
		Insert:        r.sql(`INSERT INTO {{.T}} (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)`),
		Release:       r.sql(`UPDATE {{.T}} SET max_id = ?, {{.U}} = {{.Now}} WHERE biz_tag = ? AND max_id = ?`),
		List:          r.sql(`SELECT biz_tag, max_id, step, {{.D}}, {{.U}} FROM {{.T}} ORDER BY biz_tag`),
		SetStep:       r.sql(`UPDATE {{.T}} SET step = ?, {{.U}} = {{.Now}} WHERE biz_tag = ?`),
		AdvanceAll:    r.sql(bumpAll),
		ListMax:       r.sql(`SELECT biz_tag, max_id FROM {{.T}} ORDER BY biz_tag`),
		Witness:       r.sql(`UPDATE {{.T}} SET max_id = ?, {{.U}} = {{.Now}} WHERE biz_tag = ? AND max_id < ?`),
		OpaqueInsert:  r.sql(`INSERT INTO tag_opaque (biz_tag, key_fingerprint) VALUES (?, ?)`),
		WitnessCreate: r.sql(`{{ins}} INTO {{.T}} (biz_tag, max_id, step, description) VALUES (?, ?, ?, ''){{conflict "biz_tag"}}`),
		MarkSet: r.sql(`INSERT INTO idgen_mark (seq_table, biz_tag, max_id) SELECT '{{.T}}', ?, CAST(? AS {{bigint}}) FROM idgen_fence
		WHERE id = 1 AND generation = ?{{upsert "seq_table, biz_tag" "max_id"}}`),
		LockExtra:   r.sql(`COALESCE((SELECT generation FROM idgen_fence WHERE id = 1), 0), COALESCE((` + markOf + `), 0)`),
		MarkRelease: r.sql(`UPDATE idgen_mark SET max_id = ? WHERE seq_table = '{{.T}}' AND biz_tag = ? AND max_id = ?`),
		MarkSelect:  r.sql(`SELECT COALESCE((SELECT max_id FROM idgen_mark WHERE seq_table = '{{.T}}' AND biz_tag = ?), 0)`),
		MarkLock:    r.sql(`SELECT max_id FROM idgen_mark WHERE seq_table = '{{.T}}' AND biz_tag = ?{{.ForUpdate}}`),

		WorkerSelectFree: r.sql(`SELECT worker_id, lease_expires_at, last_timestamp FROM worker_node
		WHERE worker_id >= ? AND worker_id <= ? AND (owner = '' OR (lease_expires_at <= ? AND (seen_generation <> -1 OR ? = 1 OR owner = ?))) AND pinned = 0
		ORDER BY worker_id LIMIT 1{{.SkipLocked}}`),
		WorkerTake:      r.sql(`UPDATE worker_node SET owner = ?, lease_expires_at = ?, last_timestamp = ?, pinned = ?, range_cap = ?, updated_at = {{.Now}} WHERE worker_id = ?`),
		WorkerSelectOne: r.sql(`SELECT owner, lease_expires_at, last_timestamp, seen_generation FROM worker_node WHERE worker_id = ?{{.ForUpdate}}`),
		WorkerUnpin:     r.sql(`UPDATE worker_node SET pinned = 0 WHERE worker_id = ?`),
		WorkerLowestMissing: r.sql(`SELECT COALESCE(MIN(c.w), -1) FROM (SELECT CAST(? AS {{.Int}}) AS w UNION ALL SELECT worker_id + 1 FROM worker_node WHERE worker_id >= ? AND worker_id < ?) c
		WHERE c.w <= ? AND NOT EXISTS (SELECT 1 FROM worker_node n WHERE n.worker_id = c.w)`),
		WorkerSeed: r.sql(`{{ins}} INTO worker_node (worker_id) VALUES %s{{conflict "worker_id"}}`),
		WorkerRenew: r.sql(`UPDATE worker_node SET lease_expires_at = {{.Greatest}}(lease_expires_at, ?), last_timestamp = {{.Greatest}}(last_timestamp, ?), updated_at = {{.Now}}
		WHERE worker_id = ? AND owner = ? AND lease_expires_at > ?`),
		WorkerRelease: r.sql(`UPDATE worker_node SET owner = '', lease_expires_at = 0, last_timestamp = {{.Greatest}}(last_timestamp, ?), updated_at = {{.Now}}
		WHERE worker_id = ? AND owner = ?`),
		WorkerList: r.sql(`SELECT worker_id, owner, lease_expires_at, last_timestamp FROM worker_node ORDER BY worker_id`),

		LayoutAnchor: r.sql(`{{ins}} INTO snowflake_layout (lease_table, ordinal, epoch_ms, time_bits, worker_bits, sequence_bits) VALUES (?, 0, ?, ?, ?, ?){{conflict "lease_table, ordinal"}}`),
		LayoutLock:   r.sql(`SELECT ordinal FROM snowflake_layout WHERE lease_table = ? AND ordinal = 0{{.ForUpdate}}`),
		LayoutSelect: r.sql(`SELECT ordinal, epoch_ms, time_bits, worker_bits, sequence_bits, worker_from, worker_to, not_before, retired_at FROM snowflake_layout WHERE lease_table = ? ORDER BY ordinal{{.ForUpdate}}`),
		LayoutList:   r.sql(`SELECT ordinal, epoch_ms, time_bits, worker_bits, sequence_bits, worker_from, worker_to, not_before, retired_at FROM snowflake_layout WHERE lease_table = ? ORDER BY ordinal`),
		LayoutInsert: r.sql(`INSERT INTO snowflake_layout (lease_table, ordinal, epoch_ms, time_bits, worker_bits, sequence_bits, worker_from, worker_to, not_before, retired_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		LayoutUpdate: r.sql(`UPDATE snowflake_layout SET epoch_ms = ?, time_bits = ?, worker_bits = ?, sequence_bits = ?, worker_from = ?, worker_to = ?, not_before = ?, retired_at = ?, updated_at = {{.Now}} WHERE lease_table = ? AND ordinal = ?`),
		// Presence leases stamp no IDs: a relayout neither waits for nor
		// disowns them.
		WorkerHeld:   r.sql(`SELECT worker_id, owner, lease_expires_at FROM worker_node WHERE owner <> '' AND worker_id < ` + presenceFromSQL + ` ORDER BY worker_id{{.ForUpdate}}`),
		WorkerDisown: r.sql(`UPDATE worker_node SET owner = '', last_timestamp = {{.Greatest}}(last_timestamp, lease_expires_at), lease_expires_at = 0, updated_at = {{.Now}} WHERE owner <> '' AND worker_id < ` + presenceFromSQL),
		WorkerLatest: r.sql(`SELECT COALESCE(MAX({{.Greatest}}(last_timestamp, lease_expires_at)), 0) FROM worker_node WHERE worker_id < ` + presenceFromSQL),

		NoRows:      sp.NoRows,
		IsDuplicate: sp.IsDuplicate,
		IsRetryable: sp.IsRetryable,
	}
	r.opaque(&d)
	if sp.Identity != nil {
		d.Identity = r.identity()
	}
	return d, r.err
}

// opaque renders the statements of an opaque tag's fingerprint. On
// id_sequence it is a column of the tag's row (migration 00013), written
// by the INSERT that creates the row, so that nothing can drop it apart
// from the counter; tag_opaque is still written and read beside it, for
// instances of before 00013 and for stores they created tags in. Leaf's
// leaf_alloc has no such column: there only tag_opaque is read, and
// opaque tags are refused (cmd/idgen, readServeOpaque).
func (r *renderer) opaque(d *Dialect) {
	if r.t.Name != IDSequence.Name {
		d.OpaqueSelect = r.sql(`SELECT '', COALESCE((SELECT o.key_fingerprint FROM tag_opaque o WHERE o.biz_tag = ?), '') FROM {{.T}} WHERE biz_tag = ?`)
		d.OpaqueList = r.sql(`SELECT biz_tag, '', key_fingerprint FROM tag_opaque`)
		return
	}
	d.InsertOpaque = r.sql(`INSERT INTO {{.T}} (biz_tag, max_id, step, description, opaque_fingerprint) VALUES (?, ?, ?, ?, ?)`)
	d.OpaqueSelect = r.sql(`SELECT s.opaque_fingerprint, COALESCE((SELECT o.key_fingerprint FROM tag_opaque o WHERE o.biz_tag = ?), '') FROM {{.T}} s WHERE s.biz_tag = ?`)
	d.OpaqueList = r.sql(`SELECT s.biz_tag, s.opaque_fingerprint, COALESCE(o.key_fingerprint, '') FROM {{.T}} s LEFT JOIN tag_opaque o ON o.biz_tag = s.biz_tag
		WHERE s.opaque_fingerprint <> '' OR o.biz_tag IS NOT NULL`)
}

// bumpAll adds a margin to every row's max_id, saturating at the int64
// limit. Args: limit, margin.
const bumpAll = `UPDATE {{.T}} SET max_id = CASE WHEN max_id <= ? THEN max_id + ? ELSE 9223372036854775807 END, {{.U}} = {{.Now}}`

// markOf is a row's mark (idgen_mark), NULL if it has none, in a
// statement on its sequence table.
const markOf = `SELECT m.max_id FROM idgen_mark m WHERE m.seq_table = '{{.T}}' AND m.biz_tag = {{.T}}.biz_tag`

// identity renders the idgen_fence statements beside the server's part.
func (r *renderer) identity() *IdentitySQL {
	id := r.sp.Identity
	bump, maxStep, rows, toMarks := map[string]string{}, map[string]string{}, map[string]string{}, map[string]string{}
	for _, t := range []SequenceTable{IDSequence, LeafAlloc} {
		on := &renderer{sp: r.sp, t: t}
		bump[t.Name] = on.sql(bumpAll)
		toMarks[t.Name] = on.sql(`UPDATE {{.T}} SET max_id = (` + markOf + `), {{.U}} = {{.Now}} WHERE max_id < (` + markOf + `)`)
		maxStep[t.Name] = on.sql(`SELECT COALESCE(MAX(step), 0) FROM {{.T}}`)
		rows[t.Name] = on.sql(`SELECT COUNT(*) FROM {{.T}}`)
		r.err = cmp.Or(r.err, on.err)
	}
	return &IdentitySQL{
		Kind: id.Kind, Server: id.Server, ConnSystem: id.ConnSystem, Tick: id.Tick, Tables: id.Tables, Bump: bump,
		MaxStep: maxStep, Rows: rows, ToMarks: toMarks,
		WorkerRows:  r.sql(`SELECT COUNT(*) FROM worker_node`),
		Lock:        r.sql(`SELECT generation FROM idgen_fence WHERE id = 1{{.ForUpdate}}`),
		CountLive:   r.sql(`SELECT COUNT(*), COALESCE(MAX(range_cap), 0) FROM worker_node WHERE owner <> '' AND lease_expires_at > ?`),
		NewestLease: r.sql(`SELECT COALESCE(MAX(lease_expires_at), 0) FROM worker_node WHERE owner <> ''`),
		Hold: r.sql(`UPDATE worker_node SET lease_expires_at = ?, updated_at = {{.Now}}
		WHERE owner <> '' AND lease_expires_at > ? AND lease_expires_at < ?`),
		Floor:     r.sql(`UPDATE worker_node SET last_timestamp = ?, updated_at = {{.Now}} WHERE last_timestamp < ?`),
		CheckedIn: r.sql(`UPDATE worker_node SET seen_generation = {{.Greatest}}(seen_generation, ?) WHERE worker_id = ? AND owner = ?`),
		HeldBack: r.sql(`SELECT COUNT(*) FROM worker_node w, idgen_fence f WHERE f.id = 1 AND f.fence_until > ?
		AND w.owner <> '' AND w.owner <> ? AND w.owner <> ? AND (w.lease_expires_at > f.fence_until - ? OR w.seen_generation = -1) AND w.seen_generation < f.generation`),
		MarkCounted: r.sql(`UPDATE worker_node SET seen_generation = -1 WHERE owner <> '' AND lease_expires_at > ? AND lease_expires_at <= ?`),
		Write: r.sql(`UPDATE idgen_fence SET backend = ?, system_id = ?, timeline = ?, log_position = ?, generation = ?,
		fence_until = ?, tag_floor = ?, covers = ?, fences = fences + ?, fenced_at = {{.Greatest}}(fenced_at, ?), recorded_at = {{.Now}} WHERE id = 1`),
		Create:          r.sql(`UPDATE idgen_fence SET tag_creates = tag_creates + 1 WHERE id = 1`),
		TagFloor:        r.sql(`SELECT COALESCE((SELECT tag_floor FROM idgen_fence WHERE id = 1), 0)`),
		Params:          r.sql(`SELECT fence_margin, lease_ttl_ms FROM idgen_fence WHERE id = 1`),
		SetParams:       r.sql(`UPDATE idgen_fence SET fence_margin = ?, lease_ttl_ms = ? WHERE id = 1`),
		LiveOthers:      r.sql(`SELECT COUNT(*) FROM worker_node WHERE owner <> '' AND lease_expires_at > ?`),
		RaiseFloor:      r.sql(`UPDATE idgen_fence SET tag_floor = CASE WHEN tag_floor <= ? THEN tag_floor + ? ELSE 9223372036854775807 END WHERE id = 1`),
		LockBump:        r.sql(`UPDATE idgen_lock SET token = CASE WHEN token <= ? THEN token + ? ELSE 9223372036854775807 END`),
		LockRaise:       r.sql(`UPDATE idgen_lock_mark SET token = ? WHERE name = ? AND token < ?`),
		LockRaiseCreate: r.sql(`{{ins}} INTO idgen_lock_mark (name, token) VALUES (?, ?){{conflict "name"}}`),
	}
}

// NewIdemStatements renders the idempotency_key statements for sp.
func NewIdemStatements(sp Spelling) (IdemStatements, error) {
	r := renderer{sp: sp, t: IDSequence}
	s := IdemStatements{
		Insert: r.sql(`{{ins}} INTO idempotency_key (scope, idem_key, fingerprint, owner, body, locked_until, expires_at)
		VALUES (?, ?, ?, ?, '', ?, ?){{conflict "scope, idem_key"}}`),
		Get: r.sql(`SELECT fingerprint, owner, status, content_type, body, locked_until, expires_at FROM idempotency_key WHERE scope = ? AND idem_key = ?`),
		TakeOver: r.sql(`UPDATE idempotency_key SET fingerprint = ?, owner = ?, status = 0, content_type = '', body = '', locked_until = ?, expires_at = ?
		WHERE scope = ? AND idem_key = ? AND owner = ? AND (expires_at <= ? OR (status = 0 AND locked_until <= ?))`),
		Complete: r.sql(`UPDATE idempotency_key SET status = ?, content_type = ?, body = ? WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 0`),
		Delete:   r.sql(`DELETE FROM idempotency_key WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 0`),
		Sweep:    r.sql(sp.IdemSweep),
		Count:    r.sql(`SELECT scope, COUNT(*) FROM idempotency_key WHERE expires_at > ? GROUP BY scope`),
		// The primary key (scope, idem_key) bounds the scan to the scope.
		CountScope: r.sql(`SELECT COUNT(*) FROM idempotency_key WHERE scope = ? AND expires_at > ?`),
		// The expires_at index bounds the scan to the backlog.
		CountExpired: r.sql(`SELECT COUNT(*) FROM idempotency_key WHERE expires_at <= ?`),
	}
	return s, r.err
}

// renderer renders statements for one Spelling and table, keeping the
// first error.
type renderer struct {
	sp  Spelling
	t   SequenceTable
	err error
}

// sql renders one statement.
func (r *renderer) sql(text string) string {
	q, err := r.execute(text)
	r.err = cmp.Or(r.err, err)
	return q
}

// sqlData is what a template sees.
type sqlData struct {
	Spelling
	T, U, D string
}

func (r *renderer) execute(text string) (string, error) {
	sp := r.sp
	funcs := template.FuncMap{
		"ins": func() string {
			if sp.InsertIgnore {
				return "INSERT IGNORE"
			}
			return "INSERT"
		},
		// bigint is the 64-bit integer type of a CAST.
		"bigint": func() string {
			if sp.Int == "SIGNED" {
				return sp.Int
			}
			return "BIGINT"
		},
		"upsert": func(cols, set string) string {
			if sp.InsertIgnore {
				return " ON DUPLICATE KEY UPDATE " + set + " = VALUES(" + set + ")"
			}
			return " ON CONFLICT (" + cols + ") DO UPDATE SET " + set + " = excluded." + set
		},
		"conflict": func(cols string) string {
			if sp.InsertIgnore {
				return ""
			}
			return " ON CONFLICT (" + cols + ") DO NOTHING"
		},
	}
	tm, err := template.New("sql").Funcs(funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return "", fmt.Errorf("sqlstore: %w", err)
	}
	data := sqlData{Spelling: sp, T: r.t.Name, U: r.t.UpdatedColumn, D: "description"}
	if !r.t.Own() {
		data.D = "COALESCE(description, '')"
	}
	var b strings.Builder
	if err := tm.Execute(&b, data); err != nil {
		return "", fmt.Errorf("sqlstore: %w", err)
	}
	if !sp.Numbered {
		return b.String(), nil
	}
	return number(b.String()), nil
}

// number rewrites the ? placeholders of q as $1, $2, …; idgen's
// statements have no ? anywhere else.
func number(q string) string {
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c != '?' {
			b.WriteRune(c)
			continue
		}
		n++
		b.WriteString("$" + strconv.Itoa(n))
	}
	return b.String()
}

// seedWorkers is d.WorkerSeed for the worker IDs from lo to hi: literal
// integers the store writes itself, so there is nothing to escape.
func (d Dialect) seedWorkers(lo, hi int64) string {
	var b strings.Builder
	for id := lo; id <= hi; id++ {
		if id > lo {
			b.WriteByte(',')
		}
		b.WriteString("(" + strconv.FormatInt(id, 10) + ")")
	}
	return fmt.Sprintf(d.WorkerSeed, b.String())
}

// IdentitySQL is the fencing part of a Dialect (see package fence): how
// to read the server's identity and the store's record of it, and how to
// fence. Its statements name the idgen_fence table (migration 00005),
// whose one row has id 1, except Bump, which runs on each sequence table
// the store has. NewDialect renders it from a ServerIdentity.
type IdentitySQL struct {
	Kind fence.Kind
	// Server is a select list of four text expressions, without NULLs:
	// the server's system, timeline, position and node (see
	// fence.Identity). A reservation by a process that has seen the store
	// reads them in its LockRow statement, beside max_id and step, so the
	// check costs no statement and no round trip; the record is read only
	// when they differ from what the process saw (then under the lock,
	// by the fence), or by a process that has seen nothing yet.
	Server string
	// ConnSystem, if set, returns the server's system (the first of the
	// Server columns, which then reads as '') for the connection q runs
	// on: for an identity that is constant per connection and costly to
	// read per statement (PostgreSQL's system_identifier, read from the
	// control file), read once per connection.
	ConnSystem func(ctx context.Context, q Querier) (string, error)
	// Tick, if set, moves the store's own position up by one. It runs in
	// the transaction of every checked operation, for a store whose
	// server has no position of its own (SQLite).
	Tick string
	// Lock locks the idgen_fence row (SELECT … FOR UPDATE, or any read
	// under SQLite's write lock). It returns one integer.
	Lock string
	// Tables returns the names of the sequence tables that exist, of
	// id_sequence and leaf_alloc.
	Tables string
	// Bump, by sequence table, adds a margin to every row's max_id, and
	// sets a row it would carry past the int64 limit to the limit:
	// exhausted, so that it refuses rather than repeats. Args: limit,
	// margin.
	Bump map[string]string
	// ToMarks, by sequence table, raises every row below its mark
	// (idgen_mark) to it: what a fence does after a row went back while
	// its mark did not. No args.
	ToMarks map[string]string
	// MaxStep, by sequence table, returns the largest row step, 0 if the
	// table is empty. No args.
	MaxStep map[string]string
	// Rows, by sequence table, and WorkerRows count the rows. No args.
	Rows       map[string]string
	WorkerRows string
	// CountLive counts worker leases with an owner and an expiry after
	// the argument, and returns the largest range_cap among them (0 if
	// none recorded one).
	CountLive string
	// NewestLease returns the latest expiry of a lease with an owner, 0
	// if none. No args.
	NewestLease string
	// Hold raises the expiry of the leases with an owner and an expiry
	// after the second argument to the first. Args: until, since, until.
	Hold string
	// Floor raises every worker's last_timestamp to the argument. Args:
	// until, until.
	Floor string
	// CheckedIn records on a lease the generation of the record its
	// owner's claim or renewal was checked against, never lowering it;
	// it matches no row unless owner holds worker. Args: generation,
	// worker ID, owner.
	CheckedIn string
	// HeldBack counts the other owners' leases that hold reservations
	// back (fence.Holding), read against the record itself. Args: now,
	// this process's two owners (the store's, and the last one its
	// leases checked in; "" if none), fence.Config.HoldSpan.
	HeldBack string
	// MarkCounted gives the leases a fence counted but did not hold
	// fence.MustCheckIn. Args: the count's since, the hold's LiveSince.
	MarkCounted string
	// Write records an identity. Args: backend, system, timeline,
	// position, generation, fence_until, tag_floor, covers, fences added
	// (0 or 1), fenced_at.
	Write string
	// Create takes the idgen_fence row's lock for a tag's creation, by
	// writing it (tag_creates moves up): no fence commits between the
	// creation's read of the floor and its insert, and on Galera the
	// row is in the creation's write set, so that a creation and a fence
	// on two nodes conflict at certification. It touches no row on a
	// store that has none yet, whose floor is 0. No args.
	Create string
	// TagFloor reads tag_floor, 0 without a row. No args.
	TagFloor string
	// Params reads the fleet's fence parameters (migration 00015): the
	// margin and the lease TTL in milliseconds, 0 if not recorded. No
	// args.
	Params string
	// SetParams records them. Args: margin, lease TTL in milliseconds.
	SetParams string
	// LiveOthers counts the leases live at now. Args: now.
	LiveOthers string
	// RaiseFloor adds to tag_floor, saturating at the int64 limit, for
	// `idgen tag bump --all`. Args: limit, n.
	RaiseFloor string
	// LockBump adds a fence's margin to every lock's token (migration
	// 00016), saturating at the int64 limit, as Bump does to every
	// sequence table: tokens granted in the commits a failover or a
	// restore lost are below every token granted after the fence. Args:
	// limit, margin.
	LockBump string
	// LockRaise moves a lock's mark up to a token, never down: the
	// witness raise of a lock (primitives.RaiseToken). Args: token,
	// name, token.
	LockRaise string
	// LockRaiseCreate creates the mark LockRaise found missing. Args:
	// name, token.
	LockRaiseCreate string
}

// IdentityColumns returns the select list of the server's four identity
// columns (IdentitySQL.Server) followed by the record's seven, read from
// idgen_fence in SQL every dialect speaks: system, timeline, position
// (text), generation, fence_until, tag_floor and covers (integers).
func IdentityColumns(server string) string {
	const one = "(SELECT %s FROM idgen_fence WHERE id = 1)"
	rec := make([]string, 0, 7)
	for _, c := range []string{"system_id", "timeline", "log_position"} {
		rec = append(rec, "COALESCE("+fmt.Sprintf(one, c)+", '')")
	}
	for _, c := range []string{"generation", "fence_until", "tag_floor", "covers"} {
		rec = append(rec, "COALESCE("+fmt.Sprintf(one, c)+", 0)")
	}
	return server + ", " + strings.Join(rec, ", ")
}
