-- Merges claims copied from another layout into one hash of the ticks layout (a migration):
-- KEYS[1] the group's lease records (for TAG). ARGV[1] the hash's key, then member and tick
-- pairs, then SPLIT and the window's (see ticks_primitives.lua). A claim already forgotten is
-- left out; one the hash holds with a tick as late or later, or leased, is kept as it is.
-- Returns how many claims were new to the hash or moved to a later tick.
local k = ARGV[1]
local ms, ts = {}, {}
for i = 2, #ARGV - 4, 2 do
  ms[#ms + 1] = ARGV[i]
  ts[#ts + 1] = tonumber(ARGV[i + 1])
end
if #ms == 0 then return 0 end
local stamp, values = stamped(k, ms)
local pairs_ = {}
for j, m in ipairs(ms) do
  local t, v = ts[j], values[j + 1]
  if NOW - t <= SPAN and v ~= 'L' and not (v and tick_of(v, stamp) >= t) then
    pairs_[#pairs_ + 1] = m
    pairs_[#pairs_ + 1] = decimal(t % 128)
  end
end
local changed = #pairs_ / 2
if changed == 0 then return 0 end
if not stamp then
  pairs_[#pairs_ + 1] = 's'
  pairs_[#pairs_ + 1] = decimal(NOW)
end
redis.call('HSET', k, unpack(pairs_))
if not stamp then redis.call('EXPIREAT', k, decimal(FORGET_AT)) end
return changed
