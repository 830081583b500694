local function claim_all(ks, ms, count, ttl)
  if GEN >= 0 or ttl > 0 then return claim_one_by_one(ks, ms, count, ttl) end
  local won, seen, args, at = {}, {}, {}, {}
  for first = 1, count, MSETNX_KEYS do
    local j = 0
    for i = first, math.min(first + MSETNX_KEYS - 1, count) do
      local k = ks[i]
      if seen[k] then
        won[i] = 0
      else
        seen[k] = true
        j = j + 1
        args[2 * j - 1], args[2 * j], at[j] = k, '1', i
      end
    end
    if j > 0 and redis.call('MSETNX', unpack(args, 1, 2 * j)) == 1 then
      for t = 1, j do won[at[t]] = 1 end
    else
      for t = 1, j do won[at[t]] = claim_key(ks[at[t]], ms[at[t]], ttl) end
    end
  end
  return won
end
