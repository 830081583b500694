"""Claim stores: one shared, authoritative answer to "has this URL been claimed?".

Every store takes 16-byte fingerprints and answers a batch in one round trip
(:meth:`~crawldedup.stores.base.ClaimStore.claim_and_read`). Key layouts are documented in
docs/stores.md and in each module.
"""

from .aio import AsyncClaimStore
from .aliases import Aliases, AliasesUnsupported
from .base import (
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
from .postgres import PostgresStore
from .redis_keys import RedisKeyStore
from .redisbloom import RedisBloomStore
from .sharded_set import RedisShardedSetStore
from .sqlite import SQLiteStore

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
