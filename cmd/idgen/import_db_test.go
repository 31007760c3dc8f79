package main_test

import (
	"context"
	"database/sql"
	"os/exec"
	"strings"
	"testing"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/mysql"
)

// The tables as Leaf's scripts/leaf_alloc.sql and tinyid's db.sql create
// them.
const (
	leafAllocDDL = "CREATE TABLE `leaf_alloc` (\n" +
		"  `biz_tag` varchar(128) NOT NULL DEFAULT '',\n" +
		"  `max_id` bigint(20) NOT NULL DEFAULT '1',\n" +
		"  `step` int(11) NOT NULL,\n" +
		"  `description` varchar(256) DEFAULT NULL,\n" +
		"  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
		"  PRIMARY KEY (`biz_tag`)\n" +
		") ENGINE=InnoDB"
	tinyIDInfoDDL = "CREATE TABLE `tiny_id_info` (\n" +
		"  `id` bigint(20) NOT NULL AUTO_INCREMENT,\n" +
		"  `biz_type` varchar(63) NOT NULL DEFAULT '',\n" +
		"  `begin_id` bigint(20) NOT NULL DEFAULT '0',\n" +
		"  `max_id` bigint(20) NOT NULL DEFAULT '0',\n" +
		"  `step` int(11) DEFAULT '0',\n" +
		"  `delta` int(11) NOT NULL DEFAULT '1',\n" +
		"  `remainder` int(11) NOT NULL DEFAULT '0',\n" +
		"  `create_time` timestamp NOT NULL DEFAULT '2010-01-01 00:00:00',\n" +
		"  `update_time` timestamp NOT NULL DEFAULT '2010-01-01 00:00:00',\n" +
		"  `version` bigint(20) NOT NULL DEFAULT '0',\n" +
		"  PRIMARY KEY (`id`),\n" +
		"  UNIQUE KEY `uniq_biz_type` (`biz_type`)\n" +
		") ENGINE=InnoDB"
)

