local ttl, owner, lease, runs = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8]), ARGV[9]
local now = nil
-- A claim claim_all did not win, checked against the lease records (leases: whether any may
-- hold it): 2 when another worker's lease on it is open, 1 when its lease expired or was handed
-- back (won again: made lasting here when this claim takes no lease), 0 otherwise.
local function unwon(i, leases)
  if not leases then return 0 end
  local k, m = record(i)
  local id = claim_id(k, m)
  if redis.call('HEXISTS', HOLDERS, id) == 0 then return 0 end
  now = now or now_ms()
  local due = redis.call('ZSCORE', LEASES, id)
  if due and tonumber(due) > now then return 2 end
  if lease == 0 then
    redis.call('ZREM', LEASES, id)
    redis.call('HDEL', HOLDERS, id)
    visit(k, m, ttl)
  end
  return 1
end
local text = RECEIPT and string.sub(RECEIPT, 1, CLAIMS)
if not text then
  local lost = claim_all(CLAIMS, lease > 0 and 0 or ttl, runs)
  if lease > 0 then  -- each claim won is leased, in order (a repeat of it in the call is then held)
    local is_lost, codes = {}, {}
    for _, i in ipairs(lost) do is_lost[i] = true end
    for i = 1, CLAIMS do
      local w = is_lost[i] and unwon(i, true) or 1
      if w == 1 then
        local k, m = record(i)
        local id = claim_id(k, m)
        now = now or now_ms()
        redis.call('ZADD', LEASES, now + lease, id)
        redis.call('HSET', HOLDERS, id, owner .. ' ' .. url(i))
      end
      codes[i] = w
    end
    text = as_text(codes, CLAIMS)
  else  -- '1' for every claim but those lost: the text is made of runs, not one code per claim
    local leases = #lost > 0 and redis.call('EXISTS', HOLDERS) == 1
    local parts, last = {}, 0
    for _, i in ipairs(lost) do
      parts[#parts + 1] = string.rep('1', i - last - 1)
      parts[#parts + 1] = string.char(48 + unwon(i, leases))
      last = i
    end
    parts[#parts + 1] = string.rep('1', CLAIMS - last)
    text = table.concat(parts)
  end
  keep_receipt(RECEIPT_KEY, RECEIPT_SECONDS, text)
end
if n == CLAIMS then return text end
local reads = {}
for i = CLAIMS + 1, n do reads[i - CLAIMS] = claimed(record(i)) end
return text .. as_text(reads, n - CLAIMS)
