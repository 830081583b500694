local function claim_shard(k, ms, rows, won, ttl)
  local members, first_row, present = {}, {}, {}
  for _, i in ipairs(rows) do
    local m = ms[i]
    if not first_row[m] then first_row[m] = i; members[#members + 1] = m end
  end
  for _, suffix in ipairs(SETS) do
    for first = 1, #members, 1000 do
      local found = redis.call('SMISMEMBER', k .. suffix, unpack(members, first, math.min(first + 999, #members)))
      for j, v in ipairs(found) do if v == 1 then present[members[first + j - 1]] = true end end
    end
  end
  local fresh = {}
  for _, i in ipairs(rows) do
    local m = ms[i]
    if first_row[m] == i and not present[m] then won[i] = 1; fresh[#fresh + 1] = m else won[i] = 0 end
  end
  for first = 1, #fresh, 1000 do put(k, ttl, unpack(fresh, first, math.min(first + 999, #fresh))) end
end
local function claim_all(count, ttl)
  if GEN < 0 then return claim_one_by_one(count, ttl) end
  local ks, ms, won, rows_of, shards = {}, {}, {}, {}, {}
  for i = 1, count do
    ks[i], ms[i] = record(i)
    local rows = rows_of[ks[i]]
    if not rows then rows = {}; rows_of[ks[i]] = rows; shards[#shards + 1] = ks[i] end
    rows[#rows + 1] = i
  end
  for _, k in ipairs(shards) do
    local rows = rows_of[k]
    if #rows == 1 then won[rows[1]] = claim_key(k, ms[rows[1]], ttl) else claim_shard(k, ms, rows, won, ttl) end
  end
  local lost = {}
  for i = 1, count do
    if won[i] == 0 then lost[#lost + 1] = i end
  end
  return lost
end
local function claimed(k, m)
  if GEN < 0 then return redis.call('SISMEMBER', k, m) end
  return in_window(k, m)
end
local function visit(k, m, ttl)
  if GEN >= 0 then
    redis.call('SREM', k .. ':L', m)
    remember(k, m)
  end
end
local function unclaim(k, m)
  if GEN < 0 then redis.call('SREM', k, m) return end
  for _, suffix in ipairs(SETS) do redis.call('SREM', k .. suffix, m) end
end
local function claim_id(k, m) return string.match(k, '(%d+)$') .. ':' .. m end
