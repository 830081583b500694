"""The ``local`` strategy's pages: in memory, with an optional journal file beside the state file.

Each page's latest fingerprint is a dict entry (page id -> SimHash, canonical URL, index id)
and an entry of an in-memory :class:`~crawldedup.content.NearDuplicateIndex`. The index only
grows: a page whose fingerprint changes leaves its old entry behind, which a lookup ignores
(its index id is no longer the page's). About 380 bytes a page in memory (tracemalloc, 200,000
pages of 50-byte URLs); the journal, read back on open, rebuilds both.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..content import Matches, NearDuplicateIndex
from .base import PageStore
from .journal import PageJournal
from .plan import PageBatch, Seen

__all__ = ["LocalPages"]


class LocalPages(PageStore):
    """Pages of one process, kept in memory and, with ``path``, in a journal file.

    :param path: the journal (created when missing), or None for memory only.
    :raises PageFileError: for a journal of another k or policy, or a damaged one.
    """

    strategy = "local"

    def __init__(self, path: Optional[Path], *, max_distance: int, content_digest: str, canonical_digest: str) -> None:
        super().__init__(max_distance, content_digest)
        self._index = NearDuplicateIndex(max_distance)
        #: Page id -> (SimHash, canonical URL, id of its entry in the index).
        self._pages: Dict[int, Tuple[int, str, int]] = {}
        #: Index id -> page id.
        self._owners: List[int] = []
        self._lock = threading.Lock()
        self._journal = None if path is None else PageJournal(path, max_distance, content_digest, canonical_digest)
        if self._journal is not None:
            try:
                for ids, simhashes, urls in self._journal.read():
                    self._learn(ids.tolist(), simhashes.tolist(), urls)
            except BaseException:
                self._journal.close()
                raise

    @property
    def description(self) -> str:
        return f"local pages {str(self._journal.path)!r}" if self._journal is not None else "local pages in memory"

    def _learn(self, ids: List[int], simhashes: List[int], urls: List[str]) -> None:
        first = len(self._owners)
        self._index.add_many(np.asarray(simhashes, dtype=np.uint64))
        self._owners.extend(ids)
        for offset, (page, simhash, url) in enumerate(zip(ids, simhashes, urls)):
            self._pages[page] = (simhash, url, first + offset)

    def exchange(self, batch: PageBatch) -> List[Seen]:
        with self._lock:
            return self._exchange(batch)

    def _exchange(self, batch: PageBatch) -> List[Seen]:
        fingerprints = np.asarray(batch.simhashes, dtype=np.uint64)
        stored = self._by_query(self._index.query_many(fingerprints), len(batch.ids))
        within = NearDuplicateIndex(self.max_distance)
        within.add_many(fingerprints)
        earlier = self._by_query(within.query_many(fingerprints), len(batch.ids))
        # The batch's writes, in order: page id -> (SimHash, URL, index id), consulted before
        # self._pages and applied to it only once the journal holds them.
        written: Dict[int, Tuple[int, str, int]] = {}
        #: Page id -> position in the batch of its latest write.
        written_by: Dict[int, int] = {}
        appended: List[int] = []
        next_id = len(self._owners)
        seen = []
        for i, (page, simhash, url) in enumerate(zip(batch.ids, batch.simhashes, batch.urls)):
            current = written.get(page) or self._pages.get(page)
            near = []
            for entry in stored[i]:
                owner = self._owners[entry]
                record = written.get(owner) or self._pages[owner]
                if owner != page and record[2] == entry:
                    near.append((record[0], record[1]))
            for j in earlier[i]:
                other = batch.ids[j]
                if j < i and other != page and written_by.get(other) == j:
                    near.append((batch.simhashes[j], batch.urls[j]))
            seen.append(Seen(None if current is None else current[0], near))
            if current is None or current[0] != simhash:
                written[page] = (simhash, url, next_id + len(appended))
                written_by[page] = i
                appended.append(i)
        if appended:
            ids = [batch.ids[i] for i in appended]
            simhashes = [batch.simhashes[i] for i in appended]
            urls = [batch.urls[i] for i in appended]
            if self._journal is not None:
                self._journal.append(ids, simhashes, urls)
            self._learn(ids, simhashes, urls)
        return seen

    @staticmethod
    def _by_query(matches: Matches, count: int) -> List[List[int]]:
        """The index entries matched by each query of a batch."""
        rows: List[List[int]] = [[] for _ in range(count)]
        for query, entry in zip(matches.query.tolist(), matches.ids.tolist()):
            rows[query].append(entry)
        return rows

    def bytes_per_page(self) -> Optional[float]:
        if not self._pages:
            return None
        if self._journal is None:
            return float(self._index.bytes_per_fingerprint)
        return self._journal.path.stat().st_size / len(self._pages)

    def close(self) -> None:
        with self._lock:
            if self._journal is not None:
                pages = list(self._pages.items())
                self._journal.close(
                    (
                        np.array([p for p, _ in pages], dtype=np.int64),
                        np.array([r[0] for _, r in pages], dtype=np.uint64),
                        [r[1] for _, r in pages],
                    )
                )
