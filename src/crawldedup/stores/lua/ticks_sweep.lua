-- A slice of the ticks layout's sweep, for one group: KEYS[1] the group's sweep cursor,
-- "{<namespace>:<g>}:cursor" (the next of its strings to look at). ARGV: the group's first
-- shard, its shard count, how many strings to look at, then SPLIT and the window's (see
-- ticks_primitives.lua). Sweeps each string that is due (stamped HALF or more ticks ago);
-- returns the strings swept.
local CURSOR = KEYS[1]
local FIRST, COUNT, SLICE = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local BUCKETS = COUNT * SPLIT
local at = tonumber(redis.call('GET', CURSOR) or '0') % BUCKETS
local swept_ = 0
for _ = 1, math.min(SLICE, BUCKETS) do
  local k = TAG .. ':' .. decimal(FIRST + math.floor(at / SPLIT)) .. ':t' .. decimal(at % SPLIT)
  local head = redis.call('GETRANGE', k, 0, 3)
  if #head == 4 then
    local stamp = struct.unpack('>I4', head)
    if NOW - stamp >= HALF or stamp - NOW >= HALF then
      load(k)
      swept_ = swept_ + 1
    end
  end
  at = (at + 1) % BUCKETS
end
redis.call('SET', CURSOR, decimal(at))
return swept_
