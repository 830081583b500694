"""A local filter that grows past its capacity: stages, as in Scalable Bloom Filters.

Almeida, Baquero, Preguiça and Hutchison, "Scalable Bloom Filters" (2007): when a filter is
full, start a new one ``GROWTH`` times larger and tighten its error rate by ``TIGHTENING``, so
the false-positive rates of all stages sum to at most the one asked for:

    stage 0 (the filter as made):    full when its exact rate reaches  e (1 - r)
    stage i >= 1:  capacity c s^i,   error rate and full at            e (1 - r) r^i
    a lookup misses every stage:     rate <= sum e (1 - r) r^i  <  e

Stage 0 is the file at ``path``, unchanged until it grows (a plain v1 or windowed v2 file,
sized for ``capacity`` at ``e``: it is full at about 87% of ``capacity``). Stage ``i`` is a
filter of the same kind in its own file, ``stage_path(path, i)``, stamped ``crawldedup-stage/1``;
the base file's header counts the stages (format v3). A key is seen when any stage holds it
(one block read per stage for a miss); an add puts a key that no stage holds into the newest.

Growing is crash-safe without a journal: the new stage's file is made complete and empty under
a temporary name and renamed into place, then the base header's count is raised. A process
killed in between leaves an orphan stage file that nothing reads (the next growth replaces
it); no stage that holds a key is written by a growth.

Growth needs the base file to itself: compiled writers may share a file (atomic ORs), but two
of them growing at once would each make the next stage. A filter that is full while other
processes write it does not grow; it logs once that it is full and goes on filling its newest
stage (its false-positive rate then rises above ``error_rate``), and grows at the first batch
it makes alone. Readers (mode ``"r"``) follow a writer's growth at their next call.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from typing import Any, Iterable, List, NamedTuple, Optional

import numpy as np

from ..fingerprints import hash_one, take_rows
from ..windows import Window
from ._base import FilterBase, as_hash_array
from .format import MAX_STAGES, FilterFileError
from .sizing import expected_false_positive_rate, items_within
from .windowed import Generation, WindowedFilterBase

__all__ = ["GROWTH", "TIGHTENING", "GrowingFilter", "Stage", "stage_parameters", "stage_path"]

LOG = logging.getLogger("crawldedup.bloom")
#: s: each stage holds this many times the keys of the one before.
GROWTH = 4
#: r: each stage's error rate is this fraction of the one before.
TIGHTENING = 0.5
#: First word of a stage file's metadata.
STAGE_STAMP = b"crawldedup-stage/1"


class Stage(NamedTuple):
    """One stage of a filter: what ``info`` and the CLI summary print."""

    number: int
    path: Optional[str]
    capacity: int
    error_rate: float
    #: The stage's shape (one slot's, when windowed).
    num_blocks: int
    num_hashes: int
    approx_items: int
    #: The keys at which the stage is full and the filter grows.
    full_at: int


def stage_path(path: str, index: int) -> str:
    """The file of stage ``index`` (>= 1) of the filter at ``path``."""
    return f"{path}.stage{index}"


def stage_parameters(capacity: int, error_rate: float, index: int) -> tuple[int, float]:
    """``(capacity, error rate)`` stage ``index`` >= 1 is made with, from stage 0's."""
    return capacity * GROWTH**index, error_rate * (1.0 - TIGHTENING) * TIGHTENING**index


