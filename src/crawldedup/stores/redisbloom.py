"""The smallest store: one RedisBloom filter per namespace (probabilistic, no TTL).

Key layout (part of the documented format, see docs/stores.md)::

    <namespace>:meta    hash: layout, store=bloom, fingerprint, policy, capacity, error_rate
    <namespace>:bf      RedisBloom filter, BF.RESERVE <error_rate> <capacity>, items = 16 raw fingerprint bytes
    {<namespace>:bf}:receipt:<token>   for a few minutes: the answers of a call that won something

A batch is one script running ``BF.MADD`` (claims, and the receipt in the same atomic step) and
one ``BF.MEXISTS`` (reads) in one pipeline. The receipt's hash tag is the filter's whole key
name, so both share a Redis Cluster slot.
A new URL that the filter takes for a seen one (its false-positive rate) is won by nobody:
at most one winner per URL, sometimes none. Past capacity, RedisBloom adds sub-filters
(expansion 2), so memory grows and the false-positive rate creeps up.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

import redis

from .._checks import check_capacity, check_error_rate
from ..fingerprints import Fingerprints
from .._plans import Plan
from .base import ClaimAnswers, Lease, StoreCall
from ._redis import RECEIPTS_LUA, RedisStore, allocated_bytes, server_text

# KEYS: the filter, the call's receipt. ARGV: receipt seconds, the claimed items. Per item: 1 won
# (added), 0 already there. BF.MADD takes 1,000 items at a time: Lua's unpack stops near 8,000.
_CLAIM = RECEIPTS_LUA + """
local seconds = tonumber(ARGV[1])
local answers = read_receipt(KEYS[2], seconds)
if answers then return answers end
answers = {}
for first = 2, #ARGV, 1000 do
  local added = redis.call('BF.MADD', KEYS[1], unpack(ARGV, first, math.min(first + 999, #ARGV)))
  for _, a in ipairs(added) do answers[#answers + 1] = a end
end
keep_receipt(KEYS[2], seconds, answers, #answers)
return answers
"""

# With a window: one filter per generation, "{<namespace>:bf}:<generation>" (the hash tag keeps
# them and the receipts in one Cluster slot), reserved on first use and expiring (EXPIREAT) when
# its generation is forgotten. ARGV after the receipt seconds: the generations' key prefix, the
# current generation, the oldest live one, when the current one is forgotten, error rate,
# capacity, then the items. LIVE_OLDER: the older live filters that exist.
_LIVE_OLDER = """
local PREFIX, GEN, OLDEST = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local older = {}
for g = GEN - 1, OLDEST, -1 do
  if redis.call('EXISTS', PREFIX .. g) == 1 then older[#older + 1] = PREFIX .. g end
end
local FIRST = 8
-- Per item from FIRST on: 1 when one of the filters holds it.
local function seen_in(filters)
  local seen = {}
  for first = FIRST, #ARGV, 1000 do
    local last = math.min(first + 999, #ARGV)
    for i = first, last do seen[i - FIRST + 1] = 0 end
    for _, f in ipairs(filters) do
      local found = redis.call('BF.MEXISTS', f, unpack(ARGV, first, last))
      for j, v in ipairs(found) do if v == 1 then seen[first - FIRST + j] = 1 end end
    end
  end
  return seen
end
"""

# KEYS: the current generation's filter, the call's receipt. Per item: 1 won, 0 already seen in
# a live generation (then not added again: its window runs from its first claim).
_CLAIM_IN_WINDOW = RECEIPTS_LUA + _LIVE_OLDER + """
local seconds = tonumber(ARGV[1])
local answers = read_receipt(KEYS[2], seconds)
if answers then return answers end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('BF.RESERVE', KEYS[1], ARGV[6], ARGV[7])
  redis.call('EXPIREAT', KEYS[1], ARGV[5])
end
local seen = seen_in(older)
local fresh, rows = {}, {}
for i, s in ipairs(seen) do
  if s == 0 then fresh[#fresh + 1] = ARGV[FIRST + i - 1]; rows[#rows + 1] = i end
end
answers = {}
for i = 1, #seen do answers[i] = 0 end
for first = 1, #fresh, 1000 do
  local added = redis.call('BF.MADD', KEYS[1], unpack(fresh, first, math.min(first + 999, #fresh)))
  for j, a in ipairs(added) do answers[rows[first + j - 1]] = a end
end
keep_receipt(KEYS[2], seconds, answers, #answers)
return answers
"""

# KEYS: the current generation's filter. Per item: 1 when a live generation holds it.
_READ_IN_WINDOW = _LIVE_OLDER + """
if redis.call('EXISTS', KEYS[1]) == 1 then older[#older + 1] = KEYS[1] end
return seen_in(older)
"""


def bf_info(reply: Any) -> Dict[str, Any]:
    """A ``BF.INFO`` reply as a dict from field name (``str``) to value, whatever its wire form.

    Over RESP3 (redis-py 8's default protocol) the reply is a map, which redis-py returns as a
    dict; over RESP2 (the default before redis-py 8, as in 7.0.1, the newest for Python 3.9) it
    is a flat list of names and values. ``execute_command`` applies no RedisBloom callback.
    """
    pairs = reply.items() if isinstance(reply, dict) else zip(reply[0::2], reply[1::2])
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in pairs}


class RedisBloomStore(RedisStore):
    """Claims in a RedisBloom filter reserved once with the namespace's capacity and error rate.

    :param url: Redis URL of a server with the RedisBloom module.
    :param namespace: key prefix of this crawl (and round).
    :param policy_digest: digest of the canonical policy behind the fingerprints.
    :param capacity: items the filter is reserved for (a new namespace only).
    :param error_rate: false-positive rate it is reserved for, in (0, 1) (a new namespace only).
    :param client: an existing redis-py client instead of ``url``.
    :param retry: retries for transient Redis errors.
    :raises ValueError: for a bad namespace, digest, capacity or error rate.
    :raises NamespaceConflict: when the namespace was made by another store or policy.
    :raises StoreUnavailable: when Redis cannot be reached or lacks RedisBloom.
    """

    strategy = "redisbloom"
    kind = "bloom"
    commands = (*RedisStore.commands, "BF.RESERVE", "BF.MADD", "BF.MEXISTS", "EXPIREAT")

    def __init__(self, url: Optional[str] = None, *, capacity: int, error_rate: float, **kwargs: Any) -> None:
        check_capacity(capacity)
        check_error_rate(error_rate)
        super().__init__(url, layout={"capacity": str(capacity), "error_rate": repr(error_rate)}, **kwargs)

    def _adopt_namespace(self) -> Plan[None]:
        yield from super()._adopt_namespace()
        self.capacity = int(self.meta["capacity"])
        self.error_rate = float(self.meta["error_rate"])
        self.key = f"{self.namespace}:bf".encode("ascii")
        self._receipt_prefix = b"{%s}:receipt:" % self.key
        self._generation_prefix = b"{%s}:" % self.key
        if self.window is None:  # with a window, each generation's filter is reserved on first use
            yield from self._reserve()

    def _reserve(self) -> Plan[None]:
        try:
            yield [("BF.RESERVE", self.key, self.error_rate, self.capacity)]
        except redis.ResponseError as exc:
            if "exists" not in server_text(exc).lower():  # "ERR item exists": another worker reserved it
                raise

    def _exchange(
        self, claims: Fingerprints, reads: Fingerprints, lease: Optional[Lease], token: bytes
    ) -> Plan[ClaimAnswers]:
        if self.window is not None:
            return (yield from self._exchange_in_window(claims, reads, token))
        commands: List[Tuple[Any, ...]] = []
        if claims:
            commands.append(("EVAL", _CLAIM, 2, self.key, self._receipt_prefix + token, self.receipt_seconds,
                             *claims.as_bytes()))
        if reads:
            commands.append(("BF.MEXISTS", self.key, *reads.as_bytes()))
        replies = yield from self._write(commands, writes=bool(claims))
        # 1/0, or True/False where redis-py applies its RedisBloom reply callbacks.
        won = [v == 1 for v in replies[0]] if claims else []
        present = [bool(v) for v in replies[-1]] if reads else []
        return ClaimAnswers(won, present)

    def _exchange_in_window(self, claims: Fingerprints, reads: Fingerprints, token: bytes) -> Plan[ClaimAnswers]:
        assert self.window is not None
        generation = self.window.generation(self.clock())
        current = self._generation_prefix + b"%d" % generation
        arguments = (self._generation_prefix, generation, generation - self.window.generations,
                     math.ceil(self.window.forgotten_at(generation)), self.error_rate, self.capacity)
        commands: List[Tuple[Any, ...]] = []
        if claims:
            commands.append(("EVAL", _CLAIM_IN_WINDOW, 2, current, self._receipt_prefix + token, self.receipt_seconds,
                             *arguments, *claims.as_bytes()))
        if reads:
            commands.append(("EVAL", _READ_IN_WINDOW, 1, current, 0, *arguments, *reads.as_bytes()))
        replies = yield from self._write(commands, writes=bool(claims))
        won = [v == 1 for v in replies[0]] if claims else []
        present = [v == 1 for v in replies[-1]] if reads else []
        return ClaimAnswers(won, present)

    def _filter_keys(self) -> Plan[List[bytes]]:
        """The filters that hold claims now: the namespace's one, or the live generations' that exist."""
        if self.window is None:
            return [self.key]
        generation = self.window.generation(self.clock())
        keys = [self._generation_prefix + b"%d" % g for g in range(generation - self.window.generations, generation + 1)]
        exists = yield [("EXISTS", key) for key in keys]
        return [key for key, there in zip(keys, exists) if there]

    def _measure(self) -> StoreCall[Optional[float]]:
        """The filters' size (``BF.INFO``) as jemalloc allocates it (1,378,568 bytes take 1,572,864)
        over the items inserted; None while empty."""
        return StoreCall(lambda _token: self._filter_bytes_per_item())

    def _filter_bytes_per_item(self) -> Plan[Optional[float]]:
        infos = yield from self._infos()
        size = sum(allocated_bytes(int(info["Size"])) for info in infos)
        items = sum(int(info["Number of items inserted"]) for info in infos)
        return size / items if items else None

    def filter_info(self) -> Dict[str, Any]:
        """``BF.INFO`` of the filters that hold claims now, added up: ``Capacity``, ``Size`` (bytes),
        ``Number of filters``, ``Number of items inserted``.

        :raises StoreUnavailable: when Redis cannot be reached.
        """
        infos: List[Dict[str, Any]] = self._perform(StoreCall(lambda _token: self._infos()))
        fields = ("Capacity", "Size", "Number of filters", "Number of items inserted")
        return {field: sum(int(info[field]) for info in infos) for field in fields}

    def _infos(self) -> Plan[List[Dict[str, Any]]]:
        keys = yield from self._filter_keys()
        replies = (yield [("BF.INFO", key) for key in keys]) if keys else []
        return [bf_info(reply) for reply in replies]
