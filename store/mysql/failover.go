package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	mysqldrv "github.com/go-sql-driver/mysql"
)

// failover is a driver.Connector over an ordered list of servers, which
// go-sql-driver/mysql lacks: each new connection goes to the first server
// that accepts it and, when there is more than one, answers SELECT 1.
//
// The query matters on Galera: a node that is joining or has lost the
// primary component accepts connections but refuses statements with
// ER_UNKNOWN_COM_ERROR (1047, "WSREP has not yet prepared node for
// application use"), and a pooled connection to it would fail every
// reservation. Connections already in the pool are not moved: one that
// breaks is dropped by database/sql, and its replacement comes through
// here.
type failover struct {
	addrs []string
	conns []driver.Connector
}

func newFailover(cfgs []*mysqldrv.Config) (*failover, error) {
	f := &failover{}
	for _, cfg := range cfgs {
		c, err := mysqldrv.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		f.addrs = append(f.addrs, cfg.Addr)
		f.conns = append(f.conns, c)
	}
	return f, nil
}

// Connect implements driver.Connector.
func (f *failover) Connect(ctx context.Context) (driver.Conn, error) {
	var errs []error
	for i, c := range f.conns {
		conn, err := c.Connect(ctx)
		if err == nil && len(f.conns) > 1 {
			if err = answers(ctx, conn); err != nil {
				_ = conn.Close()
			}
		}
		if err == nil {
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", f.addrs[i], err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// Driver implements driver.Connector.
func (f *failover) Driver() driver.Driver { return f.conns[0].Driver() }

// answers runs SELECT 1 on a fresh connection.
func answers(ctx context.Context, conn driver.Conn) error {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return nil
	}
	rows, err := q.QueryContext(ctx, "SELECT 1", nil)
	if err != nil {
		return err
	}
	return rows.Close()
}
