package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
)

// isolate creates a schema (PostgreSQL) or a database (MySQL) of its own
// for one test on the existing server dsn names, drops it when the test
// ends, and returns the DSN that reaches it. A schema rather than a
// database on PostgreSQL because it needs less of the user (CREATE on the
// database, not CREATEDB) and is made in milliseconds.
func isolate(t testing.TB, k Kind, dsn string) string {
	t.Helper()
	name := "idgen_test_" + strings.ToLower(rand.Text()[:12])
	var driverDSN, create, drop, scoped string
	switch k.Name {
	case Postgres.Name:
		driverDSN = dsn
		create, drop = "CREATE SCHEMA "+name, "DROP SCHEMA IF EXISTS "+name+" CASCADE"
		var err error
		if scoped, err = withPostgresParam(dsn, "search_path", name); err != nil {
			t.Fatalf("%s: %v", k.dsnEnv, err)
		}
	case MySQL.Name:
		var err error
		if driverDSN, err = sqlDSN(k, dsn); err != nil {
			t.Fatalf("%s: %v", k.dsnEnv, err)
		}
		create = "CREATE DATABASE " + name + " CHARACTER SET utf8mb4"
		drop = "DROP DATABASE IF EXISTS " + name
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("%s: %v", k.dsnEnv, err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		scoped = u.String()
	default:
		t.Fatalf("dbtest: no isolation for kind %q", k.Name)
	}
	db, err := sql.Open(k.driver, driverDSN)
	if err != nil {
		t.Fatalf("%s: %v", k.dsnEnv, err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, create); err != nil {
		t.Fatalf("%s: %s on the server %s names: %v (the user needs the right to create it)", k.Name, create, k.dsnEnv, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open(k.driver, driverDSN)
		if err != nil {
			t.Errorf("%s: %v", drop, err)
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, drop); err != nil {
			t.Errorf("%s: %v", drop, err)
		}
	})
	return scoped
}

// withPostgresParam sets a run-time parameter in a PostgreSQL DSN, a URL
// (a query parameter, which pgx sends as a run-time parameter) or a
// key=value string.
func withPostgresParam(dsn, key, value string) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return fmt.Sprintf("%s %s=%s", dsn, key, value), nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("not a URL pgx reads: %w", err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// sqlDSN turns idgen's DSN of kind k into the database/sql driver's,
// for the connection that creates and drops the test's database: a
// mysql://user:pass@host:port/db URL, whose first host it takes, its tls
// parameter as the driver names it and every other query parameter a
// session variable, as store/mysql reads it. (This package is below the
// stores, which test with it, so it reads the URL itself.)
func sqlDSN(k Kind, dsn string) (string, error) {
	if k.Name != MySQL.Name {
		return dsn, nil
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "mysql" || u.Host == "" {
		return "", errors.New("want a mysql://user:pass@host:3306/db URL")
	}
	q := u.Query()
	if q.Has("tls-ca") {
		return "", errors.New("tls-ca is not supported here: trust the CA system-wide and use tls=true")
	}
	cfg := mysqldrv.NewConfig()
	cfg.Net, cfg.Addr = "tcp", strings.Split(u.Host, ",")[0]
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		cfg.Addr = net.JoinHostPort(strings.Trim(cfg.Addr, "[]"), "3306")
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	cfg.TLSConfig = q.Get("tls")
	q.Del("tls")
	for key := range q {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[key] = q.Get(key)
	}
	return cfg.FormatDSN(), nil
}
