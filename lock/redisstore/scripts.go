package redisstore

import "github.com/redis/go-redis/v9"

// The scripts. Each runs atomically on the master of the lock's slot,
// reads the time from that master (TIME) where it needs it, and names
// every key it touches in KEYS, which share the lock's hash tag.
//
// A lock's keys: KEYS[1], the lock hash, with fields o (owner), t (the
// last token granted, kept after a release), s (since, µs) and e
// (expiry, µs), and q, set while the queue may exist; KEYS[2], the
// queue, a sorted set of waiting owners scored by arrival (µs);
// KEYS[3], each waiter's own expiry (µs). The pub/sub channel is the
// name of KEYS[1].
//
// q spares an uncontended acquire and release from looking at the
// queue at all. Only queue() creates the queue, and it sets q and
// keeps the hash at least as long as the queue; only a release that
// finds the queue gone clears it. So a lock without q has no queue,
// and no waiter to skip over or wake.
//
// Numbers are Lua numbers, doubles, exact for integers below 2^53 (µs
// since 1970 stay below it until the year 2255). Redis turns a number
// argument of redis.call into a string with %.17g, which prints such
// an integer in full (tostring would print 1.8e+15), and a number in a
// reply into an integer reply. A new grant, the common case, formats
// one number (its expiry): it spells now from TIME's two strings and
// gets its PEXPIRE from the client.
//
// The common replies are one integer, which the client reads without
// an array: an uncontended acquire and release cost only the commands
// they need, and do not touch the queue keys (see q).

// prelude defines now (µs by the master's clock) and keep (raise a
// key's TTL to at least ms).
const prelude = `
local tm = redis.call('TIME')
local now = tm[1] * 1000000 + tm[2]
local function keep(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end
`

// Reply kinds of acquireScript's arrays, in their first element.
const (
	acqOK     = 1 // {1, token, expiry, now}: a live grant of owner, extended
	acqHeld   = 2 // {2, holder, token, expiry, now}
	acqQueued = 3 // {3, head waiter, its expiry, now}
	acqBehind = 4 // {4, now, µs behind}: the clock reads behind the last token
	acqSkew   = 5 // {5, now, µs behind}: the clock reads behind what a client saw
)

// acquireScript grants the lock, extends a reentrant grant, or (when
// waiting) queues the owner and says when it may ask again.
//
// ARGV: owner, ttl µs, wait (1/0), waiter TTL µs, the lock hash's TTL
// on a grant in ms (ttl rounded up, plus retain), seen µs (the highest
// TIME the client saw), max clock skew µs.
//
// A new grant replies the integer now, which is its token and its
// since; its expiry is now + ttl. Every other reply is an array whose
// first element is one of the acq constants.
var acquireScript = redis.NewScript(prelude + `
local owner, ttl, wait = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local seen = tonumber(ARGV[6])
if now < seen - tonumber(ARGV[7]) then return {5, now, seen - now} end

local function queue()
  local wttl = tonumber(ARGV[4])
  redis.call('ZADD', KEYS[2], 'NX', now, owner)
  redis.call('ZADD', KEYS[3], now + wttl, owner)
  local ms = math.ceil(2 * wttl / 1000)
  keep(KEYS[2], ms)
  keep(KEYS[3], ms)
  redis.call('HSET', KEYS[1], 'q', '1')
  keep(KEYS[1], ms)
end

local h = redis.call('HMGET', KEYS[1], 'o', 't', 'e', 'q')
local o, tok, exp = h[1], tonumber(h[2]), tonumber(h[3])
local live = o and exp and exp > now
if live and o == owner then
  exp = now + ttl
  redis.call('HSET', KEYS[1], 'e', string.format('%.0f', exp))
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return {1, tok or 0, exp, now}
end
if live then
  if wait then queue() end
  return {2, o, tok or 0, exp, now}
end

-- Free. Waiters ahead whose own TTL lapsed are dead: skip them all now.
local head
while h[4] do
  head = redis.call('ZRANGE', KEYS[2], '0', '0')[1]
  if not head or head == owner then break end
  local hx = tonumber(redis.call('ZSCORE', KEYS[3], head))
  if hx and hx > now then
    if wait then queue() end
    return {3, head, hx, now}
  end
  redis.call('ZREM', KEYS[2], head)
  redis.call('ZREM', KEYS[3], head)
end

-- The token is the master's clock in µs, and must be above the last.
if tok and tok >= now then return {4, now, tok - now + 1} end
local t = tm[1] .. string.sub('00000' .. tm[2], -6) -- now, as %.0f would print it
redis.call('HSET', KEYS[1], 'o', owner, 't', t, 's', t, 'e', string.format('%.0f', now + ttl))
redis.call('PEXPIRE', KEYS[1], ARGV[5])
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
local h = redis.call('HMGET', KEYS[1], 'o', 't', 'e')
if h[1] == ARGV[1] and h[2] == ARGV[2] and tonumber(h[3]) > now then
  local exp = now + tonumber(ARGV[3])
  redis.call('HSET', KEYS[1], 'e', exp)
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3]) / 1000) + tonumber(ARGV[4]))
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
  redis.call('HDEL', KEYS[1], 'o', 's', 'e')
elseif redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HDEL', KEYS[1], 'o', 's', 'e')
  redis.call('PUBLISH', KEYS[1], 'free')
else
  redis.call('HDEL', KEYS[1], 'o', 's', 'e', 'q')
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
// Replies {now, owner, token, since, expiry, {owner, arrival, …}}; the
// lock's fields are strings, empty if absent, and the times of now and
// the waiters integers.
var describeScript = redis.NewScript(prelude + `
local h = redis.call('HMGET', KEYS[1], 'o', 't', 's', 'e')
local q = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
local w = {}
for i = 1, #q, 2 do
  local x = tonumber(redis.call('ZSCORE', KEYS[3], q[i]))
  if x and x > now then
    w[#w + 1] = q[i]
    w[#w + 1] = tonumber(q[i + 1])
  end
end
return {now, h[1] or '', h[2] or '', h[3] or '', h[4] or '', w}
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
