local ITEMS = ARGV[#ARGV]
local COUNT = #ITEMS / 16
local function item(i) return string.sub(ITEMS, 16 * i - 15, 16 * i) end
local function items(first, last)
  local t = {}
  for i = first, last do t[i - first + 1] = item(i) end
  return t
end
