local PREFIX, GEN, OLDEST = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local older = {}
for g = GEN - 1, OLDEST, -1 do
  if redis.call('EXISTS', PREFIX .. g) == 1 then older[#older + 1] = PREFIX .. g end
end
-- Per item: 1 when one of the filters holds it.
local function seen_in(filters)
  local seen = {}
  for i = 1, COUNT do seen[i] = 0 end
  for first = 1, COUNT, 1000 do
    local chunk = items(first, math.min(first + 999, COUNT))
    for _, f in ipairs(filters) do
      local found = redis.call('BF.MEXISTS', f, unpack(chunk))
      for j, v in ipairs(found) do if v == 1 then seen[first + j - 1] = 1 end end
    end
  end
  return seen
end
