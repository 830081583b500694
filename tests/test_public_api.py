"""The public API is exactly this list: changing it is a deliberate act."""

import crawldedup

PUBLIC = {
    "AliasesUnsupported",
    "AsyncDeduplicator",
    "AsyncServiceClient",
    "BloomFilter",
    "CanonicalPolicy",
    "Canonicalized",
    "ClaimBatch",
    "DEFAULT_POLICY",
    "POLICY_V1",
    "POLICY_V2",
    "DedupConfig",
    "DedupStats",
    "Deduplicator",
    "Durability",
    "ExactFileError",
    "ExactFilter",
    "FilterFileError",
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
    "POLICY_V3",
    "HostRule",
    "PolicyFileError",
    "StoreUnavailable",
    "__version__",
    "canonicalize",
    "canonicalize_many",
    "fingerprint",
    "load_policy_file",
    "open_state",
}


def test_all_is_pinned():
    assert set(crawldedup.__all__) == PUBLIC
    assert len(crawldedup.__all__) == len(PUBLIC), "a name is listed twice in __all__"


def test_every_public_name_resolves():
    missing = [name for name in crawldedup.__all__ if not hasattr(crawldedup, name)]
    assert missing == []


def test_exceptions_are_the_documented_kinds():
    assert issubclass(crawldedup.InvalidURL, ValueError)
    assert issubclass(crawldedup.FilterFileError, ValueError)
    assert issubclass(crawldedup.ExactFileError, ValueError)
    assert issubclass(crawldedup.LeasesUnsupported, ValueError)
    assert issubclass(crawldedup.AliasesUnsupported, NotImplementedError)
    assert issubclass(crawldedup.StoreUnavailable, ConnectionError)
    assert issubclass(crawldedup.StoreRefused, crawldedup.StoreUnavailable)
