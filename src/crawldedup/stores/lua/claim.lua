local ttl, owner, lease = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
local now = nil
local answers = {}
local ks, ms, won = {}, {}, {}
if not RECEIPT then
  for i = 1, CLAIMS do ks[i], ms[i] = record(i) end
  won = claim_all(ks, ms, CLAIMS, lease > 0 and 0 or ttl)
end
for i = 1, n do
  if i > CLAIMS then
    answers[i] = claimed(record(i))
  elseif RECEIPT then
    answers[i] = string.byte(RECEIPT, i) - 48
  else
    local k, m, w = ks[i], ms[i], won[i]
    local id = nil
    if w == 0 then
      id = claim_id(k, m)
      if redis.call('HEXISTS', HOLDERS, id) == 1 then
        now = now or now_ms()
        local due = redis.call('ZSCORE', LEASES, id)
        if due and tonumber(due) > now then
          w = 2
        else
          w = 1
          if lease == 0 then
            redis.call('ZREM', LEASES, id)
            redis.call('HDEL', HOLDERS, id)
            visit(k, m, ttl)
          end
        end
      end
    end
    if w == 1 and lease > 0 then
      id = id or claim_id(k, m)
      now = now or now_ms()
      redis.call('ZADD', LEASES, now + lease, id)
      redis.call('HSET', HOLDERS, id, owner .. ' ' .. url(i))
    end
    answers[i] = w
  end
end
local text = as_text(answers, n)
if not RECEIPT then keep_receipt(RECEIPT_KEY, RECEIPT_SECONDS, string.sub(text, 1, CLAIMS)) end
return text
