"""Claim stores: one shared, authoritative answer to "has this URL been claimed?".

Every store takes 16-byte fingerprints and answers a batch in one round trip
(:meth:`~crawldedup.stores.base.ClaimStore.claim_and_read`). Key layouts are documented in
docs/stores.md and in each module.
"""

from typing import TYPE_CHECKING, Any

from .aio import AsyncClaimStore
from .aliases import Aliases, AliasesUnsupported
from .base import (
    STORES,
    ClaimAnswers,
    ClaimStore,
    Lease,
    LeasesUnsupported,
    NamespaceConflict,
    RetryPolicy,
    StoreRefused,
    StoreUnavailable,
)
from .durability import Durability

if TYPE_CHECKING:
    from .postgres import PostgresStore
    from .redis_keys import RedisKeyStore
    from .redisbloom import RedisBloomStore
    from .sharded_set import RedisShardedSetStore
    from .sqlite import SQLiteStore

#: The store classes exported here, by name: each is imported on first use, with its server's
#: client (redis-py, psycopg), so that importing the package imports none.
_LAZY = {entry.class_name: entry for entry in STORES if entry.strategy != "service"}

__all__ = [
    "Aliases",
    "AliasesUnsupported",
    "AsyncClaimStore",
    "ClaimAnswers",
    "ClaimStore",
    "Durability",
    "Lease",
    "LeasesUnsupported",
    "NamespaceConflict",
    "PostgresStore",
    "RedisBloomStore",
    "RedisKeyStore",
    "RedisShardedSetStore",
    "RetryPolicy",
    "SQLiteStore",
    "StoreRefused",
    "StoreUnavailable",
]


def __getattr__(name: str) -> Any:
    entry = _LAZY.get(name)
    if entry is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return entry.load()
