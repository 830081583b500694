-- A slice of the swept layout's sweep, for one group: KEYS[1] "{<namespace>:<g>}:cursor" holds
-- "<SCAN cursor> <when the pass began> <keys looked at in it>". ARGV: now (the window's clock,
-- whole seconds), the seconds a pass may take, the most keys a slice looks at, then 0 to look
-- only at the keys due by now (at a pace that ends a pass over the node's keys in its seconds,
-- once LEAST are due or the seconds are up), 1 to look at that many at once, 2 to do so from a
-- new pass, then the window's. A pass is SCANs of the node's keyspace for the group's tag (a
-- cluster node holds the group's slot); a claim key (the tag and 16 bytes) whose generation is
-- forgotten is deleted. Returns {keys deleted, 1 when the pass ended in this slice, seconds
-- until the next slice is due at the keyspace's size now}.
local LEAST = 100
local CURSOR = KEYS[1]
local NOW, PASS, MOST, FORCE = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] ~= '0'
local cursor, began, looked = string.match(redis.call('GET', CURSOR) or '', '^(%d+) (%-?%d+) (%d+)$')
local fresh = not cursor  -- none yet (or not the sweep's): the first pass begins now
if fresh then cursor, began, looked = '0', NOW, 0 end
began, looked = tonumber(began), tonumber(looked)
if ARGV[4] == '2' then cursor = '0' end
local size = math.max(redis.call('DBSIZE'), 1)
local function wait()  -- until LEAST more keys are due, or the pass's seconds are up
  return math.max(0, math.ceil(math.min(PASS, (looked + LEAST) * PASS / size) + began - NOW))
end
local count = MOST
if not FORCE then
  count = math.min(MOST, math.ceil(size * (NOW - began) / PASS) - looked)
  if count < LEAST and NOW - began < PASS then
    if fresh then redis.call('SET', CURSOR, '0 ' .. decimal(began) .. ' 0') end
    return {0, 0, wait()}
  end
  count = math.max(count, LEAST)
end
local reply = redis.call('SCAN', cursor, 'MATCH', TAG .. '*', 'COUNT', decimal(count))
local dropped = 0
for _, k in ipairs(reply[2]) do
  if #k == #TAG + 16 then
    local v = redis.call('GET', k)
    if v and string.sub(v, 1, 1) == 'g' and tonumber(string.sub(v, 2)) < OLDEST then
      redis.call('DEL', k)
      dropped = dropped + 1
    end
  end
end
cursor, looked = reply[1], looked + count
local ended = cursor == '0'
if ended then  -- the next pass begins on time, or at most one pass late
  began, looked = math.max(began + PASS, NOW - PASS), 0
end
redis.call('SET', CURSOR, cursor .. ' ' .. decimal(began) .. ' ' .. decimal(looked))
return {dropped, ended and 1 or 0, wait()}
