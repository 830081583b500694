"""crawldedup: has this page already been claimed?"""

__version__ = "0.1.0"

from .bloom.format import FilterFileError
from .fingerprints import fingerprint
from .bloom import BloomFilter
from .canonical import DEFAULT_POLICY, CanonicalPolicy, Canonicalized, InvalidURL, canonicalize, canonicalize_many
from .dedup import AsyncDeduplicator, ClaimBatch, DedupStats, Deduplicator, open_state
from .stores import (
    LeasesUnsupported,
    NamespaceConflict,
    RedisBloomStore,
    RedisKeyStore,
    RedisShardedSetStore,
    RetryPolicy,
    SQLiteStore,
    StoreRefused,
    StoreUnavailable,
)

__all__ = [
    "AsyncDeduplicator",
    "BloomFilter",
    "FilterFileError",
    "fingerprint",
    "DEFAULT_POLICY",
    "CanonicalPolicy",
    "Canonicalized",
    "ClaimBatch",
    "DedupStats",
    "Deduplicator",
    "InvalidURL",
    "LeasesUnsupported",
    "NamespaceConflict",
    "RedisBloomStore",
    "RedisKeyStore",
    "RedisShardedSetStore",
    "RetryPolicy",
    "SQLiteStore",
    "StoreRefused",
    "StoreUnavailable",
    "canonicalize",
    "canonicalize_many",
    "open_state",
    "__version__",
]
