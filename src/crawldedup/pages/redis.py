"""The Redis strategies' pages: one hash tag per namespace, one script call per batch.

Key layout (a documented format, docs/content.md "Stored pages"), all under the hash tag
``{<namespace>:pages}`` so that one script reaches every key (one Redis Cluster slot)::

    {<namespace>:pages}:meta          hash: layout, canonical_policy, content_policy,
                                      max_distance, shards
    {<namespace>:pages}:p:<shard>     hash: page id -> SimHash (8 bytes, big-endian) + canonical URL
    {<namespace>:pages}:b:<t>:<v>     set of the page ids whose block t has the value v
    {<namespace>:pages}:receipt:<token>  a call's answers (MessagePack), until the caller's
                                      next call or for RECEIPT_SECONDS

``shard = (|id| mod 10**9) mod shards`` (the script reads the id's last nine digits), and
``shards`` is fixed when the namespace is made, for :data:`PAGES_PER_SHARD` pages a shard at
capacity. Block t of a SimHash is the bits ``[offset, offset + width)`` from the top, for the
k + 1 blocks of :func:`crawldedup.content.index.blocks`; ids are signed 64-bit integers, so a
block set of up to 512 pages is an intset (8 bytes a member).

Why the lookup runs in Redis and not in a local index: every worker must see the pages of
every other worker within one atomic step, or two workers that fetch copies of one page at
once both call theirs new. The script takes the batch's pages in order; for each it reads the
page's previous fingerprint, the pages sharing one of its blocks (keeping those within k
bits), then writes the new fingerprint and moves the page between block sets. The request and
the reading of the reply are plain functions (:meth:`RedisPages.request`,
:meth:`RedisPages.read`); :meth:`RedisPages.exchange` puts them in a call that the claim
store's channel sends (blocking or asyncio), under its retries.

Lost replies: every call carries a token, and the script keeps its answers under the token's
receipt. An attempt repeated after its reply was lost gets the receipt, not the batch's own
writes; and a call that raised ``StoreUnavailable`` (or was cancelled) leaves its token with
the claim store, so the same batch exchanged again resumes it (as claims do).
"""

from __future__ import annotations

import math
import random
import struct
from typing import Any, List, Optional, Tuple

import numpy as np

from .._plans import Plan
from ..canonical.policy import policy_conflict
from ..content.index import blocks
from ..fingerprints import Fingerprints
from ..stores.base import ClaimStore, NamespaceConflict, StoreCall, request_key
from .base import PageStore
from .plan import PageBatch, Seen, block_values

__all__ = ["PAGES_PER_SHARD", "PAGE_LAYOUT_VERSION", "RedisPages"]

#: Version of this key layout (recorded in the namespace's page record).
PAGE_LAYOUT_VERSION = 1
#: Pages per page-hash shard at capacity: under Redis's 128-entry listpack limit for hashes
#: (their values stay listpack-encoded while at most 64 bytes: 8 + the URL).
PAGES_PER_SHARD = 100
#: Life of a call's receipt: the answers a retry of that call gets when the reply to an
#: attempt was lost after the script ran (a retry would otherwise read the batch's own writes:
#: a changed page would come back unchanged). It outlives every attempt of one call with the
#: default retry policy (61 s, docs/stores.md "Faults"); the caller's next call deletes it.
RECEIPT_SECONDS = 300
#: Page-hash shards and block sets sampled by :meth:`RedisPages.bytes_per_page`.
SAMPLE_KEYS = 64
_SIMHASH = struct.Struct(">Q")

