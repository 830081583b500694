local function claim_all(count, ttl)
  if GEN >= 0 or ttl > 0 then return claim_one_by_one(count, ttl) end
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
        args[2 * j - 1], args[2 * j], at[j] = k, '1', i
      end
    end
    if j == 0 or redis.call('MSETNX', unpack(args, 1, 2 * j)) == 0 then
      for t = 1, j do
        if claim_key(args[2 * t - 1], nil, ttl) == 0 then lost[#lost + 1] = at[t] end
      end
    end
  end
  table.sort(lost)  -- a repeat lost to its first is found before the chunk is tried
  return lost
end
