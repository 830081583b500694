"""crawldedup: has this page already been claimed?

The public names load on first use (:pep:`562`): ``import crawldedup`` and ``crawldedup
--version`` load no layer, and ``from crawldedup import canonicalize`` loads the canonicalizer
alone, no server client.
"""

__version__ = "0.1.0"

import importlib
from typing import TYPE_CHECKING, Any, Dict, List

__all__ = [
    "AliasesUnsupported",
    "AsyncDeduplicator",
    "AsyncServiceClient",
    "BloomFilter",
    "ExactFilter",
    "ExactFileError",
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
    "DedupConfig",
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

#: Each public name's module (the name is that module's attribute of the same name).
_HOMES: Dict[str, str] = {
    "BloomFilter": ".bloom",
    "FilterFileError": ".bloom.format",
    "ExactFilter": ".exact",
    "ExactFileError": ".exact",
    **dict.fromkeys(
        (
            "DEFAULT_POLICY",
            "POLICY_V1",
            "POLICY_V2",
            "POLICY_V3",
            "Canonicalized",
            "CanonicalPolicy",
            "HostRule",
            "InvalidURL",
            "PolicyFileError",
            "canonicalize",
            "canonicalize_many",
            "load_policy_file",
        ),
        ".canonical",
    ),
    **dict.fromkeys(("AsyncDeduplicator", "ClaimBatch", "Deduplicator", "DedupStats", "open_state"), ".dedup"),
    "fingerprint": ".fingerprints",
    "DedupConfig": ".config",
    **dict.fromkeys(
        (
            "AliasesUnsupported",
            "Durability",
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
        ),
        ".stores",
    ),
    # The service's clients need its extra (httpx, orjson).
    **dict.fromkeys(("AsyncServiceClient", "ServiceClient"), ".service"),
}

if TYPE_CHECKING:
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
    from .config import DedupConfig
    from .dedup import AsyncDeduplicator, ClaimBatch, Deduplicator, DedupStats, open_state
    from .exact import ExactFileError, ExactFilter
    from .fingerprints import fingerprint
    from .service import AsyncServiceClient, ServiceClient
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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
