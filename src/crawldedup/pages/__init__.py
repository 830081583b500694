"""Stored pages: the latest content fingerprint of each page, for :meth:`Deduplicator.check_content`.

One page store per claim store family (docs/content.md, "Stored pages"): ``local`` (memory,
and a journal beside the state file), ``sqlite`` (two tables in the claim store's file) and
the Redis strategies (one hash tag per namespace). ``plan.py`` holds what they share without
I/O: the batch, the store's answer and the verdicts.
"""

from .base import PageStore
from .factory import PAGES_SUFFIX, open_pages
from .journal import PAGES_FORMAT_VERSION, PageFileError
from .local import LocalPages
from .plan import CHANGED, DUPLICATE, INVALID, NEW, UNCHANGED, VERDICTS, PageBatch, PageCheck, Seen
from .redis import RedisPages
from .sqlite import SQLitePages

__all__ = [
    "CHANGED",
    "DUPLICATE",
    "INVALID",
    "NEW",
    "PAGES_FORMAT_VERSION",
    "PAGES_SUFFIX",
    "UNCHANGED",
    "VERDICTS",
    "LocalPages",
    "PageBatch",
    "PageCheck",
    "PageFileError",
    "PageStore",
    "RedisPages",
    "SQLitePages",
    "Seen",
    "open_pages",
]
