local seconds = tonumber(ARGV[1])
local receipt = read_receipt(KEYS[2], seconds)
if receipt then return receipt end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('BF.RESERVE', KEYS[1], ARGV[6], ARGV[7])
  redis.call('EXPIREAT', KEYS[1], ARGV[5])
end
local seen = seen_in(older)
local fresh, rows = {}, {}
for i = 1, COUNT do
  if seen[i] == 0 then fresh[#fresh + 1] = item(i); rows[#rows + 1] = i end
end
local answers = {}
for i = 1, COUNT do answers[i] = 0 end
for first = 1, #fresh, 1000 do
  local added = redis.call('BF.MADD', KEYS[1], unpack(fresh, first, math.min(first + 999, #fresh)))
  for j, a in ipairs(added) do answers[rows[first + j - 1]] = a end
end
local text = as_text(answers, COUNT)
keep_receipt(KEYS[2], seconds, text)
return text
