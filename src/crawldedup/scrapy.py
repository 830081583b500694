"""The Scrapy dupefilter under its documented path, ``crawldedup.scrapy.DupeFilter``.

The adapter lives in :mod:`crawldedup.integrations.scrapy`, beside the other frameworks'.
"""

from .integrations.scrapy import SETTINGS, STATE_FILE_NAME, STATS_SYNC_EVERY, DupeFilter, deduplicator_from_settings

__all__ = ["DupeFilter", "SETTINGS", "STATE_FILE_NAME", "STATS_SYNC_EVERY", "deduplicator_from_settings"]
