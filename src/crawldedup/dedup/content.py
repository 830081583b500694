"""Content checks of a Deduplicator: canonicalize, page ids, one page-store exchange, verdicts.

A plan (:mod:`crawldedup._plans`) around the one exchange: :meth:`ContentChecks.prepare` turns
the caller's URLs and SimHashes into a :class:`~crawldedup.pages.PageBatch`, the page store's
exchange is asked of the claim store's channel (a :class:`~crawldedup.dedup.pipeline.StoreAsk`
of ``perform``, which the blocking and the asyncio Deduplicator send alike), and
:meth:`ContentChecks.finish` turns its answer into one verdict per URL.
"""

from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

import numpy as np

from .._checks import check_batch
from .._plans import Plan
from ..canonical import InvalidURL
from ..content.index import as_fingerprints
from ..fingerprints import hash_many
from ..pages import INVALID, PageBatch, PageCheck, PageStore, Seen
from ..pages.base import Step
from ..pages.plan import judge_batch, page_ids
from ..stores.base import StoreCall
from .leases import URL
from .pipeline import StoreAsk

__all__ = ["ContentChecks", "PreparedPages"]

T = TypeVar("T")

Canonicalize = Callable[[Sequence[URL]], Tuple[List[Optional[str]], Dict[int, InvalidURL]]]


class PreparedPages(NamedTuple):
    """A batch ready for its exchange: the pages of the valid URLs, at ``positions`` of ``size``."""

    batch: PageBatch
    positions: List[int]
    size: int


class ContentChecks:
    """Opens the page store on first use (a Deduplicator that never checks content stores no pages).

    :param opener: makes the page store.
    :param max_distance: k of the verdicts.
    :param canonicalize: the Deduplicator's canonicalization of a batch.
    """

    def __init__(self, opener: Callable[[], PageStore], max_distance: int, canonicalize: Canonicalize) -> None:
        self._opener = opener
        self.max_distance = max_distance
        self._canonicalize = canonicalize
        self._pages: Optional[PageStore] = None

    @property
    def pages(self) -> PageStore:
        """The page store, opened now if it was not."""
        if self._pages is None:
            self._pages = self._opener()
        return self._pages

    @property
    def opened(self) -> bool:
        """Whether the page store was opened (a local one read its journal)."""
        return self._pages is not None

    def prepare(self, urls: Sequence[URL], fingerprints: Union[np.ndarray, Sequence[int]]) -> PreparedPages:
        """Check and canonicalize a batch (no I/O).

        :raises TypeError: for a single string, or fingerprints that are not ints.
        :raises ValueError: for fingerprints outside [0, 2**64) or of another length than ``urls``.
        """
        check_batch("urls", urls, "URLs")
        simhashes = as_fingerprints(fingerprints)
        if len(simhashes) != len(urls):
            raise ValueError(f"fingerprints must hold one SimHash per URL ({len(urls)}), got {len(simhashes)}")
        canonical, _ = self._canonicalize(urls)
        positions = [i for i, c in enumerate(canonical) if c is not None]
        valid = [canonical[i] for i in positions]
        ids = page_ids(hash_many(valid)) if valid else []
        chosen = simhashes[np.asarray(positions, dtype=np.intp)].tolist() if positions else []
        return PreparedPages(PageBatch(ids, chosen, valid), positions, len(canonical))  # type: ignore[arg-type]

    def finish(self, prepared: PreparedPages, seen: Sequence[Seen]) -> List[PageCheck]:
        """One verdict per URL of the prepared batch, from its store's answer (no I/O)."""
        checks = [PageCheck(INVALID, None)] * prepared.size
        for position, check in zip(prepared.positions, judge_batch(prepared.batch, seen, self.max_distance)):
            checks[position] = check
        return checks

    def plan(self, urls: Sequence[URL], fingerprints: Union[np.ndarray, Sequence[int]]) -> Plan[List[PageCheck]]:
        """:meth:`Deduplicator.check_content`, as a plan: prepare, one exchange, finish."""
        prepared = self.prepare(urls, fingerprints)
        seen: List[Seen] = []
        if prepared.positions:
            seen = yield from _sent(self.pages.exchange(prepared.batch))
        return self.finish(prepared, seen)

    def measure(self) -> Plan[Optional[float]]:
        """:meth:`Deduplicator.store_bytes_per_page`, as a plan."""
        return (yield from _sent(self.pages.bytes_per_page()))

    def close(self) -> None:
        if self._pages is not None:
            self._pages.close()


def _sent(step: Step[T]) -> Plan[T]:
    """A page store's step: its call asked of the claim store's channel, or its answer as it is."""
    if isinstance(step, StoreCall):
        return (yield StoreAsk("perform", (step,)))  # type: ignore[no-any-return]
    return step
