local found = {}
for first = 1, COUNT, 1000 do
  local exists = redis.call('BF.MEXISTS', KEYS[1], unpack(items(first, math.min(first + 999, COUNT))))
  for _, v in ipairs(exists) do found[#found + 1] = v end
end
return as_text(found, COUNT)
