-- A slice of the ticks layout's sweep, for one group: KEYS[1] the group's sweep cursor, "{<namespace>:<g>}:cursor" (the
-- next of its hashes to sweep). ARGV: the group's first shard, its shard count, how many
-- hashes to sweep, then SPLIT and the window's (see ticks_primitives.lua). Sweeps each hash
-- that is due (stamped HALF or more ticks ago); returns the hashes swept.
local CURSOR = KEYS[1]
local FIRST, COUNT, SLICE = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local HASHES = COUNT * SPLIT
local at = tonumber(redis.call('GET', CURSOR) or '0') % HASHES
local swept = 0
for _ = 1, math.min(SLICE, HASHES) do
  local k = TAG .. ':' .. decimal(FIRST + math.floor(at / SPLIT)) .. ':h' .. decimal(at % SPLIT)
  local stamp = tonumber(redis.call('HGET', k, 's'))
  if stamp and (NOW - stamp >= HALF or stamp - NOW >= HALF) then
    sweep(k, stamp)
    swept = swept + 1
  end
  at = (at + 1) % HASHES
end
redis.call('SET', CURSOR, decimal(at))
return swept
