package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/lock/redisstore"
	"github.com/idgen/idgen/store"
)

// --lock-store: where the lock API (/locks, idgen.v1.LockService) keeps
// its grants. By default it is the ID store (its idgen_lock table,
// fenced as IDs are); a Redis keeps them in memory, for services that
// run Redis for their locks already and want a grant in one round trip
// (docs/locks.md, "Where grants live").
const (
	lockStoreFlag = "--lock-store (IDGEN_LOCK_STORE)"
	// lockStoreNone serves no locks: /locks answers 404 locks_disabled.
	lockStoreNone = "none"
)

// errLockStore is a --lock-store value idgen cannot use.
var errLockStore = errors.New("bad " + lockStoreFlag)

// lockStore is the lock API's backend and what closes it.
type lockStore struct {
	backend lock.Backend
	close   func() error
	kind    string // for the start log: store, none, redis, redis-cluster
}

// checkLockStore validates spec without connecting, so that a typo fails
// before anything is migrated or leased.
func checkLockStore(spec string) error {
	_, err := redisOptions(spec)
	return err
}

// openLockStore opens spec: a Redis URL, "none", or "" for the ID
// store's own, which forStore fills in once the store is open. A Redis is
// reached before the ID store is, so that a Redis that cannot serve
// fails the start before a schema is migrated or a lease taken.
func openLockStore(ctx context.Context, spec string, log *slog.Logger) (lockStore, error) {
	switch spec {
	case "":
		return lockStore{close: func() error { return nil }, kind: "store"}, nil
	case lockStoreNone:
		return lockStore{close: func() error { return nil }, kind: lockStoreNone}, nil
	}
	o, err := redisOptions(spec)
	if err != nil {
		return lockStore{}, err
	}
	// go-redis logs its pool's retries to stderr as plain text; a failed
	// lock call is answered 503 and logged by the server, so its detail
	// goes to debug, in the server's format.
	redis.SetLogger(redisLog{log})
	var rdb redis.UniversalClient
	kind := "redis"
	if o.cluster != nil {
		rdb, kind = redis.NewClusterClient(o.cluster), "redis-cluster"
	} else {
		rdb = redis.NewClient(o.single)
	}
	// redisstore.New reads every server's eviction policy: the first call,
	// so a Redis that cannot be reached fails the start here.
	cctx, cancel := context.WithTimeout(ctx, redisStartTimeout)
	defer cancel()
	b, err := redisstore.New(cctx, rdb, redisstore.Options{Prefix: o.prefix})
	if err != nil {
		_ = rdb.Close()
		return lockStore{}, fmt.Errorf("%s %s: %w%s", lockStoreFlag, redactRedis(spec), err, redisHint(err, o))
	}
	return lockStore{backend: b, close: rdb.Close, kind: kind}, nil
}

// redisStartTimeout bounds the start's first call to Redis: a TLS
// handshake with a plain port, or a firewall that drops packets, would
// otherwise hold the start until go-redis's retries give up.
const redisStartTimeout = 10 * time.Second

// redisHint says what to do about a Redis that refused the start.
func redisHint(err error, o parsedRedis) string {
	var op *net.OpError
	msg := err.Error()
	switch {
	case errors.Is(err, redisstore.ErrEvictionPolicy):
		return "" // its message names the policy to set
	case strings.Contains(msg, "NOAUTH"), strings.Contains(msg, "WRONGPASS"):
		return "; write the password as redis://:PASSWORD@host:port, or redis://USER:PASSWORD@host:port for an ACL user"
	case strings.Contains(msg, "cluster support disabled"):
		return "; this Redis is not a cluster: use redis:// rather than redis+cluster://"
	case errors.Is(err, context.DeadlineExceeded) && o.tls():
		return "; no answer within " + redisStartTimeout.String() + ": is the port a TLS one? Use redis:// for a plain one"
	case errors.Is(err, context.DeadlineExceeded):
		return "; no answer within " + redisStartTimeout.String() + ": check the host, the port and the firewall"
	case errors.As(err, &op):
		return "; check the host and the port, or leave --lock-store empty to keep lock grants in the ID store"
	}
	return ""
}

