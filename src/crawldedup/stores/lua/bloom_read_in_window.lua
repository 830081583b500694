if redis.call('EXISTS', KEYS[1]) == 1 then older[#older + 1] = KEYS[1] end
return as_text(seen_in(older), COUNT)