# KEYS[1]: the page record, KEYS[2]: this call's receipt, KEYS[3]: the receipt of the caller's
# last answered call (deleted; KEYS[2] again when none). ARGV[1]: the hash tag; ARGV[2..11]: the
# record's five fields and values (layout, canonical_policy, content_policy, max_distance must
# match; shards is adopted); then the offset and width of each of the k + 1 blocks; then per page its id and its value.
# Returns {'ok', {previous or '', near value...} per page} or {'conflict', field, stored}.
_EXCHANGE = """
local META, RECEIPT, ANSWERED, PREFIX = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
if ANSWERED ~= RECEIPT then redis.call('DEL', ANSWERED) end
local kept = redis.call('GET', RECEIPT)
if kept then return {'ok', cmsgpack.unpack(kept)} end
if redis.call('EXISTS', META) == 0 then redis.call('HSET', META, unpack(ARGV, 2, 11)) end
for i = 2, 8, 2 do
  local stored = redis.call('HGET', META, ARGV[i])
  if stored ~= ARGV[i + 1] then return {'conflict', ARGV[i], stored or ''} end
end
local K = tonumber(ARGV[9])
local SHARDS = tonumber(redis.call('HGET', META, 'shards'))
local OFFSETS, WIDTHS = {}, {}
for t = 0, K do
  OFFSETS[t], WIDTHS[t] = tonumber(ARGV[12 + 2 * t]), tonumber(ARGV[13 + 2 * t])
end
local FIRST = 12 + 2 * (K + 1)

local function page_key(id)
  return PREFIX .. ':p:' .. string.format('%d', math.abs(tonumber(string.sub(id, -9))) % SHARDS)
end
-- The width bits (at most 32) from bit offset, counted from the top, of the 64 bits hi:lo.
local function block(hi, lo, offset, width)
  local v
  if offset >= 32 then
    v = bit.rshift(lo, 64 - offset - width)
  elseif offset + width <= 32 then
    v = bit.rshift(hi, 32 - offset - width)
  else
    local from_lo = offset + width - 32
    v = bit.bor(bit.lshift(hi, from_lo), bit.rshift(lo, 32 - from_lo))
  end
  if width < 32 then v = bit.band(v, bit.lshift(1, width) - 1) end
  if v < 0 then v = v + 4294967296 end
  return v
end
local function block_keys(value)
  local hi, lo = struct.unpack('>I4I4', value)
  local keys = {}
  for t = 0, K do
    keys[t] = PREFIX .. ':b:' .. t .. ':' .. string.format('%.0f', block(hi, lo, OFFSETS[t], WIDTHS[t]))
  end
  return keys
end
local function ones(x)
  local c = 0
  while x ~= 0 do x = bit.band(x, x - 1); c = c + 1 end
  return c
end
local function distance(a, b)
  local ah, al = struct.unpack('>I4I4', a)
  local bh, bl = struct.unpack('>I4I4', b)
  return ones(bit.bxor(ah, bh)) + ones(bit.bxor(al, bl))
end

local out = {}
for p = FIRST, #ARGV, 2 do
  local id, value = ARGV[p], ARGV[p + 1]
  local key = page_key(id)
  local previous = redis.call('HGET', key, id)
  local keys = block_keys(value)
  local answer, asked = {previous or ''}, {}
  for t = 0, K do
    for _, other in ipairs(redis.call('SMEMBERS', keys[t])) do
      if other ~= id and not asked[other] then
        asked[other] = true
        local theirs = redis.call('HGET', page_key(other), other)
        if theirs and distance(theirs, value) <= K then answer[#answer + 1] = theirs end
      end
    end
  end
  out[#out + 1] = answer
  if not previous or string.sub(previous, 1, 8) ~= string.sub(value, 1, 8) then
    if previous then
      local old = block_keys(previous)
      for t = 0, K do
        if old[t] ~= keys[t] then redis.call('SREM', old[t], id) end
      end
    end
    for t = 0, K do redis.call('SADD', keys[t], id) end
    redis.call('HSET', key, id, value)
  end
end
if #out > 0 then redis.call('SET', RECEIPT, cmsgpack.pack(out), 'EX', RECEIPT_SECONDS) end
return {'ok', out}
""".replace("RECEIPT_SECONDS", str(RECEIPT_SECONDS))


def shards_for(capacity: int) -> int:
    """Page-hash shards for ``capacity`` pages."""
    return max(1, math.ceil(capacity / PAGES_PER_SHARD))


