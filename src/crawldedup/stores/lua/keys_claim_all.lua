local function claim_all(count, ttl)
  local value, expiry = GEN >= 0 and 'L' or '1', nil  -- a new key's value, and MSETEX's expiry
  if ttl > 0 then
    if GEN >= 0 then value, expiry = LIVE, 'EXAT' else expiry = 'EX' end
  end
  local usable = MSETEX
  if expiry and not usable then return claim_one_by_one(count, ttl) end
  local at_time = expiry == 'EXAT' and EXPIRE_AT or decimal(ttl)
  local lost, seen, args, at = {}, {}, {}, {}
  for first = 1, count, MSETNX_KEYS do
    local j = 0
    for i = first, math.min(first + MSETNX_KEYS - 1, count) do
      local k = record(i)
      if seen[k] then
        lost[#lost + 1] = i
      else
        seen[k] = true
        j = j + 1
        args[2 * j - 1], args[2 * j], at[j] = k, value, i
      end
    end
    local set = 0
    if j > 0 and not expiry then
      set = redis.call('MSETNX', unpack(args, 1, 2 * j))
    elseif j > 0 and usable then
      args[2 * j + 1], args[2 * j + 2], args[2 * j + 3] = 'NX', expiry, at_time
      set = redis.pcall('MSETEX', j, unpack(args, 1, 2 * j + 3))
      if type(set) == 'table' then set, usable = 0, false end  -- not on this node: key by key
    end
    if set == 0 then
      for t = 1, j do
        if claim_key(args[2 * t - 1], nil, ttl) == 0 then lost[#lost + 1] = at[t] end
      end
    end
  end
  table.sort(lost)  -- a repeat lost to its first is found before the chunk is tried
  return lost
end
