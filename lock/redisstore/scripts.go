package redisstore

import "github.com/redis/go-redis/v9"

// The scripts. Each runs atomically on the master of the lock's slot,
// reads the time from that master (TIME) where it needs it, and names
// every key it touches in KEYS, which share the lock's hash tag.
//
// A lock's keys: KEYS[1], the lock hash, with fields o (owner), t (the
// last token granted, kept after a release; also the grant's since), e
// (expiry, µs), x (see below) and q, set while the queue may exist;
// KEYS[2], the queue, a sorted set of waiting owners scored by arrival
// (µs); KEYS[3], each waiter's own expiry (µs). The pub/sub channel is
// the name of KEYS[1].
//
// q spares an uncontended acquire and release from looking at the
// queue at all. Only a waiting acquire creates the queue, and it sets
// q and keeps the hash at least as long as the queue; only a release
// that finds the queue gone clears it. So a lock without q has no
// queue, and no waiter to skip over or wake (no PUBLISH).
//
// The hash must outlive a grant or renewal by retain (the token's
// memory). PEXPIRE on every grant would be a write of its own, so a
// grant or renewal that needs a later expiry sets the TTL to retain
// and a quarter more past its expiry, and notes that time in x (µs,
// rounded down by 2ms: a lower bound of the key's expiry); one that x
// already covers leaves the TTL alone. Nothing else lowers the TTL
// (the queue only raises it), so x never promises more than Redis
// keeps, and back-to-back grants cost no PEXPIRE for a quarter of
// retain.
//
// Numbers are Lua numbers, doubles, exact for integers below 2^53 (µs
// since 1970 stay below it until the year 2255). Redis turns a number
// argument of redis.call into a string with %.17g, which prints such
// an integer in full (tostring would print 1.8e+15), and a number in a
// reply into an integer reply.
//
// What a script costs Redis is mostly per redis.call (one to a few
// microseconds each, writes the most, measured with INFO commandstats
// and redis-benchmark on Redis 7.0), per KEYS and
// ARGV element (a Lua string each) and per Lua object made (a table, a
// closure, a string), which the Lua GC then collects. So the hot path
// makes few of each: an uncontended acquire is TIME, HMGET and HSET
// (and PEXPIRE once per quarter retain, see x), a release HMGET, HDEL
// and TIME, and the common replies are one integer, which the client
// reads without an array.

// prelude defines now (µs by the master's clock).
const prelude = `
local tm = redis.call('TIME')
local now = tm[1] * 1000000 + tm[2]
`

// Reply kinds of acquireScript's arrays, in their first element.
const (
	acqOK     = 1 // {1, token, expiry, now}: a live grant of owner, extended
	acqHeld   = 2 // {2, holder, token, expiry, now}
	acqQueued = 3 // {3, head waiter, its expiry, now}
	acqBehind = 4 // {4, now, µs behind}: the clock reads behind the last token
	acqSkew   = 5 // {5, now}: the clock reads behind what a client saw
	acqKeys   = 6 // {6}: the queue may exist; ask again with its keys
)

// acquireScript grants the lock, extends a reentrant grant, or (when
// waiting) queues the owner and says when it may ask again.
//
// ARGV: owner, ttl µs, the waiter TTL µs if it waits (else 0), retain
// ms, and the least time µs the clock may read (the highest TIME the
// client saw, less the max clock skew). Every argument costs the
// script a string, so these are all it gets.
//
// KEYS are all three when owner waits, else the hash alone: then, if q
// is set, it changes nothing and replies acqKeys, and the client asks
// again with the queue's keys. Without q it touches no other key.
//
// A new grant replies the integer now, which is its token and its
// since; its expiry is now + ttl. Every other reply is an array whose
// first element is one of the acq constants.
var acquireScript = redis.NewScript(prelude + `
if now < tonumber(ARGV[5]) then return {5, now} end
local owner, ttl, retain = ARGV[1], tonumber(ARGV[2]), ARGV[4] * 1000

-- No function is defined here: a local function would be a new closure
-- on every run, and the common runs need none.
local h = redis.call('HMGET', KEYS[1], 'o', 't', 'e', 'q', 'x')
if h[4] and not KEYS[2] then return {6} end
local o, tok, exp = h[1], tonumber(h[2]), tonumber(h[3])
local busy -- the reply when someone else comes first
if o and exp and exp > now then
  if o == owner then
    exp = now + ttl
    if (tonumber(h[5]) or 0) < exp + retain then
      local ms = math.ceil((exp - now + 1.25 * retain) / 1000)
      redis.call('HSET', KEYS[1], 'e', exp, 'x', now + (ms - 2) * 1000)
      redis.call('PEXPIRE', KEYS[1], ms)
    else
      redis.call('HSET', KEYS[1], 'e', exp)
    end
    return {1, tok or 0, exp, now}
  end
  busy = {2, o, tok or 0, exp, now}
end

-- Free. Waiters ahead whose own TTL lapsed are dead: skip them all now.
local head
while not busy and h[4] do
  head = redis.call('ZRANGE', KEYS[2], '0', '0')[1]
  if not head or head == owner then break end
  local hx = tonumber(redis.call('ZSCORE', KEYS[3], head))
  if hx and hx > now then
    busy = {3, head, hx, now}
  else
    redis.call('ZREM', KEYS[2], head)
    redis.call('ZREM', KEYS[3], head)
  end
end

if busy then
  local wttl = tonumber(ARGV[3])
  if wttl > 0 then -- queue owner, and keep the queue and the hash for 2 waiter TTLs
    redis.call('ZADD', KEYS[2], 'NX', now, owner)
    redis.call('ZADD', KEYS[3], now + wttl, owner)
    redis.call('HSET', KEYS[1], 'q', '1')
    local ms = math.ceil(2 * wttl / 1000)
    for i = 1, 3 do
      if redis.call('PTTL', KEYS[i]) < ms then redis.call('PEXPIRE', KEYS[i], ms) end
    end
  end
  return busy
end

-- The token is the master's clock in µs, and must be above the last.
-- The grant's since is its token, so the hash keeps no field for it.
if tok and tok >= now then return {4, now, tok - now + 1} end
exp = now + ttl
-- now as %.17g would print it, spelled from TIME's strings: formatting
-- a number costs Redis a snprintf, several times this.
local t = tm[1] .. string.sub('00000' .. tm[2], -6)
if (tonumber(h[5]) or 0) < exp + retain then
  local ms = math.ceil((exp - now + 1.25 * retain) / 1000)
  redis.call('HSET', KEYS[1], 'o', owner, 't', t, 'e', exp, 'x', now + (ms - 2) * 1000)
  redis.call('PEXPIRE', KEYS[1], ms)
else
  redis.call('HSET', KEYS[1], 'o', owner, 't', t, 'e', exp)
end
if head then -- owner heads the queue: it waited, and now holds
  redis.call('ZREM', KEYS[2], owner)
  redis.call('ZREM', KEYS[3], owner)
end
return now
`)

