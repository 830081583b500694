"""crawldedup: has this page already been claimed?"""

__version__ = "0.1.0"

from .canonical import DEFAULT_POLICY, CanonicalPolicy, Canonicalized, InvalidURL, canonicalize, canonicalize_many
from .stores import (
    NamespaceConflict,
    RedisBloomStore,
    RedisKeyStore,
    RedisShardedSetStore,
    RetryPolicy,
    SQLiteStore,
    StoreUnavailable,
)

__all__ = [
    "DEFAULT_POLICY",
    "CanonicalPolicy",
    "Canonicalized",
    "InvalidURL",
    "NamespaceConflict",
    "RedisBloomStore",
    "RedisKeyStore",
    "RedisShardedSetStore",
    "RetryPolicy",
    "SQLiteStore",
    "StoreUnavailable",
    "canonicalize",
    "canonicalize_many",
    "__version__",
]
