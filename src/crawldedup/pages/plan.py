"""What every page store shares, without I/O: a batch's request, the store's answer, the verdicts.

A content check of a batch is three steps, and only the middle one talks to a store::

    PageBatch (page ids, SimHashes, canonical URLs)
      -> store.exchange(batch): per page, in batch order, its last stored fingerprint and the
         other pages' fingerprints that may lie within k bits, read just before its own new
         fingerprint replaces the old one
      -> judge(): per page, new / unchanged / changed / duplicate

Each store makes the middle step atomic for the whole batch (one Lua script, one SQLite
transaction, one lock); the verdicts are decided here, once, for all of them, so that every
store (and the async shells) answers alike.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..content.index import blocks

__all__ = [
    "CHANGED",
    "DUPLICATE",
    "INVALID",
    "NEW",
    "UNCHANGED",
    "VERDICTS",
    "PageBatch",
    "PageCheck",
    "Seen",
    "block_values",
    "distance",
    "judge",
    "judge_batch",
    "page_ids",
]

#: The page was never stored before.
NEW = "new"
#: Within k bits of the page's last stored fingerprint.
UNCHANGED = "unchanged"
#: More than k bits from the page's last stored fingerprint, and near no other page.
CHANGED = "changed"
#: Not within k bits of its own last fingerprint (or never stored), but within k of another page's.
DUPLICATE = "duplicate"
#: The URL was refused by the canonical policy: nothing was stored for it.
INVALID = "invalid"
VERDICTS = (NEW, UNCHANGED, CHANGED, DUPLICATE, INVALID)


class PageCheck(NamedTuple):
    """The verdict on one page of a batch.

    ``distance`` is the Hamming distance from the page's last stored fingerprint (``unchanged``,
    ``changed``) or from the fingerprint of ``duplicate_of``, the canonical URL of the other
    page (``duplicate``); None for ``new`` and ``invalid``. ``canonical`` is None when invalid.
    """

    verdict: str
    canonical: Optional[str]
    duplicate_of: Optional[str] = None
    distance: Optional[int] = None


class PageBatch(NamedTuple):
    """One batch as every store receives it: per page its id (the first 64 bits of its URL
    fingerprint, signed, see :func:`page_ids`), its new SimHash (unsigned) and canonical URL."""

    ids: List[int]
    simhashes: List[int]
    urls: List[str]


class Seen(NamedTuple):
    """What a store read for one page, just before writing its new fingerprint: the page's
    previous fingerprint (None when never stored) and ``(fingerprint, canonical URL)`` of other
    pages, among which every one within k bits (a store may include farther ones)."""

    previous: Optional[int]
    near: List[Tuple[int, str]]


def page_ids(hashes: np.ndarray) -> List[int]:
    """The page id of each row of a batch's ``(n, 2)`` URL fingerprints: ``h1`` as a signed int64.

    Signed, so that Redis keeps a set of ids as an intset (8 bytes a member). Two pages share
    an id with probability ``n**2 / 2**65``: 2.7e-6 at 10 million pages.
    """
    return hashes[:, 0].view(np.int64).tolist() if len(hashes) else []


def distance(a: int, b: int) -> int:
    """Hamming distance of two 64-bit fingerprints."""
    return bin(a ^ b).count("1")


def block_values(simhash: int, max_distance: int) -> List[int]:
    """The ``max_distance + 1`` blocks of a fingerprint (``content.index.blocks``), each as an int:
    two fingerprints within ``max_distance`` bits agree on at least one."""
    return [(simhash >> (64 - offset - width)) & ((1 << width) - 1) for offset, width in blocks(max_distance)]


def judge(simhash: int, seen: Seen, max_distance: int) -> Tuple[str, Optional[str], Optional[int]]:
    """The verdict, the page it duplicates and the distance, of one page from what its store read.

    Unchanged beats duplicate (a page that stays itself is not a copy of its neighbour), and a
    duplicate names the nearest other page (the smallest URL among equals, so that every store
    names the same one).
    """
    own = None if seen.previous is None else distance(seen.previous, simhash)
    if own is not None and own <= max_distance:
        return UNCHANGED, None, own
    nearest = min(((distance(other, simhash), url) for other, url in seen.near), default=None)
    if nearest is not None and nearest[0] <= max_distance:
        return DUPLICATE, nearest[1], nearest[0]
    return (NEW, None, None) if own is None else (CHANGED, None, own)


def judge_batch(batch: PageBatch, seen: Sequence[Seen], max_distance: int) -> List[PageCheck]:
    """:func:`judge` for each page of a batch, with its canonical URL."""
    checks = []
    for simhash, url, answer in zip(batch.simhashes, batch.urls, seen):
        verdict, other, bits = judge(simhash, answer, max_distance)
        checks.append(PageCheck(verdict, url, other, bits))
    return checks
