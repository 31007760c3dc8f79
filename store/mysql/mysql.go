// Package mysql is idgen's MySQL and MariaDB backend, for several
// instances sharing one database, through go-sql-driver/mysql and
// database/sql's pool, which reconnects by itself.
//
// A reservation is one short InnoDB transaction: SELECT … FOR UPDATE on
// the tag's row, UPDATE, COMMIT, rolled back on any error or cancelled
// context. The same SQL runs on engines that speak the MySQL protocol
// and support row locks, such as TiDB.
package mysql

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/idgen/idgen/migrations"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// spelling is MySQL's way of writing idgen's SQL. SKIP LOCKED needs
// MySQL 8.0 or MariaDB 10.6.
var spelling = sqlstore.Spelling{
	ForUpdate: " FOR UPDATE", SkipLocked: " FOR UPDATE SKIP LOCKED",
	Now: "CURRENT_TIMESTAMP(3)", Greatest: "GREATEST", Int: "SIGNED",
	// INSERT IGNORE: ON DUPLICATE KEY UPDATE would report a matched row
	// under clientFoundRows, which ParseDSN sets, and hide the conflict.
	InsertIgnore: true,
	UpdateJoin:   true,
	IdemSweep:    `DELETE FROM idempotency_key WHERE expires_at <= ? ORDER BY expires_at LIMIT ?`,
	DedupSweep:   `DELETE FROM idgen_dedup WHERE expires_at <= ? ORDER BY expires_at LIMIT ?`,
	NoRows:       sql.ErrNoRows,
	IsDuplicate: func(err error) bool {
		var me *driver.MySQLError
		return errors.As(err, &me) && me.Number == 1062
	},
	IsRetryable: isRetryable,
}

// isRetryable reports the errors after which InnoDB has rolled the
// transaction back: ER_LOCK_DEADLOCK (1213: a deadlock, concurrent INSERT
// IGNOREs of the same rows, or a Galera certification conflict) and
// ER_LOCK_WAIT_TIMEOUT (1205: rolled back with
// innodb_rollback_on_timeout, or by the deferred Rollback otherwise).
func isRetryable(err error) bool {
	var me *driver.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// Store is the store over MySQL; see package store.
type Store = store.Store

// Open connects to the database named by dsn: mysql://user:pass@host:3306/db
// with optional driver parameters in the query string. The host part may
// list several servers, mysql://user:pass@h1:3306,h2:3306/db, for a
// multi-primary cluster such as Galera: each new connection goes to the
// first one that accepts it and answers a query (see failover). It
// checks the connection once; it does not create the schema (call
// Migrate).
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenTable(ctx, dsn, store.IDSequence)
}

// OpenTable is Open with segments reserved from the named table,
// store.IDSequence or store.LeafAlloc (see store.Options).
func OpenTable(ctx context.Context, dsn, table string) (*Store, error) {
	return store.Open(ctx, dsn, store.Options{Driver: "mysql", Table: table})
}

func init() {
	sqlstore.Register(sqlstore.Driver{Name: "mysql", Schemes: []string{"mysql"},
		Check: func(dsn string) error { _, _, err := parseDSN(dsn); return err }, Open: open})
}

// open connects database/sql's pool through failover, and tells the
// server's kind for fencing.
func open(ctx context.Context, dsn string) (*sqlstore.Conn, error) {
	cfgs, maxConns, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := newFailover(cfgs)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	// A connection moved to a fallback host returns to the first one
	// within this time, once it is back.
	db.SetConnMaxLifetime(5 * time.Minute)
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("mysql: connect to %s: %w", hostList(cfgs), err)
	}
	sp := spelling
	kind, fenceErr, err := serverKind(ctx, db)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("mysql: identify the server at %s: %w", hostList(cfgs), err)
	}
	if fenceErr == nil {
		sp.Identity = identity(kind)
	}
	return &sqlstore.Conn{DB: sqlstore.StdDB{DB: db}, SQL: db, Spelling: sp,
		Migrations: migrations.MySQL, NoFence: fenceErr, Close: db.Close}, nil
}

