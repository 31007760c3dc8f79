package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

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
func openLockStore(ctx context.Context, spec string) (lockStore, error) {
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
	var rdb redis.UniversalClient
	kind := "redis"
	if o.cluster != nil {
		rdb, kind = redis.NewClusterClient(o.cluster), "redis-cluster"
	} else {
		rdb = redis.NewClient(o.single)
	}
	// redisstore.New reads every server's eviction policy: the first call,
	// so a Redis that cannot be reached fails the start here.
	b, err := redisstore.New(ctx, rdb, redisstore.Options{Prefix: o.prefix})
	if err != nil {
		_ = rdb.Close()
		return lockStore{}, fmt.Errorf("%s %s: %w", lockStoreFlag, redact(spec), err)
	}
	return lockStore{backend: b, close: rdb.Close, kind: kind}, nil
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
			"redis+cluster://host:port?addr=host2:port2 for a Redis Cluster, or leave it empty for the ID store", errLockStore, redact(spec), why)
	}
	u, err := url.Parse(spec)
	if err != nil {
		return parsedRedis{}, bad("not a URL")
	}
	scheme, cluster := strings.CutSuffix(u.Scheme, "+cluster")
	if scheme != "redis" && scheme != "rediss" {
		return parsedRedis{}, bad(fmt.Sprintf("scheme %q is not a Redis one (idgen keeps grants in its ID store or in Redis)", u.Scheme))
	}
	if u.Host == "" {
		return parsedRedis{}, bad("no host")
	}
	var p parsedRedis
	q := u.Query()
	if q.Has("prefix") {
		p.prefix = q.Get("prefix")
		if p.prefix == "" || strings.ContainsAny(p.prefix, "{}") {
			return parsedRedis{}, bad("prefix= must be non-empty and without braces, which would move the keys' hash tag")
		}
		q.Del("prefix")
	}
	u.Scheme, u.RawQuery = scheme, q.Encode()
	// go-redis's own errors quote the URL, password included: only its
	// parse's verdict is kept.
	if cluster {
		if p.cluster, err = redis.ParseClusterURL(u.String()); err != nil {
			return parsedRedis{}, bad(redisParseReason(err))
		}
		return p, nil
	}
	if p.single, err = redis.ParseURL(u.String()); err != nil {
		return parsedRedis{}, bad(redisParseReason(err))
	}
	return p, nil
}

// redisParseReason is go-redis's parse error without the URL it may
// quote.
func redisParseReason(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "redis://"); i >= 0 {
		msg = strings.TrimSpace(msg[:i])
	}
	return strings.TrimSuffix(strings.TrimPrefix(msg, "redis: "), ":")
}
