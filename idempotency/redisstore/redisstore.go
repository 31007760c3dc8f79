// Package redisstore keeps idempotency keys in Redis, for services that
// already run it for their caches and sessions: an idempotency.Store
// over github.com/redis/go-redis/v9, on one Redis, Sentinel or Redis
// Cluster.
//
// A key's row is one string value that Redis expires by itself at the
// key's TTL: the claim is SET NX PX, so exactly one first request wins
// even across instances, and Complete, Renew, TakeOver and Delete are
// Lua scripts that compare the row's owner before they write, so that
// only the request holding the key records its answer. Beside the rows,
// a sorted set per scope indexes the live keys by expiry, for the
// Keeper's cap: Sweep trims the index entries of keys Redis has
// expired, and the counts read it.
//
// Every command and script names one Redis key, so that each runs in
// one hash slot of a cluster, and the rows of one scope spread over its
// masters. The index is therefore written beside a row, not with it: a
// crash in between leaves a key out of its scope's count (or in it)
// until it expires, which the cap, an estimate, tolerates; no row ever
// depends on the index.
//
// Redis must keep keys until they expire: New refuses any
// maxmemory-policy but noeviction (see New). What a failover or a
// restart does to keys is in docs/idempotency.md.
//
// Redis expires rows by its own clock: a row's TTL is sent as the time
// left until Record.ExpiresAt on the store's clock, which must be the
// Keeper's (both time.Now by default).
package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/internal/redispolicy"
)

// DefaultPrefix starts every Redis key the store writes.
const DefaultPrefix = "idem:"

// Store is an idempotency.Store in Redis.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	now    func() time.Time
}

var _ idempotency.Store = (*Store)(nil)

// Options configures a Store. Zero fields take the defaults.
type Options struct {
	// Prefix starts every key the store writes. Default DefaultPrefix.
	Prefix string
	// Now is the clock the TTLs sent to Redis count from: a row lives
	// in Redis for its Record.ExpiresAt minus Now. Default time.Now;
	// the Keeper must use the same clock.
	Now func() time.Time
}

// ErrEvictionPolicy refuses a Redis that may evict keys: an evicted key
// is a new key to its retry, which then runs again.
var ErrEvictionPolicy = errors.New("redisstore: Redis may evict idempotency keys")

// New checks that Redis (every shard of a cluster) keeps keys until they
// expire, maxmemory-policy noeviction, and returns a Store over rdb.
// Any other policy can drop a key before its TTL, since every key has
// one: the volatile-* policies evict keys with a TTL, allkeys-* any.
// The caller owns rdb and closes it.
func New(ctx context.Context, rdb redis.UniversalClient, opts Options) (*Store, error) {
	if rdb == nil {
		return nil, errors.New("redisstore: a Redis client is required")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := redispolicy.CheckNoEviction(ctx, rdb, redispolicy.Need{
		Err:  ErrEvictionPolicy,
		What: "idempotency keys",
		Harm: "its retry would then run again",
	}); err != nil {
		return nil, err
	}
	return &Store{rdb: rdb, prefix: opts.Prefix, now: opts.Now}, nil
}

// row is a Record as stored: short names, times in Unix milliseconds.
type row struct {
	Fingerprint string `json:"f"`
	Owner       string `json:"o"`
	Status      int    `json:"s"`
	ContentType string `json:"c"`
	Body        []byte `json:"b"`
	LockedUntil int64  `json:"l"`
	ExpiresAt   int64  `json:"e"`
}

func encode(r idempotency.Record) (string, error) {
	b, err := json.Marshal(row{r.Fingerprint, r.Owner, r.Status, r.ContentType, r.Body, r.LockedUntil.UnixMilli(), r.ExpiresAt.UnixMilli()})
	return string(b), err
}

// rowKey is the row of a key; the scope's length first, so that no two
// (scope, key) pairs share one.
func (s *Store) rowKey(scope, key string) string {
	return s.prefix + "k:" + strconv.Itoa(len(scope)) + ":" + scope + ":" + key
}
func (s *Store) indexKey(scope string) string { return s.prefix + "i:" + scope }
func (s *Store) scopesKey() string            { return s.prefix + "scopes" }

// ttl is the time left until at, at least a millisecond (PX 0 is an
// error, and an expired row must still land to be seen as expired).
func (s *Store) ttl(at time.Time) time.Duration {
	return max(at.Sub(s.now()).Truncate(time.Millisecond), time.Millisecond)
}

// Insert implements idempotency.Store: SET NX PX claims the row, and
// only the winner indexes it. A failure between the two leaves one row
// out of its scope's count until it expires; the cap is an estimate.
func (s *Store) Insert(ctx context.Context, r idempotency.Record) (bool, error) {
	v, err := encode(r)
	if err != nil {
		return false, err
	}
	won, err := s.rdb.SetArgs(ctx, s.rowKey(r.Scope, r.Key), v, redis.SetArgs{Mode: "NX", TTL: s.ttl(r.ExpiresAt)}).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, wrap(err)
	}
	if won != "OK" {
		return false, nil
	}
	// An error now fails the request with its row in flight: a retry
	// takes it over once its lock expires, and indexes it then.
	return true, s.index(ctx, r)
}

