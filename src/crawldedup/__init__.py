"""crawldedup: has this page already been claimed?"""

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

from .bloom import BloomFilter
from .bloom.format import FilterFileError
from .canonical import (
    DEFAULT_POLICY,
    POLICY_V1,
    POLICY_V2,
    Canonicalized,
    CanonicalPolicy,
    InvalidURL,
    canonicalize,
    canonicalize_many,
)
from .dedup import AsyncDeduplicator, ClaimBatch, Deduplicator, DedupStats, open_state
from .fingerprints import fingerprint
from .stores import (
    AliasesUnsupported,
    Durability,
    LeasesUnsupported,
    NamespaceConflict,
    RetryPolicy,
    StoreRefused,
    StoreUnavailable,
)

__all__ = [
    "AliasesUnsupported",
    "AsyncDeduplicator",
    "AsyncServiceClient",
    "BloomFilter",
    "FilterFileError",
    "fingerprint",
    "DEFAULT_POLICY",
    "POLICY_V1",
    "POLICY_V2",
    "CanonicalPolicy",
    "Canonicalized",
    "ClaimBatch",
    "DedupStats",
    "Deduplicator",
    "Durability",
    "InvalidURL",
    "LeasesUnsupported",
    "NamespaceConflict",
    "PostgresStore",
    "RedisBloomStore",
    "RedisKeyStore",
    "RedisShardedSetStore",
    "RetryPolicy",
    "SQLiteStore",
    "ServiceClient",
    "StoreRefused",
    "StoreUnavailable",
    "canonicalize",
    "canonicalize_many",
    "open_state",
    "__version__",
]


if TYPE_CHECKING:
    from .service import AsyncServiceClient, ServiceClient
    from .stores import PostgresStore, RedisBloomStore, RedisKeyStore, RedisShardedSetStore, SQLiteStore

#: Names imported on first use: the service's clients need its extra (httpx, orjson), and the
#: stores their server's client (redis-py, psycopg), so that the package imports without them.
_LAZY_STORES = ("PostgresStore", "RedisBloomStore", "RedisKeyStore", "RedisShardedSetStore", "SQLiteStore")


def __getattr__(name: str) -> Any:
    if name in ("AsyncServiceClient", "ServiceClient"):
        from . import service

        return getattr(service, name)
    if name in _LAZY_STORES:
        from . import stores

        return getattr(stores, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
