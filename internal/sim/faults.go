package sim

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync"
)

// The faulty database/sql connector around SQLite's (sqlite.OpenWrapped):
// a statement that fails mid-transaction, a commit whose answer is lost,
// a paused process's transactions stalled, a crashed one's all failed.
// A fault is armed only while the simulator lets one store call run.

var (
	errBroken    = errors.New("sim: connection broke mid-transaction")
	errAmbiguous = errors.New("sim: connection broke after the commit")
	errGone      = errors.New("sim: the process crashed")
)

// faults is one process's fault plan; its pool's connections share it.
type faults struct {
	mu        sync.Mutex
	dead      bool
	resume    chan struct{} // non-nil while paused: transactions wait
	failAt    int           // the failAt-th statement from now fails; 0 none
	ambiguous bool          // the next commit reports a failure
	commits   func()        // counts a commit, for the history's losses
}

func (f *faults) arm(failAt int, ambiguous bool) {
	f.mu.Lock()
	f.failAt, f.ambiguous = failAt, ambiguous
	f.mu.Unlock()
}

// crash fails everything from now, and lets go what a pause holds.
func (f *faults) crash() {
	f.mu.Lock()
	f.dead = true
	f.mu.Unlock()
	f.pause(false)
}

func (f *faults) pause(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case on && f.resume == nil:
		f.resume = make(chan struct{})
	case !on && f.resume != nil:
		close(f.resume)
		f.resume = nil
	}
}

// begin is the check before a transaction: a paused process waits.
func (f *faults) begin(ctx context.Context) error {
	f.mu.Lock()
	ch := f.resume
	f.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
		// Both may be ready at one instant of the bubble's clock, and
		// select picks at random: the deadline wins, as on every run.
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return f.stmt()
}

// stmt is the check before a statement.
func (f *faults) stmt() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return errGone
	}
	if f.failAt > 0 {
		f.failAt--
		if f.failAt == 0 {
			return errBroken
		}
	}
	return nil
}

// commit is the check after a commit.
func (f *faults) commit() error {
	f.commits()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ambiguous {
		f.ambiguous = false
		return errAmbiguous
	}
	return nil
}

type connector struct {
	base driver.Connector
	f    *faults
}

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := c.f.stmt(); err != nil {
		return nil, err
	}
	cn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &conn{c: cn, f: c.f}, nil
}

func (c connector) Driver() driver.Driver { return c.base.Driver() }

// conn passes everything to SQLite's connection, after the fault plan.
type conn struct {
	c driver.Conn
	f *faults
}

func (c *conn) Prepare(q string) (driver.Stmt, error) {
	if err := c.f.stmt(); err != nil {
		return nil, err
	}
	return c.c.Prepare(q)
}

func (c *conn) Close() error { return c.c.Close() }

func (c *conn) Begin() (driver.Tx, error) { return c.BeginTx(context.Background(), driver.TxOptions{}) }

func (c *conn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	if err := c.f.begin(ctx); err != nil {
		return nil, err
	}
	b, ok := c.c.(driver.ConnBeginTx)
	if !ok {
		return nil, errors.New("sim: the SQLite connection cannot begin with options")
	}
	t, err := b.BeginTx(ctx, o)
	if err != nil {
		return nil, err
	}
	return &tx{t: t, f: c.f}, nil
}

func (c *conn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return viaStmt(c, func(e driver.ExecerContext) (driver.Result, error) { return e.ExecContext(ctx, q, args) })
}

func (c *conn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return viaStmt(c, func(e driver.QueryerContext) (driver.Rows, error) { return e.QueryContext(ctx, q, args) })
}

// viaStmt runs do after the fault plan; ErrSkip has database/sql Prepare.
func viaStmt[I, R any](c *conn, do func(I) (R, error)) (r R, err error) {
	e, ok := c.c.(I)
	if !ok {
		return r, driver.ErrSkip
	}
	if err := c.f.stmt(); err != nil {
		return r, err
	}
	return do(e)
}

type tx struct {
	t driver.Tx
	f *faults
}

func (t *tx) Commit() error {
	if err := t.f.stmt(); err != nil {
		_ = t.t.Rollback()
		return err
	}
	if err := t.t.Commit(); err != nil {
		return err
	}
	return t.f.commit()
}

func (t *tx) Rollback() error { return t.t.Rollback() }
