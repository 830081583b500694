-- The ticks layout of a windowed sharded-set namespace: SPLIT hashes per shard,
-- "<shard key>:h<member mod SPLIT>" (ARGV[#ARGV - 3] is SPLIT), whose fields are the members
-- and whose values are the tick each was claimed at (mod 128),
-- so that a claim is one lookup. GEN is the current tick NOW, OLDEST = NOW - SPAN (SPAN ticks
-- make a window: a claim made at tick t is live while NOW - t <= SPAN), FORGET_AT when a hash
-- stamped now may expire (the client's clock, whole seconds). A hash's field "s" holds the tick
-- it was last swept at, S; it is swept (its forgotten claims deleted) at the first touch at or
-- after S + HALF, so every claim it holds was made at a tick in [S - SPAN, S + HALF), fewer
-- than 128 ticks apart: a value v decodes as t = B + ((v - B) mod 128), B = S - SPAN. A leased
-- claim's value is "L" (its lease decides); a hash holding one does not expire.
local WIDTH = 12
local SPLIT = tonumber(ARGV[#ARGV - 3])
local NOW, SPAN = GEN, GEN - OLDEST
local HALF = math.floor(SPAN / 4)
local TICK = decimal(NOW % 128)
local hash_keys = {}
local function locate(r)
  local shard, m = struct.unpack('<I8i4', r)
  local id = shard * SPLIT + m % SPLIT
  local k = hash_keys[id]
  if not k then
    k = TAG .. ':' .. string.format('%d', shard) .. ':h' .. decimal(m % SPLIT)
    hash_keys[id] = k
  end
  return k, string.format('%d', m)
end
local function tick_of(v, stamp)
  local base = stamp - SPAN
  return base + (tonumber(v) - base) % 128
end
local function live(v, stamp)
  return v == 'L' or NOW - tick_of(v, stamp) <= SPAN
end
-- Deletes the forgotten claims of hash k stamped at tick stamp, and stamps it NOW; the hash is
-- deleted when nothing is left, and expires unless it holds a leased claim.
local function sweep(k, stamp)
  local flat = redis.call('HGETALL', k)
  local gone, leased, kept = {}, false, 0
  for i = 1, #flat, 2 do
    local f, v = flat[i], flat[i + 1]
    if f ~= 's' then
      if v == 'L' then leased = true; kept = kept + 1
      elseif live(v, stamp) then kept = kept + 1
      else gone[#gone + 1] = f end
    end
  end
  if kept == 0 then redis.call('DEL', k) return nil end
  for first = 1, #gone, 1000 do redis.call('HDEL', k, unpack(gone, first, math.min(first + 999, #gone))) end
  redis.call('HSET', k, 's', decimal(NOW))
  if not leased then redis.call('EXPIREAT', k, decimal(FORGET_AT)) end
  return NOW
end
-- The stamp of hash k read with its members' values (one HMGET); the hash swept first when due.
local function stamped(k, ms)
  local values = redis.call('HMGET', k, 's', unpack(ms))
  local stamp = tonumber(values[1])
  if stamp and (NOW - stamp >= HALF or stamp - NOW >= HALF) then
    local old = stamp
    stamp = sweep(k, stamp)
    for j = 2, #values do  -- what the sweep deleted reads as absent
      if values[j] and not live(values[j], old) then values[j] = false end
    end
  end
  return stamp, values
end
local function put(k, stamp, ttl, ...)
  local pairs_ = {}
  local value = ttl > 0 and TICK or 'L'
  for _, m in ipairs({...}) do pairs_[#pairs_ + 1] = m; pairs_[#pairs_ + 1] = value end
  if not stamp then
    pairs_[#pairs_ + 1] = 's'; pairs_[#pairs_ + 1] = decimal(NOW)
  end
  redis.call('HSET', k, unpack(pairs_))
  if ttl == 0 then redis.call('PERSIST', k)
  elseif not stamp then redis.call('EXPIREAT', k, decimal(FORGET_AT)) end
end
local function claim_key(k, m, ttl)
  local stamp, values = stamped(k, {m})
  if values[2] and live(values[2], stamp) then return 0 end
  put(k, stamp, ttl, m)
  return 1
end
local function claim_all(ks, ms, count, ttl)
  local won, rows_of, shards = {}, {}, {}
  for i = 1, count do
    local rows = rows_of[ks[i]]
    if not rows then rows = {}; rows_of[ks[i]] = rows; shards[#shards + 1] = ks[i] end
    rows[#rows + 1] = i
  end
  for _, k in ipairs(shards) do
    local rows, members, first_row = rows_of[k], {}, {}
    for _, i in ipairs(rows) do
      local m = ms[i]
      if not first_row[m] then first_row[m] = i; members[#members + 1] = m end
    end
    local present = {}
    local stamp = nil
    for first = 1, #members, 1000 do
      local chunk = {unpack(members, first, math.min(first + 999, #members))}
      local values
      stamp, values = stamped(k, chunk)
      for j, m in ipairs(chunk) do
        if values[j + 1] and live(values[j + 1], stamp) then present[m] = true end
      end
    end
    local fresh = {}
    for _, i in ipairs(rows) do
      local m = ms[i]
      if first_row[m] == i and not present[m] then won[i] = 1; fresh[#fresh + 1] = m else won[i] = 0 end
    end
    for first = 1, #fresh, 1000 do
      put(k, stamp, ttl, unpack(fresh, first, math.min(first + 999, #fresh)))
      stamp = stamp or NOW
    end
  end
  return won
end
local function claimed(k, m)
  local stamp, values = stamped(k, {m})
  return (values[2] and live(values[2], stamp)) and 1 or 0
end
-- A leased claim made lasting (done), or a claim whose lease expired won again by a lasting claim.
local function visit(k, m, ttl)
  local stamp = stamped(k, {m})
  put(k, stamp, 1, m)
end
local function unclaim(k, m) redis.call('HDEL', k, m) end
local function claim_id(k, m) return string.match(k, '(%d+):h%d+$') .. ':' .. m end
