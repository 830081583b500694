local function claim_one_by_one(ks, ms, count, ttl)
  local won = {}
  for i = 1, count do won[i] = claim_key(ks[i], ms[i], ttl) end
  return won
end
