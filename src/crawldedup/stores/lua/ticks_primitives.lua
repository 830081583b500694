-- The ticks layout of a windowed sharded-set namespace: SPLIT strings per shard,
-- "<shard key>:t<member mod SPLIT>" (ARGV[#ARGV - 3] is SPLIT), each a 5-byte header (the tick
-- S it was last swept at, big-endian uint32, and how many of its claims are leased, one byte)
-- and then one 5-byte record per claim: the member's 4 bytes (fingerprint bytes 8-11) and the
-- tick it was claimed at, mod 255 (255: leased, its lease decides). A claim is one GET, a C
-- search of the member in the string (string.find, plain) and one SET of the new string.
-- GEN is the current tick NOW, OLDEST = NOW - SPAN (SPAN ticks make a window: a claim made at
-- tick t is live while NOW - t <= SPAN), FORGET_AT when a string stamped now may expire (the
-- client's clock, whole seconds). A string is swept (its forgotten claims dropped) at the
-- first touch at or after S + HALF, so every claim it holds was made at a tick in
-- [S - SPAN, S + HALF), fewer than 255 ticks apart: a tick byte v reads as
-- t = B + ((v - B) mod 255), B = S - SPAN. A string holding a leased claim does not expire.
local WIDTH = 12
local SPLIT = tonumber(ARGV[#ARGV - 3])
local NOW, SPAN = GEN, GEN - OLDEST
local HALF = math.floor(SPAN / 4)
local LEASED = 255
local HEAD = 5
local TICK = string.char(NOW % 255)
local bucket_keys = {}
local function locate(r)
  local shard, m = struct.unpack('<I8i4', r)
  local sub = m % SPLIT
  local id = shard * SPLIT + sub
  local k = bucket_keys[id]
  if not k then
    k = TAG .. ':' .. string.format('%d', shard) .. ':t' .. decimal(sub)
    bucket_keys[id] = k
  end
  return k, string.sub(r, 9, 12)
end
local function tick_of(v, stamp)
  local base = stamp - SPAN
  return base + (v - base) % 255
end
-- The position of member m's record in s, or nil (a match must start a record).
local function find(s, m)
  local at = HEAD + 1
  while true do
    local p = string.find(s, m, at, true)
    if not p then return nil end
    if (p - HEAD - 1) % 5 == 0 then return p end
    at = p + 1
  end
end
local function live_at(s, p, stamp)
  local v = string.byte(s, p + 4)
  return v == LEASED or NOW - tick_of(v, stamp) <= SPAN
end
-- s without its forgotten claims, stamped NOW; nil when nothing is left.
local function swept(s, stamp)
  local kept, leased = {''}, 0
  for p = HEAD + 1, #s, 5 do
    local v = string.byte(s, p + 4)
    if v == LEASED then leased = leased + 1 end
    if v == LEASED or NOW - tick_of(v, stamp) <= SPAN then kept[#kept + 1] = string.sub(s, p, p + 4) end
  end
  if #kept == 1 then return nil end
  kept[1] = struct.pack('>I4B', NOW, math.min(leased, 254))
  return table.concat(kept)
end
-- Writes s (nil: deletes the key). A string without leased claims expires when one stamped
-- now may (FORGET_AT), set when its stamp is NOW (new or just swept) and kept otherwise: the
-- claims it takes before its next sweep are forgotten by then.
local function store(k, s)
  if not s then redis.call('DEL', k) return end
  if string.byte(s, 5) > 0 then redis.call('SET', k, s)
  elseif struct.unpack('>I4', s) == NOW then redis.call('SET', k, s, 'EXAT', decimal(FORGET_AT))
  else redis.call('SET', k, s, 'KEEPTTL') end
end
-- The string of k and its stamp, swept first when due (then written back).
local function load(k)
  local s = redis.call('GET', k)
  if not s then return nil, nil end
  local stamp = struct.unpack('>I4', s)
  if NOW - stamp >= HALF or stamp - NOW >= HALF then
    s = swept(s, stamp)
    store(k, s)
    if not s then return nil, nil end
    stamp = NOW
  end
  return s, stamp
end
-- s with the tick byte of the record at p replaced, and its leased count moved by delta.
local function retick(s, p, tick, delta)
  s = string.sub(s, 1, p + 3) .. tick .. string.sub(s, p + 5)
  if delta == 0 then return s end
  local leased = math.max(0, math.min(254, string.byte(s, 5) + delta))
  return string.sub(s, 1, 4) .. string.char(leased) .. string.sub(s, 6)
end
-- s (nil: a new string) with records appended, each of them followed by tick (a tick byte, or
-- '' for records that hold theirs), leased ones counted. One concatenation makes the string.
local function appended(s, records, tick, leased)
  if #records == 0 then return s end
  local head = s or struct.pack('>I4B', NOW, 0)
  if leased > 0 then
    head = string.sub(head, 1, 4) .. string.char(math.min(254, string.byte(head, 5) + leased)) .. string.sub(head, 6)
  end
  return head .. table.concat(records, tick) .. tick
end
-- The claims of the call, in runs (runs: how many claims each run holds, little-endian uint32):
-- the client orders a group's claims by string, so a run is the claims of one string, which
-- is read and written once; a claim costs the search of its member. Returns the claims lost.
local function claim_all(count, ttl, runs)
  local lost, last = {}, 0
  local value = ttl > 0 and TICK or string.char(LEASED)
  local leasing = ttl > 0 and 0 or 1
  for r = 1, #runs, 4 do
    local first = last + 1
    last = last + struct.unpack('<I4', runs, r)
    local k = record(first)
    local s, stamp = load(k)
    local fresh, taken, changed = {}, {}, false
    for i = first, last do
      local m = string.sub(RECORDS, i * WIDTH - 3, i * WIDTH)
      local p = s and find(s, m)
      if taken[m] or (p and live_at(s, p, stamp)) then
        lost[#lost + 1] = i
      elseif p then  -- forgotten, not yet swept: claimed again in place
        s = retick(s, p, value, leasing)
        changed = true
      else
        fresh[#fresh + 1] = m
      end
      taken[m] = true
    end
    if #fresh > 0 or changed then store(k, appended(s, fresh, value, #fresh * leasing)) end
  end
  return lost
end
local function claimed(k, m)
  local s, stamp = load(k)
  local p = s and find(s, m)
  return (p and live_at(s, p, stamp)) and 1 or 0
end
-- A leased claim made lasting (done), or a claim whose lease expired won again by a lasting claim.
local function visit(k, m, ttl)
  local s = load(k)
  local p = s and find(s, m)
  if p then
    store(k, retick(s, p, TICK, string.byte(s, p + 4) == LEASED and -1 or 0))
  else
    store(k, appended(s, {m}, TICK, 0))
  end
end
local function unclaim(k, m)
  local s = load(k)
  local p = s and find(s, m)
  if not p then return end
  if string.byte(s, p + 4) == LEASED then s = retick(s, p, string.char(LEASED), -1) end
  s = string.sub(s, 1, p - 1) .. string.sub(s, p + 5)
  store(k, #s > HEAD and s or nil)
end
local function claim_id(k, m)
  return string.match(k, '(%d+):t%d+$') .. ':' .. string.format('%d', (struct.unpack('<i4', m)))
end
