package redisstore

import "github.com/redis/go-redis/v9"

// The scripts. Each runs atomically on the master of the lock's slot,
// reads the time from that master (TIME), and names every key it
// touches in KEYS, which share the lock's hash tag.
//
// A lock's keys: KEYS[1], the lock hash, with fields o (owner), t (the
// last token granted, kept after a release), s (since, µs) and e
// (expiry, µs); KEYS[2], the queue, a sorted set of waiting owners
// scored by arrival (µs); KEYS[3], each waiter's own expiry (µs). The
// pub/sub channel is the name of KEYS[1].
//
// Numbers go to Redis through string.format('%.0f'): Lua numbers are
// doubles, exact for integers below 2^53 (µs since 1970 stay below it
// until the year 2255), and a plain tostring would print 1.8e+15.

// prelude defines now (µs by the master's clock), n (an integer as a
// decimal string) and keep (raise a key's TTL to at least ms).
const prelude = `
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local function n(x) return string.format('%.0f', x) end
local function keep(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end
`

// acquireScript grants the lock, extends a reentrant grant, or (when
// waiting) queues the owner and says how long it may sleep before it
// asks again.
//
// ARGV: owner, ttl µs, wait (1/0), waiter TTL µs, retain ms, seen µs
// (the highest TIME the client saw), max clock skew µs.
//
// Replies, all strings:
//
//	{'ok', token, since, expiry, now, new (1/0)}
//	{'held', holder, token, expiry, now, sleep µs}
//	{'queued', head waiter, '0', its expiry, now, sleep µs}
//	{'skew', now, µs behind}   the clock reads behind what a client saw
//	{'behind', now, µs behind} the clock reads behind the last token
var acquireScript = redis.NewScript(prelude + `
local owner, ttl, wait, wttl = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1', tonumber(ARGV[4])
local retain, seen, skew = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
if now < seen - skew then return {'skew', n(now), n(seen - now)} end

local function queue()
  redis.call('ZADD', KEYS[2], 'NX', n(now), owner)
  redis.call('ZADD', KEYS[3], n(now + wttl), owner)
  local ms = math.ceil(2 * wttl / 1000)
  keep(KEYS[2], ms)
  keep(KEYS[3], ms)
end

local h = redis.call('HMGET', KEYS[1], 'o', 't', 's', 'e')
local o, tok, since, exp = h[1], h[2], h[3], tonumber(h[4])
local live = o and exp and exp > now
if live and o == owner then
  exp = now + ttl
  redis.call('HSET', KEYS[1], 'e', n(exp))
  redis.call('PEXPIRE', KEYS[1], math.ceil(ttl / 1000) + retain)
  return {'ok', tok, since, n(exp), n(now), '0'}
end
if live then
  if wait then queue() end
  return {'held', o, tok, n(exp), n(now), n(exp - now)}
end

-- Free. Waiters ahead whose own TTL lapsed are dead: skip them all now.
local head
while true do
  head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not head or head == owner then break end
  local hx = tonumber(redis.call('ZSCORE', KEYS[3], head))
  if hx and hx > now then
    if wait then queue() end
    return {'queued', head, '0', n(hx), n(now), n(hx - now)}
  end
  redis.call('ZREM', KEYS[2], head)
  redis.call('ZREM', KEYS[3], head)
end

-- The token is the master's clock in µs, and must be above the last.
local last = tonumber(tok) or 0
if last >= now then return {'behind', n(now), n(last - now + 1)} end
redis.call('HSET', KEYS[1], 'o', owner, 't', n(now), 's', n(now), 'e', n(now + ttl))
redis.call('PEXPIRE', KEYS[1], math.ceil(ttl / 1000) + retain)
redis.call('ZREM', KEYS[2], owner)
redis.call('ZREM', KEYS[3], owner)
return {'ok', n(now), n(now), n(now + ttl), n(now), '1'}
`)

// renewScript extends a live grant of owner and token.
// ARGV: owner, token, ttl µs, retain ms.
// Replies {'ok', expiry, now} or {'lost', owner, token, expiry, now}.
var renewScript = redis.NewScript(prelude + `
local h = redis.call('HMGET', KEYS[1], 'o', 't', 'e')
if h[1] == ARGV[1] and h[2] == ARGV[2] and tonumber(h[3]) > now then
  local exp = now + tonumber(ARGV[3])
  redis.call('HSET', KEYS[1], 'e', n(exp))
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3]) / 1000) + tonumber(ARGV[4]))
  return {'ok', n(exp), n(now)}
end
return {'lost', h[1] or '', h[2] or '', h[3] or '', n(now)}
`)

// releaseScript frees the lock if owner and token hold it, keeps the
// token (the next grant must exceed it), and wakes the waiters.
// ARGV: owner, token. Replies {'ok'}, {'lapsed'} (it was freed, but
// had lapsed first) or {'not', owner, token}.
var releaseScript = redis.NewScript(prelude + `
local h = redis.call('HMGET', KEYS[1], 'o', 't', 'e')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] then return {'not', h[1] or '', h[2] or ''} end
redis.call('HDEL', KEYS[1], 'o', 's', 'e')
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PUBLISH', KEYS[1], 'free') end
if tonumber(h[3]) <= now then return {'lapsed'} end
return {'ok'}
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
// Replies {now, owner, token, since, expiry, {owner, arrival, …}}.
var describeScript = redis.NewScript(prelude + `
local h = redis.call('HMGET', KEYS[1], 'o', 't', 's', 'e')
local q = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
local w = {}
for i = 1, #q, 2 do
  local x = tonumber(redis.call('ZSCORE', KEYS[3], q[i]))
  if x and x > now then
    w[#w + 1] = q[i]
    w[#w + 1] = n(tonumber(q[i + 1]))
  end
end
return {n(now), h[1] or '', h[2] or '', h[3] or '', h[4] or '', w}
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
