local function read_receipt(key, seconds)
  if seconds == 0 then return nil end
  local stored = redis.call('GET', key)
  if not stored then return nil end
  return stored
end
local function as_text(answers, count)
  local codes, chunk = {}, {}
  for first = 1, count, 4000 do
    local last = math.min(first + 3999, count)
    for i = first, last do chunk[i - first + 1] = 48 + answers[i] end
    codes[#codes + 1] = string.char(unpack(chunk, 1, last - first + 1))
  end
  return table.concat(codes)
end
local function keep_receipt(key, seconds, text)
  if seconds == 0 or not string.find(text, '1', 1, true) then return end
  redis.call('SET', key, text, 'EX', seconds)
end