// redisLog passes go-redis's own log lines to the server's logger.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...), "of", "lock-store")
}

// redactRedis hides the user info of a Redis URL whole: redis://SECRET@h
// is a password written where go-redis reads a user name.
func redactRedis(spec string) string {
	u, err := url.Parse(spec)
	if err != nil {
		return "(unparseable URL)"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		} else {
			u.User = url.User("xxxxx")
		}
	}
	return redact(u.String())
}

// forStore is ls with the ID store's lock table where it names it.
func (ls lockStore) forStore(st *store.Store) lockStore {
	if ls.kind == "store" {
		ls.backend = st.Locks()
	}
	return ls
}

// parsedRedis is a --lock-store Redis URL, parsed.
type parsedRedis struct {
	single  *redis.Options
	cluster *redis.ClusterOptions
	prefix  string
}

// tls reports whether p dials with TLS.
func (p parsedRedis) tls() bool {
	return (p.single != nil && p.single.TLSConfig != nil) || (p.cluster != nil && p.cluster.TLSConfig != nil)
}

// redisOptions parses a Redis URL: redis:// or rediss:// (TLS) for one
// Redis, redis+cluster:// or rediss+cluster:// for a cluster (more seed
// nodes as addr= parameters), in go-redis's URL syntax; prefix= sets the
// keys' prefix (redisstore.DefaultPrefix otherwise). "" and "none" parse
// to nothing.
func redisOptions(spec string) (parsedRedis, error) {
	if spec == "" || spec == lockStoreNone {
		return parsedRedis{}, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: %s: %s; use redis://[:password@]host:port[/db], rediss://… for TLS, "+
			"redis+cluster://host:port?addr=host2:port2 for a Redis Cluster, or leave it empty for the ID store", errLockStore, redactRedis(spec), why)
	}
	u, err := url.Parse(spec)
	if err != nil {
		return parsedRedis{}, bad("not a URL (percent-encode #, /, ?, @ and % in a password: %23, %2F, %3F, %40, %25)")
	}
	scheme, cluster := strings.CutSuffix(u.Scheme, "+cluster")
	if scheme != "redis" && scheme != "rediss" {
		return parsedRedis{}, bad(fmt.Sprintf("scheme %q is not a Redis one (idgen keeps grants in its ID store or in Redis)", u.Scheme))
	}
	if u.Host == "" {
		return parsedRedis{}, bad("no host")
	}
	if cluster && strings.Trim(u.Path, "/") != "" {
		return parsedRedis{}, bad("a Redis Cluster has only database 0: drop /" + strings.Trim(u.Path, "/") + ", and keep services apart with ?prefix=")
	}
	var p parsedRedis
	q := u.Query()
	if q.Has("prefix") {
		if len(q["prefix"]) > 1 {
			return parsedRedis{}, bad("prefix= is given more than once")
		}
		p.prefix = q.Get("prefix")
		if p.prefix == "" || strings.ContainsAny(p.prefix, "{}") {
			return parsedRedis{}, bad("prefix= must be non-empty and without braces, which would move the keys' hash tag")
		}
		q.Del("prefix")
	}
	u.Scheme, u.RawQuery = scheme, q.Encode()
	// go-redis's errors name an option or a database number, never the
	// URL: they are kept as its verdict.
	if cluster {
		if p.cluster, err = redis.ParseClusterURL(u.String()); err != nil {
			return parsedRedis{}, bad(strings.TrimPrefix(err.Error(), "redis: "))
		}
		return p, nil
	}
	if p.single, err = redis.ParseURL(u.String()); err != nil {
		return parsedRedis{}, bad(strings.TrimPrefix(err.Error(), "redis: "))
	}
	return p, nil
}