// index records r's expiry in its scope's index, and the scope among
// the scopes.
func (s *Store) index(ctx context.Context, r idempotency.Record) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, s.indexKey(r.Scope), redis.Z{Score: float64(r.ExpiresAt.UnixMilli()), Member: r.Key})
		p.SAdd(ctx, s.scopesKey(), r.Scope)
		return nil
	})
	return wrap(err)
}

// Get implements idempotency.Store.
func (s *Store) Get(ctx context.Context, scope, key string) (idempotency.Record, bool, error) {
	v, err := s.rdb.Get(ctx, s.rowKey(scope, key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return idempotency.Record{}, false, nil
	}
	if err != nil {
		return idempotency.Record{}, false, wrap(err)
	}
	var w row
	if err := json.Unmarshal(v, &w); err != nil {
		return idempotency.Record{}, false, fmt.Errorf("redisstore: a row of %q is not the store's: %w", scope, err)
	}
	return idempotency.Record{Scope: scope, Key: key, Fingerprint: w.Fingerprint, Owner: w.Owner, Status: w.Status,
		ContentType: w.ContentType, Body: w.Body, LockedUntil: time.UnixMilli(w.LockedUntil), ExpiresAt: time.UnixMilli(w.ExpiresAt)}, true, nil
}

// Every script below names one Redis key, the row or an index, so that
// each runs in one hash slot on Redis Cluster.

// takeOver replaces a row its previous owner holds if it is expired or
// in flight past its lock.
// KEYS: row. ARGV: value, px, prev owner, now_ms.
var takeOver = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local r = cjson.decode(cur)
local now = tonumber(ARGV[4])
if r.o ~= ARGV[3] then return 0 end
if not (r.e <= now or (r.s == 0 and r.l <= now)) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)

// TakeOver implements idempotency.Store.
func (s *Store) TakeOver(ctx context.Context, r idempotency.Record, prevOwner string, now time.Time) (bool, error) {
	v, err := encode(r)
	if err != nil {
		return false, err
	}
	n, err := takeOver.Run(ctx, s.rdb, []string{s.rowKey(r.Scope, r.Key)}, v, s.ttl(r.ExpiresAt).Milliseconds(), prevOwner, now.UnixMilli()).Int()
	if err != nil || n != 1 {
		return false, wrap(err)
	}
	return true, s.index(ctx, r)
}

// complete records the answer on an in-flight row its owner holds,
// keeping the row's expiry: the compare-and-set that lets only the
// owner complete.
// KEYS: row. ARGV: owner, status, content type, body.
var complete = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local r = cjson.decode(cur)
if r.o ~= ARGV[1] or r.s ~= 0 then return 0 end
r.s = tonumber(ARGV[2])
r.c = ARGV[3]
r.b = ARGV[4]
redis.call('SET', KEYS[1], cjson.encode(r), 'KEEPTTL')
return 1`)

// Complete implements idempotency.Store.
func (s *Store) Complete(ctx context.Context, scope, key, owner string, status int, contentType string, body []byte) (bool, error) {
	// The body travels as JSON's base64, as row.Body is encoded.
	b64, err := json.Marshal(body)
	if err != nil {
		return false, err
	}
	n, err := complete.Run(ctx, s.rdb, []string{s.rowKey(scope, key)}, owner, status, contentType, string(b64[1:len(b64)-1])).Int()
	return n == 1, wrap(err)
}

// renew moves the lock of an in-flight row its owner holds, keeping the
// row's expiry.
// KEYS: row. ARGV: owner, locked_until_ms.
var renew = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local r = cjson.decode(cur)
if r.o ~= ARGV[1] or r.s ~= 0 then return 0 end
r.l = tonumber(ARGV[2])
redis.call('SET', KEYS[1], cjson.encode(r), 'KEEPTTL')
return 1`)

