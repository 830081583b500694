"""The interface of a page store: its steps as calls (sans I/O), sent by a blocking or an asyncio shell.

A page store writes what it asks of its store as a :class:`~crawldedup.stores.base.StoreCall`
(:mod:`crawldedup._plans`): the Redis and SQLite page stores send their requests over the
claim store's own channel (:meth:`ClaimStore.perform` blocking, :meth:`AsyncClaimStore.perform`
awaited), with its retries and tokens; the ``local`` page store needs no channel and answers
at once. So the blocking and the asyncio Deduplicator share every step but the sending.
"""

from __future__ import annotations

import abc
from typing import ClassVar, List, Optional, TypeVar, Union

from ..stores.base import StoreCall
from .plan import PageBatch, Seen

__all__ = ["PageStore", "Step"]

T = TypeVar("T")
#: A step of a page store: a call for the claim store's channel, or its answer when it needs none.
Step = Union[StoreCall[T], T]


class PageStore(abc.ABC):
    """The latest content fingerprint of each page, and the lookup of other pages' near it.

    :meth:`exchange` is atomic per batch: pages are taken in batch order, each reads its
    previous fingerprint and the other pages near its new one (as left by the pages before it,
    from any worker), then stores its new fingerprint.
    """

    #: The strategy whose store this one shares (what messages show).
    strategy: ClassVar[str] = ""

    def __init__(self, max_distance: int, content_digest: str) -> None:
        #: k: a page within this many bits of a fingerprint is near it.
        self.max_distance = max_distance
        #: Digest of the content policy the stored SimHashes follow.
        self.content_digest = content_digest

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """Where the pages live, safe to print."""

    @abc.abstractmethod
    def exchange(self, batch: PageBatch) -> Step[List[Seen]]:
        """Read and write one batch (one round trip); per page, what it read before its write.

        The call raises, when performed, :class:`~crawldedup.stores.base.StoreUnavailable`
        when the store stayed unreachable (nothing was confirmed: the same batch exchanged
        again resumes the call, on the stores with receipts), and
        :class:`~crawldedup.stores.base.NamespaceConflict` for pages of another k or policy.
        """

    @abc.abstractmethod
    def bytes_per_page(self) -> Step[Optional[float]]:
        """Storage bytes per stored page, measured when performed; None while no page is stored."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the store holds (its own file; never the claim store's connection)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.description}>"
