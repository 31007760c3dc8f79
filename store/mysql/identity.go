package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	driver "github.com/go-sql-driver/mysql"

	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// The server part of the identity columns, per kind of server. Every
// variable here is readable by any account: no SUPER, no REPLICATION
// CLIENT, no PROCESS.
var serverColumns = map[fence.Kind]string{
	// server_uuid names the server; with gtid_mode ON, gtid_executed says
	// which transactions it has, and a set that is no longer a superset of
	// one read before (GTID_SUBSET(seen, gtid_executed) false) is history
	// lost. With gtid_mode OFF it is empty: no position to compare.
	fence.MySQL: `@@server_uuid, '', @@GLOBAL.gtid_executed, ''`,
	// MariaDB has no server_uuid. server_id must differ between servers
	// for replication to work, so a failover to a replica shows another
	// one; gtid_binlog_pos (domain-server-sequence per domain) is how far
	// the server's binary log has come, empty without one.
	fence.MariaDB: `CAST(@@server_id AS CHAR), '', @@GLOBAL.gtid_binlog_pos, ''`,
	// Every node of one Galera cluster has the same state UUID, so
	// instances on different nodes see one history. wsrep_last_committed
	// is the node's own position: a node that lags in applying shows a
	// lower one than another node, so it is compared only with what the
	// same node (host and port) said before, never across nodes, and a
	// node's own count only goes back when its state is restored.
	fence.Galera: `COALESCE((SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_CLUSTER_STATE_UUID'), ''), '',
		COALESCE((SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LAST_COMMITTED'), ''),
		CONCAT(@@hostname, ':', @@port)`,
}

// identity returns the server's part of fencing for a server of kind k.
func identity(k fence.Kind) *sqlstore.ServerIdentity {
	return &sqlstore.ServerIdentity{
		Kind:   k,
		Server: serverColumns[k],
		Tables: `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN ('id_sequence', 'leaf_alloc') ORDER BY 1`,
	}
}

// serverKind tells MySQL, MariaDB and MariaDB Galera apart, once, at
// Open, and checks that the server answers its identity columns. A
// server that refuses them (an engine that speaks the protocol only) is
// returned as noFence: the store then runs without fencing, and
// CheckIdentity says why. err is a failure to ask at all.
func serverKind(ctx context.Context, db *sql.DB) (k fence.Kind, noFence, err error) {
	var version string
	if err := db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
		return "", nil, err
	}
	k = fence.MySQL
	if strings.Contains(strings.ToLower(version), "mariadb") {
		k = fence.MariaDB
		var name, value string
		err := db.QueryRowContext(ctx, `SHOW GLOBAL VARIABLES LIKE 'wsrep_on'`).Scan(&name, &value)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return "", nil, err
		case strings.EqualFold(value, "ON"):
			k = fence.Galera
		}
	}
	var a, b, c, d string
	err = db.QueryRowContext(ctx, "SELECT "+serverColumns[k]).Scan(&a, &b, &c, &d)
	var me *driver.MySQLError
	if errors.As(err, &me) {
		return k, fmt.Errorf("mysql: %w: %s %s refuses idgen's identity query, so the store cannot detect a failover or a restore: %w", fence.ErrUnsupported, k, version, err), nil
	}
	return k, nil, err
}
