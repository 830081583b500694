"""The compact exact store: 32-bit integer members in many small Redis sets (about 5 bytes per URL).

Key layout (part of the documented format, see docs/stores.md)::

    <namespace>:meta                       hash: layout, store=sharded-set, fingerprint, policy,
                                           groups, shards
    {<namespace>:<group>}:<shard>          set of signed 32-bit integers
    {<namespace>:<group>}:leases           sorted set: "<shard>:<member>" -> lease deadline (ms)
    {<namespace>:<group>}:lease-urls       hash: "<shard>:<member>" -> "<owner> <canonical URL>"
    {<namespace>:<group>}:receipt:<token>  a call's answers, for a few minutes (optional)

For a fingerprint whose first 64 bits (little-endian) are ``a``: ``shard = (a * shards) >> 64``,
``group = (a * groups) >> 64`` (= ``shard // (shards // groups)``), and the member is bytes
8-11 read as a little-endian signed 32-bit integer.

Why it is small: Redis keeps a set of integers as an *intset* (a sorted array, 4 bytes per
member while every member fits in 32 bits) as long as it holds at most
``set-max-intset-entries`` members (512 by default). Shards are sized so that at capacity
they average :data:`MEMBERS_PER_SHARD` members; the fullest of 2.5 million shards (a billion
URLs) then stays under 512 (expected number of shards over: 0.09, Poisson tail).

Past capacity, shards grow beyond 512 members and Redis converts each one to a hash table
(tens of bytes per member): answers stay right, memory per URL climbs gradually. Size
``capacity`` for the whole crawl; the namespace records the shard count, so it cannot change.

The price of 32-bit members: a new URL is taken for a seen one when its member is already in
its shard, with probability ``load / 2**32`` (load = members in that shard): 9.3e-8 at
capacity (one in 10.7 million), whatever the capacity, since the load per shard is fixed.
"""

from __future__ import annotations

import math
import random
from typing import Any, List, Optional, Tuple

import numpy as np

from .._checks import check_capacity
from .._plans import Plan
from ..fingerprints import Fingerprints, multiply_shift
from ._redis import DEFAULT_GROUPS, DICT_ENTRY_BYTES, ONE_BY_ONE, GroupedScriptStore, allocated_bytes
from .base import StoreCall

#: Average members per shard at capacity. 400 keeps the fullest shard of a billion URLs
#: under Redis's 512-entry intset limit (P(Poisson(400) > 512) = 3.4e-8 per shard).
MEMBERS_PER_SHARD = 400
_LOW32 = np.uint64(0xFFFFFFFF)
#: What a script gets per fingerprint (12 bytes, packed): its shard and its member.
_RECORD = np.dtype([("shard", "<u8"), ("member", "<i4")])
#: Shards sampled by :meth:`RedisShardedSetStore.bytes_per_url`.
SAMPLE_SHARDS = 64
#: An intset's header (encoding and length, 4 bytes each) before its members.
INTSET_HEADER_BYTES = 8

