local n = #RECORDS / WIDTH
local RECEIPT = read_receipt(RECEIPT_KEY, RECEIPT_SECONDS)
record = function(i) return locate(string.sub(RECORDS, (i - 1) * WIDTH + 1, i * WIDTH)) end
local function url(i)
  local first = 0
  if i > 1 then first = struct.unpack('<I4', URL_ENDS, 4 * i - 7) end
  return string.sub(URLS, first + 1, (struct.unpack('<I4', URL_ENDS, 4 * i - 3)))
end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
