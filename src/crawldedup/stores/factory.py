"""Builds the store a strategy name stands for (``set``, ``sharded-set``, ``bloom``, ``sqlite``)."""

from __future__ import annotations

import os
from typing import Optional, TypedDict, Union

from .base import ClaimStore, RetryPolicy
from .redis_keys import RedisKeyStore
from .redisbloom import RedisBloomStore
from .sharded_set import RedisShardedSetStore
from .sqlite import SQLiteStore

#: Strategies backed by a store (``local`` has none: the local filter decides alone).
STORE_STRATEGIES = ("set", "sharded-set", "bloom", "sqlite")


class _CommonArgs(TypedDict):
    """Keyword arguments every store takes."""

    namespace: str
    policy_digest: str
    retry: Optional[RetryPolicy]


def open_store(
    strategy: str,
    *,
    namespace: str,
    policy_digest: str,
    redis_url: Optional[str] = None,
    sqlite_path: Optional[Union[str, "os.PathLike[str]"]] = None,
    capacity: int,
    error_rate: float,
    ttl_seconds: Optional[int] = None,
    retry: Optional[RetryPolicy] = None,
) -> ClaimStore:
    """Open the store of ``strategy`` for one namespace.

    :param strategy: one of :data:`STORE_STRATEGIES`.
    :param redis_url: where the Redis stores live (required for them).
    :param sqlite_path: the SQLite file (required for ``sqlite``).
    :param capacity: URLs the namespace is sized for (sharded sets, RedisBloom).
    :param error_rate: RedisBloom's false-positive rate.
    :param ttl_seconds: how long a claim lasts in the ``set`` store (None: forever).
    :raises ValueError: for an unknown strategy or a missing location.
    :raises NamespaceConflict: when the namespace was made by another store or policy.
    :raises StoreUnavailable: when the store cannot be reached.
    """
    common: _CommonArgs = {"namespace": namespace, "policy_digest": policy_digest, "retry": retry}
    if strategy == "sqlite":
        if sqlite_path is None:
            raise ValueError("the sqlite strategy needs sqlite_path (CRAWLDEDUP_SQLITE)")
        return SQLiteStore(sqlite_path, **common)
    if strategy not in STORE_STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(('local',) + STORE_STRATEGIES)}, got {strategy!r}")
    if redis_url is None:
        raise ValueError(f"the {strategy} strategy needs redis_url (REDIS_URL)")
    if strategy == "set":
        return RedisKeyStore(redis_url, ttl_seconds=ttl_seconds, **common)
    if strategy == "sharded-set":
        return RedisShardedSetStore(redis_url, capacity=capacity, **common)
    return RedisBloomStore(redis_url, capacity=capacity, error_rate=error_rate, **common)
