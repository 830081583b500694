-- A slice of the ticks layout's sweep, for one group: KEYS[1] the group's sweep cursor, "{<namespace>:<g>}:cursor" (the
-- next shard to sweep). ARGV: the group's first shard, its shard count, how many shards to
-- sweep, then the window's (see ticks_primitives.lua). Sweeps each shard's hash that is due
-- (stamped HALF or more ticks ago); returns the hashes swept.
local CURSOR = KEYS[1]
local FIRST, COUNT, SLICE = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local at = tonumber(redis.call('GET', CURSOR) or '0') % COUNT
local swept = 0
for _ = 1, math.min(SLICE, COUNT) do
  local k = TAG .. ':' .. decimal(FIRST + at) .. ':h'
  local stamp = tonumber(redis.call('HGET', k, 's'))
  if stamp and (NOW - stamp >= HALF or stamp - NOW >= HALF) then
    sweep(k, stamp)
    swept = swept + 1
  end
  at = (at + 1) % COUNT
end
redis.call('SET', CURSOR, decimal(at))
return swept
