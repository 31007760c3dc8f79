package mysql

import (
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// Every statement shares the Store's pool, and is durable when it
// returns: InnoDB's log flush is a global setting
// (innodb_flush_log_at_trx_commit), so the placeholder insert cannot
// skip it as on PostgreSQL and SQLite.
//
// INSERT IGNORE: ON DUPLICATE KEY UPDATE would report a matched row
// under clientFoundRows, which ParseDSN sets, and hide the conflict.
var idemStatements = sqlstore.IdemStatements{
	Insert: `INSERT IGNORE INTO idempotency_key (scope, idem_key, fingerprint, owner, body, locked_until, expires_at)
		VALUES (?, ?, ?, ?, '', ?, ?)`,
	Get: `SELECT fingerprint, owner, status, content_type, body, locked_until, expires_at FROM idempotency_key WHERE scope = ? AND idem_key = ?`,
	TakeOver: `UPDATE idempotency_key SET fingerprint = ?, owner = ?, status = 0, content_type = '', body = '', locked_until = ?, expires_at = ?
		WHERE scope = ? AND idem_key = ? AND owner = ? AND (expires_at <= ? OR (status = 0 AND locked_until <= ?))`,
	Complete: `UPDATE idempotency_key SET status = ?, content_type = ?, body = ? WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 0`,
	Delete:   `DELETE FROM idempotency_key WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 0`,
	Sweep:    `DELETE FROM idempotency_key WHERE expires_at <= ? ORDER BY expires_at LIMIT ?`,
	Count:    `SELECT scope, COUNT(*) FROM idempotency_key WHERE expires_at > ? GROUP BY scope`,
}
