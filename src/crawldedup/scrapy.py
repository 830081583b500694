"""The Scrapy dupefilter and downloader middlewares under their documented paths,
``crawldedup.scrapy.DupeFilter``, ``crawldedup.scrapy.ContentMiddleware`` and
``crawldedup.scrapy.RedirectMiddleware``.

The adapter lives in :mod:`crawldedup.integrations.scrapy`, beside the other frameworks'.
"""

from .integrations.scrapy import (
    CONTENT_META_KEY,
    PAGES_FILE_NAME,
    REDIRECT_MIDDLEWARE,
    SETTINGS,
    STATE_FILE_NAME,
    STATS_SYNC_EVERY,
    ContentMiddleware,
    DupeFilter,
    RedirectMiddleware,
    deduplicator_from_settings,
)

__all__ = [
    "CONTENT_META_KEY",
    "ContentMiddleware",
    "DupeFilter",
    "PAGES_FILE_NAME",
    "REDIRECT_MIDDLEWARE",
    "RedirectMiddleware",
    "SETTINGS",
    "STATE_FILE_NAME",
    "STATS_SYNC_EVERY",
    "deduplicator_from_settings",
]