// renewScript extends a live grant of owner and token.
// ARGV: owner, token, ttl µs, retain ms.
// Replies {expiry, now} or {owner, token, expiry} of the lock as it
// is: owner is empty if it is free.
var renewScript = redis.NewScript(prelude + `
local h = redis.call('HMGET', KEYS[1], 'o', 't', 'e', 'x')
if h[1] == ARGV[1] and h[2] == ARGV[2] and tonumber(h[3]) > now then
  local exp, retain = now + tonumber(ARGV[3]), ARGV[4] * 1000
  if (tonumber(h[4]) or 0) < exp + retain then -- as in acquireScript
    local ms = math.ceil((exp - now + 1.25 * retain) / 1000)
    redis.call('HSET', KEYS[1], 'e', exp, 'x', now + (ms - 2) * 1000)
    redis.call('PEXPIRE', KEYS[1], ms)
  else
    redis.call('HSET', KEYS[1], 'e', exp)
  end
  return {exp, now}
end
return {h[1] or '', h[2] or '', h[3] or ''}
`)

// releaseScript frees the lock if owner and token hold it, keeps the
// token (the next grant must exceed it), and wakes the waiters.
// ARGV: owner, token. Replies 1 (freed), 2 (freed, but it had lapsed
// first) or {owner, token} of the lock as it is (owner empty if free).
// It reads the clock only to tell a lapsed grant.
var releaseScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'o', 't', 'e', 'q')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] then return {h[1] or '', h[2] or ''} end
if not h[4] then
  redis.call('HDEL', KEYS[1], 'o', 'e')
elseif redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HDEL', KEYS[1], 'o', 'e')
  redis.call('PUBLISH', KEYS[1], 'free')
else
  redis.call('HDEL', KEYS[1], 'o', 'e', 'q')
end
local tm = redis.call('TIME')
if tonumber(h[3]) <= tm[1] * 1000000 + tm[2] then return 2 end
return 1
`)

// leaveScript takes owner off the queue when its wait ends, and wakes
// the others: it may have been the head they waited behind.
// ARGV: owner.
var leaveScript = redis.NewScript(`
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PUBLISH', KEYS[1], 'left') end
return 1
`)

// describeScript reads the lock and its live waiters in arrival order.
// Replies {now, owner, token, expiry, {owner, arrival, …}}; the
// lock's fields are strings, empty if absent, and the times of now and
// the waiters integers.
var describeScript = redis.NewScript(prelude + `
local h = redis.call('HMGET', KEYS[1], 'o', 't', 'e')
local q = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
local w = {}
for i = 1, #q, 2 do
  local x = tonumber(redis.call('ZSCORE', KEYS[3], q[i]))
  if x and x > now then
    w[#w + 1] = q[i]
    w[#w + 1] = tonumber(q[i + 1])
  end
end
return {now, h[1] or '', h[2] or '', h[3] or '', w}
`)

// guardScript raises a resource's fence to token and runs the caller's
// commands, or refuses a token below the fence and writes nothing.
// KEYS[1] is the fence. ARGV: token, then each command as its
// argument count followed by its arguments. Tokens are compared as
// decimal strings (longer is larger), exact for every int64 ≥ 0.
// Replies {'ok'} or {'stale', fence}.
var guardScript = redis.NewScript(`
local tok = ARGV[1]
local cur = redis.call('GET', KEYS[1])
if cur and (#cur > #tok or (#cur == #tok and cur > tok)) then return {'stale', cur} end
redis.call('SET', KEYS[1], tok)
local i = 2
while i <= #ARGV do
  local c = tonumber(ARGV[i])
  redis.call(unpack(ARGV, i + 1, i + c))
  i = i + 1 + c
end
return {'ok'}
`)
