"""The seed filter of a namespace, downloaded once and consulted beside the local filter.

A namespace seeded by ``crawldedup migrate --from-state FILE`` holds the bytes of a local
state file (:mod:`crawldedup.stores.seed`). A Deduplicator that opens it downloads the file
into a temporary file, checks its digest, canonical policy and recrawl window, and maps it
read-only: a URL the seed holds is seen (never claimed, so never won), for every worker. The
seed is never written: a windowed seed forgets its pages as its generations age, as the
single-host crawl's file would have.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Optional

from .._plans import Plan
from ..bloom import LocalFilter, WindowedBloomFilter, open_filter
from ..stores.base import NamespaceConflict
from ..stores.seed import SeedLayout
from ..windows import Clock, Window
from .pipeline import StoreAsk

__all__ = ["Seed", "SeedIncomplete", "load_seed", "window_text"]


class SeedIncomplete(NamespaceConflict):
    """The namespace's seed is still being uploaded (or its upload was killed): workers must
    wait for ``crawldedup migrate --from-state`` to finish."""


def window_text(window: Optional[Window]) -> str:
    """How a seed record names a recrawl window."""
    return "none (claims never expire)" if window is None else window.describe()


class Seed:
    """A downloaded seed filter (read-only) and its temporary file.

    :ivar filter: the seed's filter: plain, or windowed (its pages age with the clock).
    """

    def __init__(self, bloom: LocalFilter, path: str) -> None:
        self.filter = bloom
        self._path: Optional[str] = path
        try:
            os.unlink(path)  # POSIX: the mapping stays; the file goes with the process
            self._path = None
        except OSError:  # pragma: no cover  (Windows: a mapped file is removed on close)
            pass

    def close(self) -> None:
        self.filter.close()
        if self._path is not None:  # pragma: no cover  (Windows)
            os.unlink(self._path)
            self._path = None


def load_seed(layout: SeedLayout, *, policy_digest: str, window: Optional[Window], clock: Clock) -> Plan[Optional[Seed]]:
    """Download the namespace's seed, as a plan of asks for the store's channel; None without one.

    :raises SeedIncomplete: while the seed is being uploaded.
    :raises NamespaceConflict: for a seed of another canonical policy or recrawl window, or
        whose bytes do not match its digest.
    """
    record = yield StoreAsk("perform", (layout.record(),))
    if record is None:
        return None
    where = f"the seed of namespace {layout.namespace!r} (from {record.source})"
    if not record.complete:
        raise SeedIncomplete(f"{where} is being uploaded ({record.uploaded} of {record.chunks} chunks): let "
                             f"crawldedup migrate --from-state finish (run it again if it was stopped), then start the workers")
    if record.policy != policy_digest:
        raise NamespaceConflict(f"{where} follows canonical policy {record.policy}, this Deduplicator uses "
                                f"policy {policy_digest}")
    digest = hashlib.blake2b(digest_size=32)
    descriptor, path = tempfile.mkstemp(prefix="crawldedup-seed-", suffix=".bloom")
    try:
        with os.fdopen(descriptor, "wb") as out:
            for index in range(record.chunks):
                data = yield StoreAsk("perform", (layout.get(index),))
                digest.update(data)
                out.write(data)
        if digest.hexdigest() != record.digest:
            raise NamespaceConflict(f"{where} is damaged (its bytes do not match its digest): seed the namespace "
                                    f"again with crawldedup migrate --from-state --restart")
        seed = Seed(open_filter(path, "r", clock=clock), path)
    except BaseException:
        if os.path.exists(path):
            os.unlink(path)
        raise
    has = seed.filter.window if isinstance(seed.filter, WindowedBloomFilter) else None
    if has != window:
        seed.close()
        raise NamespaceConflict(f"{where} was made for a recrawl window of {window_text(has)}, this Deduplicator "
                                f"uses {window_text(window)}: use the settings the seed was made with")
    return seed