class RedisPages(PageStore):
    """Pages of ``namespace`` in the Redis of ``store`` (any Redis strategy; its calls go over
    the store's channel: :meth:`ClaimStore.perform` or :meth:`AsyncClaimStore.perform`).

    Nothing is sent when made: the first exchange creates the namespace's page record, or
    checks ours against it.

    :param capacity: pages a new namespace is sized for (an existing one keeps its shards).
    """

    strategy = "redis"

    def __init__(
        self, store: ClaimStore, *, namespace: str, max_distance: int, content_digest: str, capacity: int
    ) -> None:
        super().__init__(max_distance, content_digest)
        self._store = store
        self.namespace = namespace
        self._tag = f"{{{namespace}:pages}}"
        self.meta_key = f"{self._tag}:meta"
        #: The receipt of the last call answered, deleted by the next call.
        self._answered: Optional[str] = None
        self._head: List[Any] = [
            self._tag,
            "layout",
            str(PAGE_LAYOUT_VERSION),
            "canonical_policy",
            store.policy_digest,
            "content_policy",
            content_digest,
            "max_distance",
            str(max_distance),
            "shards",
            str(shards_for(capacity)),
            *[str(n) for offset_width in blocks(max_distance) for n in offset_width],
        ]

    @property
    def description(self) -> str:
        return f"pages of namespace {self.namespace!r} in the {self._store.description}"

    def request(self, batch: PageBatch, token: bytes) -> Tuple[Any, ...]:
        """The one command that exchanges ``batch``; every attempt of one call has the same ``token``."""
        pages: List[Any] = []
        for page, simhash, url in zip(batch.ids, batch.simhashes, batch.urls):
            pages += [str(page), _SIMHASH.pack(simhash) + url.encode("utf-8")]
        receipt = self.receipt_key(token)
        return ("EVAL", _EXCHANGE, 3, self.meta_key, receipt, self._answered or receipt, *self._head, *pages)

    def receipt_key(self, token: bytes) -> str:
        """Where the answers of the call with ``token`` are kept."""
        return f"{self._tag}:receipt:{token.hex()}"

    def answered(self, token: bytes) -> None:
        """Note that the call with ``token`` got its reply: the next call deletes its receipt."""
        self._answered = self.receipt_key(token)

    def read(self, reply: List[Any]) -> List[Seen]:
        """The pages' answers in the reply to :meth:`request`.

        :raises NamespaceConflict: when the namespace's pages were made with another k or policy.
        """
        if reply[0] == b"conflict":
            field, stored = reply[1].decode(), reply[2].decode("ascii", "replace")
            ours = self._head[self._head.index(field) + 1]
            if field == "canonical_policy":
                raise NamespaceConflict(
                    f"the pages of namespace {self.namespace!r} were made with {policy_conflict(stored, ours)}"
                )
            raise NamespaceConflict(
                f"the pages of namespace {self.namespace!r} hold {field}={stored!r}, "
                f"this crawl uses {field}={ours!r}: pick another namespace (or round)"
            )
        seen = []
        for answer in reply[1]:
            previous = _SIMHASH.unpack_from(answer[0])[0] if answer[0] else None
            near = [(_SIMHASH.unpack_from(v)[0], v[8:].decode("utf-8")) for v in answer[1:]]
            seen.append(Seen(previous, near))
        return seen

    def exchange(self, batch: PageBatch) -> StoreCall[List[Seen]]:
        """One script call; the same batch (ids and SimHashes) exchanged again after
        ``StoreUnavailable`` or a cancellation resumes it (its request key)."""

        def plan(token: bytes) -> Plan[List[Seen]]:
            replies = yield [self.request(batch, token)]
            seen = self.read(replies[0])
            self.answered(token)
            return seen

        rows = np.empty((len(batch.ids), 2), dtype=np.uint64)
        rows[:, 0] = np.asarray(batch.ids, dtype=np.int64).view(np.uint64)
        rows[:, 1] = np.asarray(batch.simhashes, dtype=np.uint64)
        return StoreCall(plan, request_key("pages", self.namespace, self.content_digest, Fingerprints(rows)), len(rows))

    def bytes_per_page(self) -> StoreCall[Optional[float]]:
        """Redis memory per stored page, from samples (three round trips: for a report, not per batch).

        A page's share of its page-hash shard (``MEMORY USAGE`` / ``HLEN`` of random shards), plus
        its share of each of its k + 1 block sets (``MEMORY USAGE`` / ``SCARD``, for pages of
        those shards).
        """

        def plan(_token: bytes) -> Plan[Optional[float]]:
            shards = int((yield [("HGET", self.meta_key, "shards")])[0] or 1)
            page_keys = [f"{self._tag}:p:{random.randrange(shards)}" for _ in range(SAMPLE_KEYS)]
            commands: List[Tuple[Any, ...]] = []
            for key in page_keys:
                commands += [("MEMORY", "USAGE", key, "SAMPLES", "0"), ("HLEN", key)]
            commands += [("HVALS", key) for key in page_keys[:8]]
            replies = yield commands
            head = replies[: 2 * SAMPLE_KEYS]
            values = [v for shard in replies[2 * SAMPLE_KEYS :] for v in shard][:SAMPLE_KEYS]
            page_bytes: int = sum(r or 0 for r in head[0::2])
            entries: int = sum(head[1::2])
            if not entries:
                return None
            block_keys = [
                f"{self._tag}:b:{t}:{v}"
                for value in values
                for t, v in enumerate(block_values(_SIMHASH.unpack_from(value)[0], self.max_distance))
            ]
            sets: List[Any] = []
            if block_keys:
                sets = yield [
                    command
                    for key in block_keys
                    for command in (("MEMORY", "USAGE", key, "SAMPLES", "0"), ("SCARD", key))
                ]
            shares = [used / members for used, members in zip(sets[0::2], sets[1::2]) if members]
            per_page_sets = sum(shares) / len(values) if values else 0.0
            return page_bytes / entries + per_page_sets

        return StoreCall(plan)

    def close(self) -> None:
        """Nothing to release: the connection is the claim store's."""