// ParseDSN turns a mysql:// URL into the driver's configuration, for its
// first host if it lists several (see Open). It always sets parseTime, so
// timestamps scan into time.Time, and clientFoundRows, so an UPDATE that
// changes nothing still reports the row it matched.
//
// Two query parameters choose TLS:
//
//   - tls: false (the default), true (verify the server against the
//     system's roots), skip-verify (encrypt without verifying),
//     preferred (TLS when the server offers it, unverified, else plain);
//   - tls-ca=/path/to/ca.pem: verify the server against that CA file,
//     and the host name in the DSN against its certificate. It implies
//     tls=true and cannot go with skip-verify or preferred.
//
// The TLS configuration is this Config's own, not registered in the
// driver under a name, so stores with different CAs do not share state.
// pool_max_conns=N bounds the store's connection pool, as pgx's parameter
// of that name does on PostgreSQL; the default is defaultMaxConns.
//
// Every other query parameter is a session variable, set on each new
// connection (e.g. ?time_zone=%27%2B00:00%27).
func ParseDSN(dsn string) (*driver.Config, error) {
	cfgs, _, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return cfgs[0], nil
}

// defaultMaxConns bounds the pool when the DSN does not. database/sql's
// own default is no bound: a burst of 150 concurrent requests on one
// instance then opens 150 connections, and a fleet of two exhausts
// MariaDB's default max_connections (151), so that requests fail with
// "Too many connections" instead of queueing for a connection. 16 is
// what a reservation and the idempotency store's statements keep busy
// on a few cores; set pool_max_conns for more.
const defaultMaxConns = 16

// parseDSN returns one configuration per host of dsn, in order, and the
// pool's bound.
func parseDSN(dsn string) ([]*driver.Config, int, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "mysql" || u.Host == "" {
		return nil, 0, fmt.Errorf("mysql: DSN must look like mysql://user:pass@host:3306/db (or host1:3306,host2:3306 for a cluster), got %q", redacted(dsn))
	}
	q := u.Query()
	maxConns := defaultMaxConns
	if v := q.Get("pool_max_conns"); v != "" || q.Has("pool_max_conns") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return nil, 0, fmt.Errorf("mysql: pool_max_conns must be a whole number from 1 to 10000, got %q", v)
		}
		maxConns = n
	}
	q.Del("pool_max_conns")
	var cfgs []*driver.Config
	for _, host := range strings.Split(u.Host, ",") {
		if host == "" {
			return nil, 0, fmt.Errorf("mysql: empty host in the host list of %q", redacted(dsn))
		}
		cfg := driver.NewConfig()
		cfg.Net = "tcp"
		cfg.Addr = host
		if _, _, err := net.SplitHostPort(host); err != nil {
			cfg.Addr = net.JoinHostPort(strings.Trim(host, "[]"), "3306")
		}
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
		cfg.DBName = strings.TrimPrefix(u.Path, "/")
		cfg.ParseTime = true
		cfg.ClientFoundRows = true
		cfg.Timeout = 5 * time.Second
		name, _, err := net.SplitHostPort(cfg.Addr)
		if err != nil {
			return nil, 0, fmt.Errorf("mysql: host %q in %q: %w", host, redacted(dsn), err)
		}
		if err := setTLS(cfg, name, q.Get("tls"), q.Get("tls-ca")); err != nil {
			return nil, 0, err
		}
		for k := range q {
			if k == "tls" || k == "tls-ca" {
				continue
			}
			if cfg.Params == nil {
				cfg.Params = map[string]string{}
			}
			cfg.Params[k] = q.Get(k)
		}
		cfgs = append(cfgs, cfg)
	}
	return cfgs, maxConns, nil
}

func hostList(cfgs []*driver.Config) string {
	addrs := make([]string, len(cfgs))
	for i, c := range cfgs {
		addrs[i] = c.Addr
	}
	return strings.Join(addrs, ",")
}

// setTLS applies the tls and tls-ca parameters of a DSN to cfg.
func setTLS(cfg *driver.Config, host, mode, caFile string) error {
	switch mode {
	case "", "false", "true", "skip-verify", "preferred":
	default:
		return fmt.Errorf("mysql: tls must be true, false, skip-verify or preferred, got %q (tls-ca=FILE verifies against a private CA)", mode)
	}
	if caFile == "" {
		if mode != "" {
			cfg.TLSConfig = mode // the driver knows these names
		}
		return nil
	}
	if mode != "" && mode != "true" {
		return fmt.Errorf("mysql: tls-ca verifies the server, so tls must be true or left out, got %q", mode)
	}
	pem, err := os.ReadFile(caFile) //nolint:gosec // G304: the operator names the CA file in the DSN
	if err != nil {
		return fmt.Errorf("mysql: tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("mysql: tls-ca: %s holds no PEM certificate", caFile)
	}
	cfg.TLS = &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}
	return nil
}

func redacted(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparseable)"
	}
	return u.Redacted()
}
