-- Merges claims copied from another layout into one string of the ticks layout (a migration):
-- KEYS[1] the group's lease records (for TAG). ARGV[1] the string's key, then pairs of a
-- member's 4 bytes and its tick, then SPLIT and the window's (see ticks_primitives.lua). A
-- claim already forgotten is left out; one the string holds at a tick as late or later, or
-- leased, is kept as it is. Returns how many claims were new or moved to a later tick.
local k = ARGV[1]
local s, stamp = load(k)
local records, changed = {}, 0
for i = 2, #ARGV - 4, 2 do
  local m, t = ARGV[i], tonumber(ARGV[i + 1])
  if NOW - t <= SPAN then
    local p = s and find(s, m)
    if not p then
      records[#records + 1] = m .. string.char(t % 255)
      changed = changed + 1
    else
      local v = string.byte(s, p + 4)
      if v ~= LEASED and tick_of(v, stamp) < t then
        s = retick(s, p, string.char(t % 255), 0)
        changed = changed + 1
      end
    end
  end
end
if changed > 0 then store(k, appended(s, records, '', 0)) end
return changed