// Leaf's and tinyid's tables imported into idgen's own on a real MySQL,
// the database both run on: refused rows stop everything, --dry-run
// changes nothing, a rerun changes nothing, max_id never moves down, and
// a server started on the result continues each sequence.
func TestImport_LeafAndTinyID(t *testing.T) {
	t.Parallel()
	srv := dbtest.Start(t, dbtest.MySQL)
	bin := proctest.Binary(t, t.TempDir())
	db, exec1 := mysqlDB(t, srv.DSN)
	ctx := context.Background()
	for _, q := range []string{"DROP TABLE IF EXISTS leaf_alloc", "DROP TABLE IF EXISTS tiny_id_info", "DROP TABLE IF EXISTS id_sequence", leafAllocDDL, tinyIDInfoDDL} {
		exec1(q)
	}
	exec1(`INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('orders', 5001, 1000, NULL), ('bad tag', 10, 100, 'x')`)
	exec1(`INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step, delta, remainder) VALUES ('test', 1, 1, 100000, 1, 0), ('test_odd', 1, 1, 100000, 2, 1)`)

	run := func(wantOK bool, args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append(args, "--store", srv.DSN)...).CombinedOutput()
		if (err == nil) != wantOK {
			t.Fatalf("idgen %s: err %v, want ok=%v\n%s", strings.Join(args, " "), err, wantOK, out)
		}
		return string(out)
	}
	expect := func(out string, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
	}
	nextID := func(tag string) int64 {
		t.Helper()
		var n int64
		if err := db.QueryRowContext(ctx, `SELECT max_id FROM id_sequence WHERE biz_tag = ?`, tag).Scan(&n); err != nil {
			t.Fatalf("id_sequence row %s: %v", tag, err)
		}
		return n
	}

	// Served beside Leaf first: idgen's schema without its sequence table.
	run(true, "migrate", "--sequence-table", "leaf_alloc")
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'id_sequence'`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("id_sequence exists after migrate --sequence-table leaf_alloc (%d, %v)", tables, err)
	}

	expect(run(false, "import", "leaf", "--from", srv.DSN, "--margin", "100"),
		`nothing imported: 1 of 2 rows cannot be`, `"bad tag": invalid tag`, `byte 4 of "bad tag" is ' '`)
	exec1(`DELETE FROM leaf_alloc WHERE biz_tag = 'bad tag'`)

	// A row near the int64 limit passes max_id + margin but leaves no
	// room for one step: the dry run says so, and the real run imports
	// nothing, not even the rows before it.
	exec1(`INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('zz-top', 9223372036854775000, 1000, NULL)`)
	expect(run(false, "import", "leaf", "--from", srv.DSN, "--dry-run"), `nothing imported: 1 of 2 rows cannot be`, `"zz-top": invalid step or start: start 9223372036854775000`)
	expect(run(false, "import", "leaf", "--from", srv.DSN), `nothing imported: 1 of 2 rows cannot be`)
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM id_sequence`).Scan(&tables); err == nil {
		t.Fatalf("a failed import created id_sequence")
	}
	exec1(`DELETE FROM leaf_alloc WHERE biz_tag = 'zz-top'`)

	expect(run(true, "import", "leaf", "--from", srv.DSN, "--margin", "100", "--dry-run"), "orders: would create, next ID 5101, step 1000")
	var rows int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM id_sequence`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("--dry-run wrote %d rows (%v)", rows, err)
	}
	expect(run(true, "import", "leaf", "--from", srv.DSN, "--margin", "100"), "orders: create, next ID 5101, step 1000")
	expect(run(true, "import", "leaf", "--from", srv.DSN, "--margin", "100"), "orders: keep next ID 5101, already at or past 5101")
	if n := nextID("orders"); n != 5101 {
		t.Fatalf("orders at %d after a rerun, want 5101", n)
	}
	exec1(`UPDATE leaf_alloc SET max_id = 9000 WHERE biz_tag = 'orders'`)
	expect(run(true, "import", "leaf", "--from", srv.DSN, "--margin", "100"), "orders: raise next ID from 5101 to 9100")
	exec1(`UPDATE id_sequence SET max_id = 20000 WHERE biz_tag = 'orders'`)
	expect(run(true, "import", "leaf", "--from", srv.DSN), "orders: keep next ID 20000, already at or past 9000")
	if n := nextID("orders"); n != 20000 {
		t.Fatalf("import lowered orders to %d", n)
	}

	expect(run(false, "import", "tinyid", "--from", srv.DSN),
		`"test_odd": delta 2, remainder 1: tinyid splits this tag's IDs between 2 databases`)
	exec1(`UPDATE tiny_id_info SET delta = 1, remainder = 0 WHERE biz_type = 'test_odd'`)
	// tinyid's max_id is the last ID it may have handed out.
	expect(run(true, "import", "tinyid", "--from", srv.DSN), "test: create, next ID 2, step 100000", "test_odd: create, next ID 2, step 100000")

	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=" + srv.DSN}, "--snowflake=false", "--auto-create-tags=false")
	for path, want := range map[string]string{"/id/orders": `"id":"20000"`, "/id/test": `"id":"2"`} {
		if got := get(t, p, path); got.status != 200 || !strings.Contains(got.body, want) {
			t.Errorf("GET %s = %+v, want %s", path, got, want)
		}
	}

	// Served from Leaf's table as it is, through Leaf's route: the next ID
	// is Leaf's max_id, and a tag idgen refuses is named at start.
	exec1(`INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('a/b', 1, 10)`)
	leaf := proctest.Serve(t, bin, []string{"IDGEN_STORE=" + srv.DSN, "IDGEN_SEQUENCE_TABLE=leaf_alloc"},
		"--compat", "leaf", "--snowflake=false", "--auto-create-tags=false")
	if got := get(t, leaf, "/api/segment/get/orders"); got != (answer{200, textPlain, "9000"}) {
		t.Errorf("GET /api/segment/get/orders on leaf_alloc = %+v, want 9000", got)
	}
	var leafMax int64
	if err := db.QueryRowContext(ctx, `SELECT max_id FROM leaf_alloc WHERE biz_tag = 'orders'`).Scan(&leafMax); err != nil || leafMax != 10000 {
		t.Errorf("leaf_alloc max_id %d (%v) after idgen's reservation, want 10000", leafMax, err)
	}
	if log := leaf.Log(); !strings.Contains(log, "will be refused") || !strings.Contains(log, `byte 2 of \"a/b\" is '/'`) {
		t.Errorf("no warning naming the rule a/b breaks:\n%s", log)
	}
}

// mysqlDB opens the MySQL server of dsn (idgen's mysql:// form) with
// database/sql for the test, and returns it with a helper that runs one
// statement or fails the test.
func mysqlDB(t *testing.T, dsn string) (*sql.DB, func(q string, args ...any)) {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
