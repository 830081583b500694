"""The smallest store: one RedisBloom filter per namespace (probabilistic, no TTL).

Key layout (part of the documented format, see docs/stores.md)::

    <namespace>:meta    hash: layout, store=bloom, fingerprint, policy, capacity, error_rate
    <namespace>:bf      RedisBloom filter, BF.RESERVE <error_rate> <capacity>, items = 16 raw fingerprint bytes
    {<namespace>:bf}:receipt:<token>   for a few minutes: the answers of a call that won something

A batch is one script running ``BF.MADD`` (claims, and the receipt in the same atomic step) and
one running ``BF.MEXISTS`` (reads) in one pipeline. The receipt's hash tag is the filter's whole key
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
from .._plans import Plan
from ..fingerprints import Fingerprints
from ._redis import RECEIPTS_LUA, RedisStore, allocated_bytes, read_answers, server_text
from .base import ClaimAnswers, Lease, StoreCall, StoreOptions
from .lua import lua

# The items of a call, 16 raw fingerprint bytes each, come back to back in ARGV's last argument
# (one argument for the client to send, not one per item); items(first, last) cuts a stretch
# of them into a table for BF.MADD / BF.MEXISTS, which take 1,000 at a time (Lua's unpack stops
# near 8,000). Scripts answer one character per item (as_text).
_ITEMS = RECEIPTS_LUA + lua("bloom_items")

# KEYS: the filter, the call's receipt. ARGV: receipt seconds, the items. Per item: 1 won
# (added), 0 already there.
_CLAIM = _ITEMS + lua("bloom_claim")

# KEYS: the filter. ARGV: the items. Per item: 1 when the filter holds it.
_READ = _ITEMS + lua("bloom_read")

# With a window: one filter per generation, "{<namespace>:bf}:<generation>" (the hash tag keeps
# them and the receipts in one Cluster slot), reserved on first use and expiring (EXPIREAT) when
# its generation is forgotten. ARGV after the receipt seconds: the generations' key prefix, the
# current generation, the oldest live one, when the current one is forgotten, error rate,
# capacity, then the items. LIVE_OLDER: the older live filters that exist.
_LIVE_OLDER = _ITEMS + lua("bloom_live_older")

# KEYS: the current generation's filter, the call's receipt. Per item: 1 won, 0 already seen in
# a live generation (then not added again: its window runs from its first claim).
_CLAIM_IN_WINDOW = _LIVE_OLDER + lua("bloom_claim_in_window")

# KEYS: the current generation's filter. Per item: 1 when a live generation holds it.
_READ_IN_WINDOW = _LIVE_OLDER + lua("bloom_read_in_window")


def bf_info(reply: Any) -> Dict[str, Any]:
    """A ``BF.INFO`` reply as a dict from field name (``str``) to value, whatever its wire form.

    Over RESP3 (redis-py 8's default protocol) the reply is a map, which redis-py returns as a
    dict; over RESP2 (the default before redis-py 8, as in 7.0.1, the newest for Python 3.9) it
    is a flat list of names and values. ``execute_command`` applies no RedisBloom callback.
    """
    pairs = reply.items() if isinstance(reply, dict) else zip(reply[0::2], reply[1::2])
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in pairs}


def _answers(claims: Fingerprints, reads: Fingerprints, replies: List[Any]) -> ClaimAnswers:
    """The answers of a call's scripts: the claims' first (when any), then the reads'."""
    won = (read_answers(replies[:1]) == 1).tolist() if claims else []
    present = (read_answers(replies[-1:]) == 1).tolist() if reads else []
    return ClaimAnswers(won, present)


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

    @classmethod
    def from_options(cls, options: StoreOptions) -> RedisBloomStore:
        return cls(capacity=options.capacity, error_rate=options.error_rate, **cls._redis_options(options))

    def count_claims(self) -> int:
        """Items inserted into the filter (``BF.INFO``)."""
        return int(self.filter_info()["Number of items inserted"])

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
            commands.append(
                ("EVAL", _CLAIM, 2, self.key, self._receipt_prefix + token, self.receipt_seconds, claims.tobytes())
            )
        if reads:
            commands.append(("EVAL", _READ, 1, self.key, reads.tobytes()))
        replies = yield from self._write(commands, writes=bool(claims))
        return _answers(claims, reads, replies)

    def _exchange_in_window(self, claims: Fingerprints, reads: Fingerprints, token: bytes) -> Plan[ClaimAnswers]:
        assert self.window is not None
        generation = self.window.generation(self.clock())
        current = self._generation_prefix + b"%d" % generation
        arguments = (
            self._generation_prefix,
            generation,
            generation - self.window.generations,
            math.ceil(self.window.forgotten_at(generation)),
            self.error_rate,
            self.capacity,
        )
        commands: List[Tuple[Any, ...]] = []
        if claims:
            commands.append(
                (
                    "EVAL",
                    _CLAIM_IN_WINDOW,
                    2,
                    current,
                    self._receipt_prefix + token,
                    self.receipt_seconds,
                    *arguments,
                    claims.tobytes(),
                )
            )
        if reads:
            commands.append(("EVAL", _READ_IN_WINDOW, 1, current, 0, *arguments, reads.tobytes()))
        replies = yield from self._write(commands, writes=bool(claims))
        return _answers(claims, reads, replies)

    def _filter_keys(self) -> Plan[List[bytes]]:
        """The filters that hold claims now: the namespace's one, or the live generations' that exist."""
        if self.window is None:
            return [self.key]
        generation = self.window.generation(self.clock())
        keys = [
            self._generation_prefix + b"%d" % g for g in range(generation - self.window.generations, generation + 1)
        ]
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