# A record is the shard (little-endian uint64) and the member (little-endian int32). The claim id
# of the lease records is "<shard>:<member>": what identifies a claim in this store.
# With a window (GEN >= 0) a shard is one set per generation, "<shard key>:<generation>", expiring
# (EXPIREAT) when its generation is forgotten; a claim checks the live generations' sets and
# adds to the current one. A leased claim waits in "<shard key>:L" (no expiry) until done moves
# it to the current generation: its lease, not its age, decides until then. SETS are the
# suffixes of the sets a claim is looked up in (the shard key itself without a window).
# With a window, claim_all answers the claims of one shard together when it has several in the
# call: one SMISMEMBER per set looked up and one SADD, not G + 2 commands per claim. Without
# one, a claim is one SADD, which batching would not make cheaper.
_PRIMITIVES = (
    """
local WIDTH = 12
local shard_keys = {}  -- a call has several claims per shard: its key is made once
local function locate(r)
  local shard, m = struct.unpack('<I8i4', r)
  local k = shard_keys[shard]
  if not k then
    k = TAG .. ':' .. string.format('%d', shard)
    shard_keys[shard] = k
  end
  return k, string.format('%d', m)
end
local SETS = {''}
if GEN >= 0 then
  SETS = {':L'}
  for g = GEN, OLDEST, -1 do SETS[#SETS + 1] = ':' .. decimal(g) end
end
local function in_window(k, m)
  for _, suffix in ipairs(SETS) do
    if redis.call('SISMEMBER', k .. suffix, m) == 1 then return 1 end
  end
  return 0
end
local expiring = {}
local function remember(k, ...)
  local current = k .. ':' .. decimal(GEN)
  redis.call('SADD', current, ...)
  if not expiring[current] then  -- once per set and call: a repeated EXPIREAT NX changes nothing
    redis.call('EXPIREAT', current, decimal(FORGET_AT), 'NX')
    expiring[current] = true
  end
end
-- Members new to shard k go where a claim puts them: the shard (no window), the current
-- generation's set (lasting claims) or the leased set.
local function put(k, ttl, ...)
  if GEN < 0 then redis.call('SADD', k, ...)
  elseif ttl > 0 then remember(k, ...)
  else redis.call('SADD', k .. ':L', ...) end
end
local function claim_key(k, m, ttl)
  if GEN < 0 then return redis.call('SADD', k, m) end
  if in_window(k, m) == 1 then return 0 end
  put(k, ttl, m)
  return 1
end
"""
    + ONE_BY_ONE
    + """
local function claim_shard(k, ms, rows, won, ttl)
  local members, first_row, present = {}, {}, {}
  for _, i in ipairs(rows) do
    local m = ms[i]
    if not first_row[m] then first_row[m] = i; members[#members + 1] = m end
  end
  for _, suffix in ipairs(SETS) do
    for first = 1, #members, 1000 do
      local found = redis.call('SMISMEMBER', k .. suffix, unpack(members, first, math.min(first + 999, #members)))
      for j, v in ipairs(found) do if v == 1 then present[members[first + j - 1]] = true end end
    end
  end
  local fresh = {}
  for _, i in ipairs(rows) do
    local m = ms[i]
    if first_row[m] == i and not present[m] then won[i] = 1; fresh[#fresh + 1] = m else won[i] = 0 end
  end
  for first = 1, #fresh, 1000 do put(k, ttl, unpack(fresh, first, math.min(first + 999, #fresh))) end
end
local function claim_all(ks, ms, count, ttl)
  if GEN < 0 then return claim_one_by_one(ks, ms, count, ttl) end
  local won, rows_of, shards = {}, {}, {}
  for i = 1, count do
    local rows = rows_of[ks[i]]
    if not rows then rows = {}; rows_of[ks[i]] = rows; shards[#shards + 1] = ks[i] end
    rows[#rows + 1] = i
  end
  for _, k in ipairs(shards) do
    local rows = rows_of[k]
    if #rows == 1 then won[rows[1]] = claim_key(k, ms[rows[1]], ttl) else claim_shard(k, ms, rows, won, ttl) end
  end
  return won
end
local function claimed(k, m)
  if GEN < 0 then return redis.call('SISMEMBER', k, m) end
  return in_window(k, m)
end
local function visit(k, m, ttl)
  if GEN >= 0 then
    redis.call('SREM', k .. ':L', m)
    remember(k, m)
  end
end
local function unclaim(k, m)
  if GEN < 0 then redis.call('SREM', k, m) return end
  for _, suffix in ipairs(SETS) do redis.call('SREM', k .. suffix, m) end
end
local function claim_id(k, m) return string.match(k, '(%d+)$') .. ':' .. m end
"""
)


def shards_for(capacity: int, groups: int) -> int:
    """Shard count for ``capacity`` URLs: a multiple of ``groups`` near ``capacity / 400``."""
    return groups * max(1, math.ceil(capacity / (MEMBERS_PER_SHARD * groups)))


