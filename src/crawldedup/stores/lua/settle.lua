local action, ttl, owner, lease = ARGV[6], tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[9])
if RECEIPT then return RECEIPT end
local prefix = owner .. ' '
local now = 0
if action == 'renew' then now = now_ms() end
local answers = {}
for i = 1, n do
  local k, m = record(i)
  local id = claim_id(k, m)
  local held = redis.call('HGET', HOLDERS, id)
  if held and string.sub(held, 1, #prefix) == prefix then
    if action == 'renew' then
      redis.call('ZADD', LEASES, now + lease, id)
    else
      redis.call('ZREM', LEASES, id)
      redis.call('HDEL', HOLDERS, id)
      if action == 'done' then visit(k, m, ttl) else unclaim(k, m) end
    end
    answers[i] = 1
  else
    answers[i] = 0
  end
end
local text = as_text(answers, n)
keep_receipt(RECEIPT_KEY, RECEIPT_SECONDS, text)
return text
