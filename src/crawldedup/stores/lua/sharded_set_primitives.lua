local WIDTH = 12
local shard_keys = {}  -- a call has several claims per shard: its key is made once
local function locate(r)
  local shard, m = struct.unpack('<I8i4', r)
  local k = shard_keys[shard]
  if not k then
    k = TAG .. ':' .. string.format('%d', shard)
    shard_keys[shard] = k
  end
  return k, string.format('%d', m)
end
local SETS = {''}
if GEN >= 0 then
  SETS = {':L'}
  for g = GEN, OLDEST, -1 do SETS[#SETS + 1] = ':' .. decimal(g) end
end
local function in_window(k, m)
  for _, suffix in ipairs(SETS) do
    if redis.call('SISMEMBER', k .. suffix, m) == 1 then return 1 end
  end
  return 0
end
local expiring = {}
local function remember(k, ...)
  local current = k .. ':' .. decimal(GEN)
  redis.call('SADD', current, ...)
  if not expiring[current] then  -- once per set and call: a repeated EXPIREAT NX changes nothing
    redis.call('EXPIREAT', current, decimal(FORGET_AT), 'NX')
    expiring[current] = true
  end
end
-- Members new to shard k go where a claim puts them: the shard (no window), the current
-- generation's set (lasting claims) or the leased set.
local function put(k, ttl, ...)
  if GEN < 0 then redis.call('SADD', k, ...)
  elseif ttl > 0 then remember(k, ...)
  else redis.call('SADD', k .. ':L', ...) end
end
local function claim_key(k, m, ttl)
  if GEN < 0 then return redis.call('SADD', k, m) end
  if in_window(k, m) == 1 then return 0 end
  put(k, ttl, m)
  return 1
end
