local seconds = tonumber(ARGV[1])
local receipt = read_receipt(KEYS[2], seconds)
if receipt then return receipt end
local answers = {}
for first = 1, COUNT, 1000 do
  local added = redis.call('BF.MADD', KEYS[1], unpack(items(first, math.min(first + 999, COUNT))))
  for _, a in ipairs(added) do answers[#answers + 1] = a end
end
local text = as_text(answers, COUNT)
keep_receipt(KEYS[2], seconds, text)
return text
