local cap, stamp, expire_at = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
for i = 4, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 and redis.call('HLEN', KEYS[1]) >= cap then
    redis.call('HDEL', KEYS[1], redis.call('HRANDFIELD', KEYS[1]))
  end
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1] .. stamp)
end
if expire_at > 0 then redis.call('EXPIREAT', KEYS[1], expire_at) end
return 0
