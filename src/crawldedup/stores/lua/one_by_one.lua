local function claim_one_by_one(count, ttl)
  local lost = {}
  for i = 1, count do
    local k, m = record(i)
    if claim_key(k, m, ttl) == 0 then lost[#lost + 1] = i end
  end
  return lost
end