class RedisShardedSetStore(GroupedScriptStore):
    """Exact claims (up to 32-bit member collisions) in hash-tagged intset shards, no per-URL TTL.

    :param url: Redis URL (see :class:`~crawldedup.stores._redis.RedisStore`).
    :param namespace: key prefix of this crawl (and round).
    :param policy_digest: digest of the canonical policy behind the fingerprints.
    :param capacity: URLs the namespace is sized for (a new namespace only).
    :param groups: hash-tag groups for a new namespace (an existing one keeps its own).
    :param client: an existing redis-py client instead of ``url``.
    :param retry: retries for transient Redis errors.
    :raises ValueError: for a bad namespace, digest, capacity or group count.
    :raises NamespaceConflict: when the namespace was made by another store or policy.
    :raises StoreUnavailable: when Redis cannot be reached.
    """

    strategy = "sharded-set"
    kind = "sharded-set"
    commands = (*GroupedScriptStore.commands, "SADD", "SISMEMBER", "SMISMEMBER", "SREM", "EXPIREAT")
    _primitives = _PRIMITIVES

    def __init__(self, url: Optional[str] = None, *, capacity: int, **kwargs: Any) -> None:
        check_capacity(capacity)
        layout = {"shards": str(shards_for(capacity, kwargs.get("groups", DEFAULT_GROUPS))), "capacity": str(capacity)}
        super().__init__(url, layout=layout, **kwargs)

    def _adopt_namespace(self) -> Plan[None]:
        yield from super()._adopt_namespace()
        #: Adopted from the namespace record, like the groups.
        self.shards = int(self.meta["shards"])
        self.capacity = int(self.meta["capacity"])
        self._shards_per_group = self.shards // self.groups

    def _shard_key(self, shard: int) -> bytes:
        """``{<namespace>:<group>}:<shard>``; ``shard // (shards // groups)`` is ``(a * groups) >> 64``."""
        return b"%s:%d" % (self._tags[shard // self._shards_per_group], shard)

    def _records(self, fingerprints: Fingerprints) -> Tuple[np.ndarray, np.ndarray]:
        shards = multiply_shift(fingerprints.first_halves, self.shards)
        records = np.empty(len(fingerprints), dtype=_RECORD)
        records["shard"] = shards
        # The member: bytes 8-11 of each fingerprint (the low half of h2), a signed little-endian int32.
        records["member"] = (fingerprints.hashes[:, 1] & _LOW32).astype(np.uint32).view(np.int32)
        return shards // np.uint64(self._shards_per_group), records

    def _measure(self) -> StoreCall[Optional[float]]:
        """Redis memory per member over a random sample of shards (of the current generation with a
        window): ``MEMORY USAGE`` / ``SCARD``, with each intset and dict entry counted at the size
        jemalloc allocates for it (``MEMORY USAGE`` counts an intset at its length; 1,608 bytes take
        1,792); None while the sampled shards are all empty."""
        keys = [self._shard_key(random.randrange(self.shards)) for _ in range(SAMPLE_SHARDS)]
        if self.window is not None:  # the current generation's sets
            generation = self.window.generation(self.clock())
            keys = [key + b":%d" % generation for key in keys]
        return StoreCall(lambda _token: self._sample(keys))

    def _sample(self, keys: List[bytes]) -> Plan[Optional[float]]:
        replies = yield [
            command
            for key in keys
            for command in (("MEMORY", "USAGE", key, "SAMPLES", "0"), ("SCARD", key), ("OBJECT", "ENCODING", key))
        ]
        used = members = 0
        for usage, count, encoding in zip(replies[0::3], replies[1::3], replies[2::3]):
            if not count:
                continue
            used += usage + allocated_bytes(DICT_ENTRY_BYTES) - DICT_ENTRY_BYTES
            if encoding in (b"intset", "intset"):  # a header of 8 bytes, then 32-bit members
                blob = INTSET_HEADER_BYTES + 4 * count
                used += allocated_bytes(blob) - blob
            members += count
        return used / members if members else None