// Renew implements idempotency.Store.
func (s *Store) Renew(ctx context.Context, scope, key, owner string, lockedUntil time.Time) (bool, error) {
	n, err := renew.Run(ctx, s.rdb, []string{s.rowKey(scope, key)}, owner, lockedUntil.UnixMilli()).Int()
	return n == 1, wrap(err)
}

// del removes an in-flight row its owner holds, and returns its expiry
// (Unix ms), or 0 if it removed nothing.
// KEYS: row. ARGV: owner.
var del = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local r = cjson.decode(cur)
if r.o ~= ARGV[1] or r.s ~= 0 then return 0 end
redis.call('DEL', KEYS[1])
return r.e`)

// unindex removes a key's index entry if it still has the expiry of the
// row deleted: a new row of the key, inserted since, keeps its own.
// KEYS: index. ARGV: member, expires_ms.
var unindex = redis.NewScript(`
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0`)

// Delete implements idempotency.Store.
func (s *Store) Delete(ctx context.Context, scope, key, owner string) error {
	e, err := del.Run(ctx, s.rdb, []string{s.rowKey(scope, key)}, owner).Int64()
	if err != nil || e == 0 {
		return wrap(err)
	}
	return wrap(unindex.Run(ctx, s.rdb, []string{s.indexKey(scope)}, key, e).Err())
}

// trim removes up to limit index entries expired at now, and returns
// how many and how many are left.
// KEYS: index. ARGV: now_ms, limit.
var trim = redis.NewScript(`
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #gone > 0 then redis.call('ZREM', KEYS[1], unpack(gone)) end
return {#gone, redis.call('ZCARD', KEYS[1])}`)

// Sweep implements idempotency.Store: Redis has expired the rows; it
// removes up to limit of their index entries, and drops a scope whose
// index it emptied from the scopes.
func (s *Store) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	scopes, err := s.rdb.SMembers(ctx, s.scopesKey()).Result()
	if err != nil {
		return 0, wrap(err)
	}
	total := 0
	for _, scope := range scopes {
		if total >= limit {
			break
		}
		res, err := trim.Run(ctx, s.rdb, []string{s.indexKey(scope)}, now.UnixMilli(), limit-total).Int64Slice()
		if err != nil {
			return total, wrap(err)
		}
		total += int(res[0])
		if res[1] == 0 {
			if err := s.dropScope(ctx, scope); err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// dropScope removes an empty scope from the scopes, and puts it back if
// a key was indexed in between: the index and the scopes are in two
// slots, so no one script sees both.
func (s *Store) dropScope(ctx context.Context, scope string) error {
	if err := s.rdb.SRem(ctx, s.scopesKey(), scope).Err(); err != nil {
		return wrap(err)
	}
	n, err := s.rdb.ZCard(ctx, s.indexKey(scope)).Result()
	if err != nil || n == 0 {
		return wrap(err)
	}
	return wrap(s.rdb.SAdd(ctx, s.scopesKey(), scope).Err())
}

// Count implements idempotency.Store.
func (s *Store) Count(ctx context.Context, now time.Time) (map[string]int64, error) {
	scopes, err := s.rdb.SMembers(ctx, s.scopesKey()).Result()
	if err != nil {
		return nil, wrap(err)
	}
	out := map[string]int64{}
	for _, scope := range scopes {
		n, err := s.CountScope(ctx, scope, now)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			out[scope] = n
		}
	}
	return out, nil
}

// CountScope implements idempotency.Store.
func (s *Store) CountScope(ctx context.Context, scope string, now time.Time) (int64, error) {
	n, err := s.rdb.ZCount(ctx, s.indexKey(scope), "("+strconv.FormatInt(now.UnixMilli(), 10), "+inf").Result()
	return n, wrap(err)
}

// CountExpired implements idempotency.Store: the index entries of keys
// Redis has expired that no sweep has trimmed yet (the rows themselves
// take no room).
func (s *Store) CountExpired(ctx context.Context, now time.Time) (int64, error) {
	scopes, err := s.rdb.SMembers(ctx, s.scopesKey()).Result()
	if err != nil {
		return 0, wrap(err)
	}
	var total int64
	for _, scope := range scopes {
		n, err := s.rdb.ZCount(ctx, s.indexKey(scope), "-inf", strconv.FormatInt(now.UnixMilli(), 10)).Result()
		if err != nil {
			return 0, wrap(err)
		}
		total += n
	}
	return total, nil
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("redisstore: %w", err)
}
