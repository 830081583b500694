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

from typing import Any, Dict, List, Optional, Tuple

import redis

from .._checks import check_capacity, check_error_rate
from ..fingerprints import Fingerprints
from .base import ClaimAnswers, Lease
from ._redis import RECEIPTS_LUA, RedisStore

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
    commands = (*RedisStore.commands, "BF.RESERVE", "BF.MADD", "BF.MEXISTS")

    def __init__(self, url: Optional[str] = None, *, capacity: int, error_rate: float, **kwargs: Any) -> None:
        check_capacity(capacity)
        check_error_rate(error_rate)
        super().__init__(url, layout={"capacity": str(capacity), "error_rate": repr(error_rate)}, **kwargs)

    def _adopt_namespace(self) -> None:
        super()._adopt_namespace()
        self.capacity = int(self.meta["capacity"])
        self.error_rate = float(self.meta["error_rate"])
        self.key = f"{self.namespace}:bf".encode("ascii")
        self._receipt_prefix = b"{%s}:receipt:" % self.key
        self._with_retries(self._reserve)

    def _reserve(self) -> None:
        try:
            self.client.execute_command("BF.RESERVE", self.key, self.error_rate, self.capacity)
        except redis.ResponseError as exc:
            if "exists" not in str(exc).lower():  # "ERR item exists": another worker reserved it
                raise

    def _exchange(
        self, claims: Fingerprints, reads: Fingerprints, lease: Optional[Lease], token: bytes
    ) -> ClaimAnswers:
        commands: List[Tuple[Any, ...]] = []
        if claims:
            commands.append(("EVAL", _CLAIM, 2, self.key, self._receipt_prefix + token, self.receipt_seconds,
                             *claims.as_bytes()))
        if reads:
            commands.append(("BF.MEXISTS", self.key, *reads.as_bytes()))
        replies = self._pipeline(commands)
        # 1/0, or True/False where redis-py applies its RedisBloom reply callbacks.
        won = [v == 1 for v in replies[0]] if claims else []
        present = [bool(v) for v in replies[-1]] if reads else []
        return ClaimAnswers(won, present)

    def bytes_per_url(self) -> Optional[float]:
        """The filter's size over the items inserted (``BF.INFO``); None while empty.

        :raises StoreUnavailable: when Redis cannot be reached.
        """
        info = bf_info(self._with_retries(lambda: self.client.execute_command("BF.INFO", self.key)))
        items = int(info["Number of items inserted"])
        return int(info["Size"]) / items if items else None
