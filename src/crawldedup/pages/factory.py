"""Which page store goes with a Deduplicator's claim store: the same family, beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .._checks import PathArg
from ..stores.base import ClaimStore
from ..stores.factory import REDIS_STRATEGIES
from ..stores.sqlite import SQLiteStore
from .base import PageStore
from .local import LocalPages
from .redis import RedisPages
from .sqlite import SQLitePages

__all__ = ["PAGES_SUFFIX", "open_pages"]

#: The page journal of the ``local`` strategy is the state file's path with this appended.
PAGES_SUFFIX = ".pages"


def open_pages(
    store: Optional[ClaimStore], state_path: Optional[PathArg], *, max_distance: int, content_digest: str,
    canonical_digest: str, capacity: int,
) -> PageStore:
    """The page store of a claim store (None: the ``local`` strategy, beside its state file).

    :param store: the Deduplicator's claim store, whose connection or file the pages share.
    :param state_path: the local state file (``local`` only): the journal is ``<state>.pages``;
        None keeps the pages in memory.
    :param canonical_digest: digest of the canonical policy of the page ids (the claim store
        records its own).
    :param capacity: pages a new Redis namespace is sized for.
    :raises NamespaceConflict: when the store's pages were made with another k or content policy.
    :raises PageFileError: for such a journal, or a damaged one.
    :raises StoreUnavailable: when the store cannot be reached.
    """
    if store is None:
        path = None if state_path is None else Path(f"{state_path}{PAGES_SUFFIX}")
        return LocalPages(path, max_distance=max_distance, content_digest=content_digest,
                          canonical_digest=canonical_digest)
    if isinstance(store, SQLiteStore):
        return SQLitePages(store, max_distance=max_distance, content_digest=content_digest)
    if store.strategy in REDIS_STRATEGIES:
        return RedisPages(store, max_distance=max_distance, content_digest=content_digest, capacity=capacity)
    raise ValueError(f"the {store.strategy} store keeps no pages")
