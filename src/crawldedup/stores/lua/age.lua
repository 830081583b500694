local TAG = string.sub(KEYS[1], 1, -8)
local GEN, OLDEST, FORGET_AT = tonumber(ARGV[#ARGV - 2]), tonumber(ARGV[#ARGV - 1]), tonumber(ARGV[#ARGV])
local decimals = {}
local function decimal(x)
  local text = decimals[x]
  if not text then
    text = string.format('%d', x)
    decimals[x] = text
  end
  return text
end
