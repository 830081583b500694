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
from typing import List, Optional

from .._plans import Plan
from ..bloom import GrowingFilter, open_filter_file
from ..bloom.growing import stage_path
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
    """A downloaded seed filter (read-only) and its temporary files.

    :ivar filter: the seed's filter, with the stages it grew; a windowed one ages with the clock.
    """

    def __init__(self, bloom: GrowingFilter, paths: List[str]) -> None:
        self.filter = bloom
        self._paths = _removed(paths)  # POSIX: the mappings stay; the files go with the process

    def close(self) -> None:
        self.filter.close()
        self._paths = _removed(self._paths)


def _removed(paths: List[str]) -> List[str]:
    """Remove the files at ``paths``; those that cannot be removed yet (Windows: mapped)."""
    kept = []
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:  # pragma: no cover  (Windows: a mapped file is removed once closed)
            kept.append(path)
    return kept


def load_seed(
    layout: SeedLayout, *, policy_digest: str, window: Optional[Window], clock: Clock
) -> Plan[Optional[Seed]]:
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
        raise SeedIncomplete(
            f"{where} is being uploaded ({record.uploaded} of {record.chunks} chunks): let "
            f"crawldedup migrate --from-state finish (run it again if it was stopped), then start the workers"
        )
    if record.policy != policy_digest:
        raise NamespaceConflict(
            f"{where} follows canonical policy {record.policy}, this Deduplicator uses policy {policy_digest}"
        )
    digest = hashlib.blake2b(digest_size=32)
    descriptor, base = tempfile.mkstemp(prefix="crawldedup-seed-", suffix=".bloom")
    os.close(descriptor)
    sizes = [int(size) for size in record.parts.split(",")]
    paths = [base] + [stage_path(base, index) for index in range(1, len(sizes))]
    try:
        files = iter(zip(paths, sizes))
        path, left = next(files)
        out = open(path, "wb")
        try:
            for index in range(record.chunks):
                data = memoryview((yield StoreAsk("perform", (layout.get(index),))))
                digest.update(data)
                while len(data):
                    while not left:
                        out.close()
                        path, left = next(files)
                        out = open(path, "wb")
                    out.write(data[:left])
                    left, data = left - len(data[:left]), data[left:]
        finally:
            out.close()
        if digest.hexdigest() != record.digest:
            raise NamespaceConflict(
                f"{where} is damaged (its bytes do not match its digest): seed the namespace "
                f"again with crawldedup migrate --from-state --restart"
            )
        seed = Seed(GrowingFilter(open_filter_file(base, "r", clock=clock)), paths)
    except BaseException:
        _removed(paths)
        raise
    has = seed.filter.window
    if has != window:
        seed.close()
        raise NamespaceConflict(
            f"{where} was made for a recrawl window of {window_text(has)}, this Deduplicator "
            f"uses {window_text(window)}: use the settings the seed was made with"
        )
    return seed
