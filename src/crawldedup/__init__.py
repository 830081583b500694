"""crawldedup: has this page already been claimed?"""

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

from .bloom import BloomFilter
from .bloom.format import FilterFileError
from .canonical import (
    DEFAULT_POLICY,
    POLICY_V1,
    POLICY_V2,
    POLICY_V3,
    Canonicalized,
    CanonicalPolicy,
    HostRule,
    InvalidURL,
    PolicyFileError,
    canonicalize,
    canonicalize_many,
    load_policy_file,
)
from .dedup import AsyncDeduplicator, ClaimBatch, Deduplicator, DedupStats, open_state
from .fingerprints import fingerprint
from .stores import (
    AliasesUnsupported,
    Durability,
    LeasesUnsupported,
    NamespaceConflict,
    PostgresStore,
    RedisBloomStore,
    RedisKeyStore,
    RedisShardedSetStore,
    RetryPolicy,
    SQLiteStore,
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
    "POLICY_V3",
    "CanonicalPolicy",
    "HostRule",
    "PolicyFileError",
    "load_policy_file",
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


def __getattr__(name: str) -> Any:
    # The service's clients need its extra (httpx, orjson): imported on first use, so that the
    # core package imports without them.
    if name in ("AsyncServiceClient", "ServiceClient"):
        from . import service

        return getattr(service, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
