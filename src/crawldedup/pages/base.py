"""The interface of a page store: one atomic exchange per batch, measured size, close."""

from __future__ import annotations

import abc
from typing import ClassVar, List, Optional

from .plan import PageBatch, Seen

__all__ = ["PageStore"]


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
    def exchange(self, batch: PageBatch) -> List[Seen]:
        """Read and write one batch (one round trip); per page, what it read before its write.

        :raises StoreUnavailable: when the store stayed unreachable (nothing was written).
        """

    @abc.abstractmethod
    def bytes_per_page(self) -> Optional[float]:
        """Storage bytes per stored page, measured now; None while no page is stored."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the store holds (its own connection or file; never the claim store's)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.description}>"
