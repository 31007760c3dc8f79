package lock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/idgen/idgen/lock"
)

// openExampleDB opens a SQLite file in a temporary directory, with
// BEGIN IMMEDIATE transactions, as the guard wants on SQLite.
func openExampleDB() (db *sql.DB, cleanup func()) {
	dir, err := os.MkdirTemp("", "guard-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err = sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	return db, func() { _ = db.Close(); _ = os.RemoveAll(dir) }
}

// A table you own gets a token column, and the guard checks it on the
// row being written. Kleppmann's scenario: the holder of token 33 pauses
// past its TTL, token 34 is granted and writes, then 33 wakes up and
// tries to write.
func ExampleGuard() {
	ctx := context.Background()
	db, cleanup := openExampleDB()
	defer cleanup()
	if _, err := db.ExecContext(ctx, `CREATE TABLE account (id INTEGER PRIMARY KEY,
		balance INTEGER NOT NULL, fence_token INTEGER NOT NULL DEFAULT 0)`); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO account (id, balance) VALUES (42, 100)`); err != nil {
		log.Fatal(err)
	}

	g, err := lock.NewGuard(lock.GuardConfig{Dialect: lock.SQLite, Table: "account", Key: "id", Column: "fence_token"})
	if err != nil {
		log.Fatal(err)
	}
	// debit is the protected write; token is the holder's le.Token().
	debit := func(token, amount int64) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }() // a no-op after Commit
		if err := g.Check(ctx, tx, 42, token); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE account SET balance = balance - ? WHERE id = ?`, amount, 42); err != nil {
			return err
		}
		return tx.Commit()
	}

	fmt.Println("token 34:", debit(34, 10))
	fmt.Println("token 34 again:", debit(34, 5))
	if err := debit(33, 10); errors.Is(err, lock.ErrStaleToken) {
		fmt.Println("token 33:", err)
	}
	var balance int64
	if err := db.QueryRowContext(ctx, `SELECT balance FROM account WHERE id = 42`).Scan(&balance); err != nil {
		log.Fatal(err)
	}
	fmt.Println("balance:", balance)
	// Output:
	// token 34: <nil>
	// token 34 again: <nil>
	// token 33: lock: stale fencing token: token 33 for 42, which has accepted token 34
	// balance: 85
}

// A table you cannot alter, or a resource that is not one row (a file,
// a call to another service that checks nothing), is guarded by name in
// the side table.
func ExampleGuard_sideTable() {
	ctx := context.Background()
	db, cleanup := openExampleDB()
	defer cleanup()

	g, err := lock.NewGuard(lock.GuardConfig{Dialect: lock.SQLite})
	if err != nil {
		log.Fatal(err)
	}
	if err := g.CreateTable(ctx, db); err != nil {
		log.Fatal(err)
	}
	check := func(token int64) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		if err := g.Check(ctx, tx, "checkout:user-7", token); err != nil {
			return err
		}
		// … the writes the lock protects, in tx …
		return tx.Commit()
	}
	for _, token := range []int64{5, 6, 5} {
		fmt.Printf("token %d: stale %v\n", token, errors.Is(check(token), lock.ErrStaleToken))
	}
	// Output:
	// token 5: stale false
	// token 6: stale false
	// token 5: stale true
}
