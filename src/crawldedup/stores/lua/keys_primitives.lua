local WIDTH = 16
local MSETNX_KEYS = 64
local LIVE = 'g' .. decimal(GEN)  -- a lasting claim's value with a window
local EXPIRE_AT = decimal(FORGET_AT)  -- when it expires (EXAT)
local function locate(r) return TAG .. r, nil end
local function live(v)
  return v and (string.sub(v, 1, 1) ~= 'g' or tonumber(string.sub(v, 2)) >= OLDEST)
end
local function claim_key(k, m, ttl)
  if GEN >= 0 then
    local value = ttl > 0 and LIVE or 'L'
    local added
    if ttl > 0 then added = redis.call('SET', k, value, 'NX', 'EXAT', EXPIRE_AT) else added = redis.call('SET', k, value, 'NX') end
    if added then return 1 end
    if live(redis.call('GET', k)) then return 0 end
    if ttl > 0 then redis.call('SET', k, value, 'EXAT', EXPIRE_AT) else redis.call('SET', k, value) end
    return 1
  end
  if ttl > 0 then return redis.call('SET', k, '1', 'NX', 'EX', decimal(ttl)) and 1 or 0 end
  return redis.call('SET', k, '1', 'NX') and 1 or 0
end
local function claimed(k, m)
  if GEN >= 0 then return live(redis.call('GET', k)) and 1 or 0 end
  return redis.call('EXISTS', k)
end
local function visit(k, m, ttl)
  if GEN >= 0 then redis.call('SET', k, LIVE, 'EXAT', EXPIRE_AT)
  elseif ttl > 0 then redis.call('EXPIRE', k, decimal(ttl)) else redis.call('PERSIST', k) end
end
local function unclaim(k, m) redis.call('DEL', k) end
local function claim_id(k, m) return string.sub(k, -16) end
