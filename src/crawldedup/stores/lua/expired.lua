local LEASES, HOLDERS = KEYS[1], KEYS[2]
local limit, owner, lease = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', LEASES, '-inf', now, 'LIMIT', 0, limit)
local urls = {}
for _, id in ipairs(ids) do
  local held = redis.call('HGET', HOLDERS, id)
  if held then
    local url = string.sub(held, string.find(held, ' ', 1, true) + 1)
    if lease > 0 then
      redis.call('ZADD', LEASES, now + lease, id)
      redis.call('HSET', HOLDERS, id, owner .. ' ' .. url)
    else
      redis.call('ZREM', LEASES, id)
      redis.call('HSET', HOLDERS, id, ' ' .. url)
    end
    urls[#urls + 1] = url
  else
    redis.call('ZREM', LEASES, id)
  end
end
return urls