class GrowingFilter:
    """A plain or windowed filter that adds a stage when its newest one is full (see the module).

    It answers like the filter it wraps (``add``, ``in``, ``add_many``, ``contains_many``, the
    hash forms, ``flush``, ``close``), with ``capacity`` the keys all its stages are sized for
    and :meth:`stages` the detail. It wraps a new or opened filter, its first stage:
    ``GrowingFilter(BloomFilter(capacity, error_rate, path))``; ``open_filter`` opens a grown
    file as one.
    """

    def __init__(self, base: FilterBase) -> None:
        """Wrap ``base`` (stage 0) and open the stages its header counts.

        :raises FilterFileError: when a stage file is missing or not this filter's stage.
        """
        self._base = base
        self._lock = threading.Lock()
        self._refused = False
        self._stages: List[FilterBase] = [base]
        self._full_at: List[int] = [self._threshold(base, 0)]
        try:
            self._follow(base.mapped_file().header.stages)
        except BaseException:
            self.close()
            raise

    # -- stages ------------------------------------------------------------------------------

    @staticmethod
    def _threshold(stage: FilterBase, index: int) -> int:
        """The keys at which ``stage`` is full: its exact rate reaches its share of the total
        (stage 0 was made for the whole error rate, stage i >= 1 for its share)."""
        header = stage.mapped_file().header
        share = header.error_rate * (1.0 - TIGHTENING) if index == 0 else header.error_rate
        return items_within(header.num_blocks, header.num_hashes, share, 4 * header.capacity)

    def _follow(self, stages: int) -> None:
        """Open the stage files up to ``stages`` that this process has not opened yet."""
        base = self._base
        header = base.mapped_file().header
        mode = "r" if base.read_only else "r+"
        while len(self._stages) <= stages:
            index = len(self._stages)
            path = stage_path(str(base.path), index)
            try:
                stage = (
                    type(base).open(path, mode, clock=base._clock)
                    if isinstance(base, WindowedFilterBase)
                    else type(base).open(path, mode)
                )
            except FilterFileError as exc:
                raise FilterFileError(f"{base.path}: stage {index} of {stages}: {exc}") from None
            wanted = (*stage_parameters(header.capacity, header.error_rate, index), STAGE_STAMP + b" stage=%d" % index)
            found = (stage.capacity, stage.error_rate, stage.metadata)
            if found != wanted:
                stage.close()
                raise FilterFileError(
                    f"{path}: not stage {index} of {base.path} (capacity {found[0]}, "
                    f"error rate {found[1]!r}, metadata {found[2]!r})"
                )
            self._add_stage(stage)

    def _add_stage(self, stage: FilterBase) -> None:
        self._full_at = self._full_at + [self._threshold(stage, len(self._stages))]
        self._stages = self._stages + [stage]  # a new list: lookups iterate a snapshot

    def _grow(self) -> bool:
        """Start the next stage; False (logged once) when other writers share the file."""
        base = self._base
        file = base.mapped_file()
        index = len(self._stages)
        if index > MAX_STAGES:
            return self._refuse(f"it has {MAX_STAGES} stages, the most a filter can have")
        with file.plain_or() as alone:
            if not alone:
                return self._refuse("other processes write it, and a filter grows only with its file to itself")
            capacity, error_rate = stage_parameters(base.capacity, base.error_rate, index)
            path = None if base.path is None else stage_path(base.path, index)
            metadata = STAGE_STAMP + b" stage=%d" % index
            if isinstance(base, WindowedFilterBase):
                stage: FilterBase = type(base)(
                    capacity, error_rate, base.window, path, overwrite=True, metadata=metadata, clock=base._clock
                )
            else:
                stage = type(base)(capacity, error_rate, path, overwrite=True, metadata=metadata)
            file.write_header(dataclasses.replace(file.header, stages=index))  # the stage counts from here
        self._add_stage(stage)
        self._refused = False
        LOG.info(
            "filter %s grew: stage %d holds %d keys at error rate %g",
            base.path or "(memory)",
            index,
            capacity,
            error_rate,
        )
        return True

    def _refuse(self, why: str) -> bool:
        if not self._refused:
            LOG.warning(
                "filter %s is full (~%d keys) and does not grow: %s; its false-positive rate now rises above %g",
                self._base.path or "(memory)",
                self.approx_items,
                why,
                self.error_rate,
            )
            self._refused = True
        return False

    def _current(self) -> List[FilterBase]:
        """The stages, after following a writer's growth when this filter only reads."""
        file = self._base.mapped_file()
        if file.read_only:
            stored = file.stored_stages()
            if stored >= len(self._stages):
                with self._lock:
                    self._follow(stored)
        return self._stages

    # -- keys --------------------------------------------------------------------------------

    def contains_hashes(self, hashes: Any) -> np.ndarray:
        """Per key already hashed by ``hash_many``, True when some stage probably holds it.

        :raises TypeError: for another dtype.
        :raises ValueError: for another shape, or when the filter is closed.
        """
        hashes = as_hash_array(hashes)
        stages = self._current()
        found = stages[0].contains_hashes(hashes)
        for stage in stages[1:]:
            rest = np.flatnonzero(~found)
            if not len(rest):
                break
            found[rest] = stage.contains_hashes(take_rows(hashes, rest))
        return found

    def add_hashes(self, hashes: Any) -> np.ndarray:
        """Add keys already hashed by ``hash_many``, in order; True where the key was new (in no
        stage). The newest stage takes them until it is full, then the filter grows.

        :raises TypeError: for another dtype.
        :raises ValueError: for another shape, or when the filter is closed.
        :raises io.UnsupportedOperation: when the filter is read-only.
        """
        hashes = as_hash_array(hashes)
        with self._lock:
            stages = self._stages
            new = np.ones(len(hashes), dtype=bool)
            for stage in stages[:-1]:
                rest = np.flatnonzero(new)
                new[rest] = ~stage.contains_hashes(take_rows(hashes, rest))
            waiting = np.flatnonzero(new)
            while len(waiting):
                newest = self._stages[-1]
                room = self._full_at[-1] - newest.approx_items
                if room <= 0 and self._grow():
                    # Keys earlier in this batch may have gone into the stage that just filled.
                    held = newest.contains_hashes(take_rows(hashes, waiting))
                    new[waiting[held]] = False
                    waiting = waiting[~held]
                    continue
                taken = waiting if room <= 0 else waiting[:room]
                new[taken] = self._stages[-1].add_hashes(take_rows(hashes, taken))
                waiting = waiting[len(taken) :]
        return new

    def add_many(self, items: Iterable[Any]) -> np.ndarray:
        """Add keys in order; True where the key was new when added."""
        return self.add_hashes(self._base._hash_keys(items))

    def contains_many(self, items: Iterable[Any]) -> np.ndarray:
        """Per key, True when some stage probably holds it."""
        return self.contains_hashes(self._base._hash_keys(items))

    def add(self, item: Any) -> bool:
        """Add one key; True when it was new."""
        return bool(self.add_hashes(np.array([hash_one(item)], dtype=np.uint64))[0])

    def __contains__(self, item: Any) -> bool:
        """True when some stage probably holds ``item``."""
        return bool(self.contains_hashes(np.array([hash_one(item)], dtype=np.uint64))[0])

    # -- what it holds -----------------------------------------------------------------------

    def stages(self) -> List[Stage]:
        """Every stage, the first (the filter as made) first."""
        return [
            Stage(
                index,
                stage.path,
                stage.capacity,
                stage.error_rate,
                stage.num_blocks,
                stage.num_hashes,
                stage.approx_items,
                full_at,
            )
            for index, (stage, full_at) in enumerate(zip(self._current(), self._full_at))
        ]

    @property
    def grown(self) -> bool:
        """True once the filter has more than its first stage."""
        return len(self._current()) > 1

    @property
    def base(self) -> FilterBase:
        """Stage 0: the filter as made, at ``path``."""
        return self._base

    @property
    def capacity(self) -> int:
        """The keys all the stages are sized for (the capacity asked for, until it grows)."""
        return sum(stage.capacity for stage in self._current())

    @property
    def error_rate(self) -> float:
        """The false-positive rate asked for: every stage together stays at or under it."""
        return self._base.error_rate

    @property
    def approx_items(self) -> int:
        """Approximate number of keys in all the stages (live generations only, when windowed)."""
        return sum(stage.approx_items for stage in self._current())

    @property
    def num_bits(self) -> int:
        """The bits of all the stages."""
        return sum(stage.num_bits for stage in self._current())

    @property
    def fill_ratio(self) -> float:
        """The fraction of bits set, over all the stages' bits (scans them)."""
        stages = self._current()
        return sum(stage.fill_ratio * stage.num_bits for stage in stages) / sum(stage.num_bits for stage in stages)

    @property
    def estimated_error_rate(self) -> float:
        """The false-positive rate now, from the fill of every stage's blocks (scans them)."""
        return 1.0 - math.prod(1.0 - stage.estimated_error_rate for stage in self._current())

    @property
    def expected_error_rate(self) -> float:
        """The false-positive rate now from each stage's count (no scan: cheap enough per batch)."""
        miss = 1.0
        for stage in self._current():
            miss *= 1.0 - expected_false_positive_rate(stage.approx_items, stage.num_blocks, stage.num_hashes)
        return 1.0 - miss

    @property
    def window(self) -> Optional[Window]:
        """The recrawl window (every stage has it), or None for a filter that never forgets."""
        return self._base.window if isinstance(self._base, WindowedFilterBase) else None

    def generations(self) -> List[Generation]:
        """The live generations of the first stage (``[]`` without a window)."""
        return self._base.generations() if isinstance(self._base, WindowedFilterBase) else []

    @property
    def metadata(self) -> bytes:
        """The first stage's metadata (the state file's stamp)."""
        return self._base.metadata

    @property
    def path(self) -> Optional[str]:
        """The first stage's file; stage ``i`` is at ``stage_path(path, i)``."""
        return self._base.path

    @property
    def read_only(self) -> bool:
        """True when opened with mode ``"r"``."""
        return self._base.read_only

    @property
    def closed(self) -> bool:
        """True once ``close`` has been called."""
        return self._base.closed

    def flush(self) -> None:
        """Flush every stage (msync)."""
        for stage in self._stages:
            stage.flush()

    def close(self) -> None:
        """Close every stage, the first last; closing twice is allowed."""
        for stage in reversed(self._stages):
            stage.close()

    def __enter__(self) -> GrowingFilter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return f"<{type(self).__name__} closed>"
        return (
            f"<{type(self).__name__} path={self.path!r} stages={len(self._stages)} capacity={self.capacity} "
            f"error_rate={self.error_rate!r} approx_items={self.approx_items}>"
        )
