"""The Scrapy dupefilter and content middleware under their documented paths,
``crawldedup.scrapy.DupeFilter`` and ``crawldedup.scrapy.ContentMiddleware``.

The adapter lives in :mod:`crawldedup.integrations.scrapy`, beside the other frameworks'.
"""

from .integrations.scrapy import (
    CONTENT_META_KEY,
    PAGES_FILE_NAME,
    SETTINGS,
    STATE_FILE_NAME,
    STATS_SYNC_EVERY,
    ContentMiddleware,
    DupeFilter,
    deduplicator_from_settings,
)

__all__ = [
    "CONTENT_META_KEY", "ContentMiddleware", "DupeFilter", "PAGES_FILE_NAME", "SETTINGS", "STATE_FILE_NAME",
    "STATS_SYNC_EVERY", "deduplicator_from_settings",
]
