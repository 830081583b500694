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

#: The page journal of the ``local`` strategy is, by default, the state file's path with this appended.
PAGES_SUFFIX = ".pages"


def open_pages(
    store: Optional[ClaimStore],
    path: Optional[PathArg],
    *,
    namespace: str,
    max_distance: int,
    content_digest: str,
    canonical_digest: str,
    capacity: int,
) -> PageStore:
    """The page store of a claim store (None: the ``local`` strategy, in a journal file).

    Only the local page store does I/O here (it reads its journal); the others open on their
    first exchange, over the claim store's channel.

    :param store: the Deduplicator's claim store, whose channel the pages share (for an
        :class:`~crawldedup.stores.aio.AsyncClaimStore`, its ``store``).
    :param path: the journal of the ``local`` strategy; None keeps the pages in memory.
    :param namespace: whose pages (in a store): the crawl's namespace without its round, so
        that each round of a re-inspection crawl compares with the one before.
    :param canonical_digest: digest of the canonical policy of the page ids (the claim store
        records its own).
    :param capacity: pages a new Redis namespace is sized for.
    :raises PageFileError: for a journal of another k or policy, or a damaged one.
    """
    if store is None:
        return LocalPages(
            None if path is None else Path(path),
            max_distance=max_distance,
            content_digest=content_digest,
            canonical_digest=canonical_digest,
        )
    if isinstance(store, SQLiteStore):
        return SQLitePages(store, namespace=namespace, max_distance=max_distance, content_digest=content_digest)
    if store.strategy in REDIS_STRATEGIES:
        return RedisPages(
            store, namespace=namespace, max_distance=max_distance, content_digest=content_digest, capacity=capacity
        )
    raise ValueError(f"the {store.strategy} store keeps no pages")
