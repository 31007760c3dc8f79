package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/idgen/idgen/idempotency/dedup"
	"github.com/idgen/idgen/store/sqlite"
)

// A consumer records each message in the transaction of its business
// write: a redelivery of a committed message is skipped, and a failed
// one leaves nothing behind, so its redelivery runs.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dedup-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "orders.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx, nil); err != nil {
		log.Fatal(err)
	}
	db := st.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE shipment (order_id TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	d, err := dedup.New(st.Dedup(), dedup.Config{})
	if err != nil {
		log.Fatal(err)
	}
	d.Start() // sweeps records past their retention
	defer d.Close()

	// consume is a consumer's handling of one delivery; it reports
	// whether to acknowledge the message.
	consume := func(msgID, orderID string) bool {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return false
		}
		err = d.Do(ctx, tx, "shipping", msgID, func(ctx context.Context) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO shipment (order_id) VALUES (?)`, orderID)
			return err
		})
		switch {
		case errors.Is(err, dedup.ErrProcessed):
			_ = tx.Rollback()
			fmt.Println(msgID, "already processed")
			return true
		case err != nil:
			_ = tx.Rollback()
			return false // the broker delivers it again
		}
		if err := tx.Commit(); err != nil {
			return false
		}
		fmt.Println(msgID, "processed")
		return true
	}

	consume("msg-1", "order-1")
	consume("msg-1", "order-1") // redelivered: the ack was lost
	var n int
	_ = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM shipment`).Scan(&n)
	fmt.Println("shipments:", n)
	// Output:
	// msg-1 processed
	// msg-1 already processed
	// shipments: 1
}
