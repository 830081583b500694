"""The classic exact store: one Redis key per URL, ``SET key 1 NX EX ttl``.

Key layout (part of the documented format, see docs/stores.md)::

    <namespace>:meta                      hash: layout, store=keys, fingerprint, policy, groups
    {<namespace>:<group>}<fingerprint>    string "1", expiring after ttl_seconds (no expiry while leased)
    {<namespace>:<group>}:leases          sorted set: fingerprint -> lease deadline (ms)
    {<namespace>:<group>}:lease-urls      hash: fingerprint -> "<owner> <canonical URL>"
    {<namespace>:<group>}:receipt:<token> a call's answers, for a few minutes (optional)

``<fingerprint>`` is the 16 raw bytes (also the claim id of the lease records); ``<group>``
(decimal) is the multiply-shift of the fingerprint's first 64 bits into ``groups``. A batch is
one ``EVAL`` per group, all in one pipeline: the script runs ``SET NX EX`` for each of its keys
(``MSETNX`` for up to 64 at once when they take no expiry), which costs the Python client one
command per group instead of one per URL (figures in docs/stores.md).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, cast

import numpy as np
from redis.cluster import RedisCluster

from .._checks import complaint, integer_in, is_integer
from .._plans import Plan
from ..fingerprints import Fingerprints, multiply_shift
from ._redis import DICT_ENTRY_BYTES, ONE_BY_ONE, GroupedScriptStore, allocated_bytes
from .base import StoreCall, StoreOptions
from .lua import lua

#: Claim keys :meth:`RedisKeyStore.bytes_per_url` measures, and the most SCAN steps it takes to find them.
SAMPLE_KEYS = 200
#: Keys one ``SCAN`` step of :meth:`RedisKeyStore.count_claims` looks at.
COUNT_BATCH = 10_000
MAX_SAMPLE_SCANS = 100
#: Redis 7's sizes (object.c): a value object, and the refcount of a shared integer (the value
#: "1" of every claim key is one, so it costs no allocation of its own).
OBJECT_BYTES = 16
SHARED_REFCOUNT = 2**31 - 1

# A record is the 16 fingerprint bytes, the key's name after the group's tag. A leased key has no
# expiry until its lease is done; the claim id is the key's 16 fingerprint bytes. With a window
# (GEN >= 0) a lasting claim's value is "g<generation>" and the key expires (EXAT) when that
# generation is forgotten; a key whose generation is older than OLDEST is forgotten
# already (by the client's clock, which may run ahead of Redis's) and is claimed again. A leased
# key holds "L" and no generation: its lease decides. "1" (claims without a window) never ages
# here; its own EX, if any, ends it. With a window a claim first tries SET NX (one call for a new
# page, most of what reaches the store), and reads the key only when it exists.
#
# claim_all sets up to MSETNX_KEYS new keys in one command, which sets all of them or none:
# MSETNX for claims without an expiry (lasting without a ttl, or leased), MSETEX NX for those
# with one (Redis 8.4 and Valkey 9.1 have it: MSETEX when the server knew it at open). One
# command instead of one per key for new pages (redis-server's CPU a lasting claim 3.5 -> 3.0
# us, INFO commandstats; a windowed one on Valkey 9.1 3.1 -> 1.6 us), key by key only for a
# chunk where some key exists, and on a server without MSETEX (a node of another version after
# a failover: the call goes on key by key). A key repeated in the call is lost to its first.
_PRIMITIVES = lua("keys_primitives") + ONE_BY_ONE + lua("keys_claim_all")


class RedisKeyStore(GroupedScriptStore):
    """Exact claims, one key per URL with its own expiry (about 100 bytes per URL).

    :param url: Redis URL (see :class:`~crawldedup.stores._redis.RedisStore`).
    :param namespace: key prefix of this crawl (and round).
    :param policy_digest: digest of the canonical policy behind the fingerprints.
    :param ttl_seconds: how long a claim lasts without a window; None keeps claims forever.
    :param window: the recrawl window (it takes the place of ``ttl_seconds``): a claim expires
        when its generation is forgotten.
    :param groups: hash-tag groups for a new namespace (an existing one keeps its own).
    :param client: an existing redis-py client instead of ``url``.
    :param retry: retries for transient Redis errors.
    :raises ValueError: for a bad namespace, digest, ttl or group count.
    :raises NamespaceConflict: when the namespace was made by another store or policy.
    :raises StoreUnavailable: when Redis cannot be reached.
    """

    strategy = "set"
    kind = "keys"
    commands = (*GroupedScriptStore.commands, "MSETNX", "EXPIRE", "PERSIST", "DEL")
    optional_commands = ("MSETEX",)
    _primitives = _PRIMITIVES

    def _namespace_primitives(self) -> str:
        return f"local MSETEX = {'true' if 'MSETEX' in self.server_has else 'false'}\n" + self._primitives

    def __init__(self, url: Optional[str] = None, *, ttl_seconds: Optional[int] = None, **kwargs: Any) -> None:
        if ttl_seconds is not None and (not is_integer(ttl_seconds) or ttl_seconds < 1):
            raise ValueError(complaint("ttl_seconds", "a positive integer or None", ttl_seconds))
        self.ttl_seconds = ttl_seconds
        super().__init__(url, **kwargs)

    @classmethod
    def from_options(cls, options: StoreOptions) -> RedisKeyStore:
        options = StoreOptions.given(options)
        return cls(ttl_seconds=options.ttl_seconds, **cls._redis_options(options))

    def _ttl(self) -> int:
        return super()._ttl() if self.window is not None else self.ttl_seconds or 0

    def _records(self, fingerprints: Fingerprints) -> Tuple[np.ndarray, np.ndarray]:
        return multiply_shift(fingerprints.first_halves, self.groups), fingerprints.hashes.astype("<u8", copy=False)

    def scan_claims(self, cursor: int = 0, count: int = 1_000) -> Tuple[int, Fingerprints]:
        """One ``SCAN`` step over the namespace's claim keys (leased ones included).

        :param cursor: 0 to start, then the cursor the previous step returned.
        :param count: keys the server looks at in this step (its ``COUNT`` hint).
        :returns: the next cursor (0 once the scan is complete) and the fingerprints found.
        :raises TypeError: for a cursor or count that is not an integer.
        :raises ValueError: on a Redis Cluster (whose nodes are scanned one by one), or a count below 1.
        :raises StoreUnavailable: when Redis cannot be reached.
        """
        integer_in("cursor", cursor, 0, 2**64 - 1, "2**64 - 1")
        integer_in("count", count, 1, 2**31 - 1, "2**31 - 1")
        self._single_node()
        cursor, keys = self._scan(cursor, count)
        return cursor, Fingerprints.of([key[-16:] for key in keys])

    def count_claims(self) -> int:
        """Claim keys counted by ``SCAN`` (leased ones included; not on a Redis Cluster)."""
        total, cursor = 0, 0
        while True:
            cursor, found = self.scan_claims(cursor, COUNT_BATCH)
            total += len(found)
            if cursor == 0:
                return total

    def _scan(self, cursor: int, count: int) -> Tuple[int, List[bytes]]:
        # mypy cannot solve _perform's StoreCall[T] | T for a tuple answer: the call is typed loosely.
        call: StoreCall[Any] = StoreCall(lambda _token: self._scan_step(cursor, count))
        return cast(Tuple[int, List[bytes]], self._perform(call))

    def _single_node(self) -> None:
        if isinstance(self.client, RedisCluster):
            raise ValueError(f"{self.description}: scanning the claims of a Redis Cluster is not supported")

    def _scan_step(self, cursor: int, count: int) -> Plan[Tuple[int, List[bytes]]]:
        """One SCAN step: the next cursor and the claim keys found (receipts and lease records left out)."""
        (reply,) = yield [("SCAN", cursor, "MATCH", b"{%s:*" % self.namespace.encode("ascii"), "COUNT", count)]
        tags = set(self._tags)
        found = cast(List[bytes], reply[1])  # the client returns bytes (no decode_responses)
        return int(reply[0]), [key for key in found if len(key) > 16 and key[:-16] in tags]

    def _measure(self) -> StoreCall[Optional[float]]:
        """Redis memory per claim key: the mean ``MEMORY USAGE`` of up to 200 of them (found by
        ``SCAN``) plus each key's share of the keyspace's hash tables (``MEMORY STATS``, ``INFO
        keyspace``), which ``MEMORY USAGE`` leaves out, and less the shared value it counts; None
        while the namespace holds no claim key.

        Follows Redis 7's accounting (object.c); tests/test_stores.py checks it against
        ``INFO memory``'s growth. Not supported on a Redis Cluster (ValueError).
        """
        self._single_node()
        db = int(getattr(getattr(self.client, "connection_pool", None), "connection_kwargs", {}).get("db", 0))
        return StoreCall(lambda _token: self._sampled_bytes_per_key(db))

    def _sampled_bytes_per_key(self, db: int) -> Plan[Optional[float]]:
        keys: List[bytes] = []
        cursor = 0
        for _ in range(MAX_SAMPLE_SCANS):
            cursor, found = yield from self._scan_step(cursor, 1_000)
            keys.extend(found)
            if cursor == 0 or len(keys) >= SAMPLE_KEYS:
                break
        keys = keys[:SAMPLE_KEYS]
        if not keys:
            return None
        replies = yield [
            command
            for key in keys
            for command in (("MEMORY", "USAGE", key, "SAMPLES", "0"), ("OBJECT", "REFCOUNT", key), ("PTTL", key))
        ]
        present = [i for i in range(len(keys)) if replies[3 * i] is not None]  # a key may expire meanwhile
        if not present:
            return None
        per_key: List[int] = [
            replies[3 * i] - (OBJECT_BYTES if replies[3 * i + 1] == SHARED_REFCOUNT else 0) for i in present
        ]
        expiring = sum(1 for i in present if replies[3 * i + 2] > 0) / len(present)
        memory_stats, keyspace = yield [("MEMORY STATS",), ("INFO", "keyspace")]
        tables: Dict[str, int] = memory_stats.get(f"db.{db}", {})
        counts: Dict[str, int] = keyspace.get(f"db{db}", {})
        keys_in_db, expires_in_db = counts.get("keys", 0), counts.get("expires", 0)
        # MEMORY STATS counts an entry and a value object per key, and one pointer per slot.
        main_slots = tables.get("overhead.hashtable.main", 0) - keys_in_db * (DICT_ENTRY_BYTES + OBJECT_BYTES)
        expires_slots = tables.get("overhead.hashtable.expires", 0) - expires_in_db * DICT_ENTRY_BYTES
        share = allocated_bytes(DICT_ENTRY_BYTES) - DICT_ENTRY_BYTES + main_slots / max(keys_in_db, 1)
        share += expiring * (allocated_bytes(DICT_ENTRY_BYTES) + expires_slots / max(expires_in_db, 1))
        return sum(per_key) / len(per_key) + share
