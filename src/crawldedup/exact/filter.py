"""ExactFilter: a Bloom filter in front of an exact set of 64-bit fingerprints (the exact tier).

The Bloom filter answers most questions alone: a key it does not hold is new, without a
lookup. A key it holds is confirmed in the tier's runs (:mod:`.store`), a batch at a time, so
a false positive of the filter costs a lookup, never a page. The key of the tier is the
fingerprint's first 64 bits (``h1``): two different pages share one with probability
``1 / 2**64``, so among ``n`` pages about ``n**2 / 2**65`` pairs collide (0.03 at 1e9, 2.7 at
1e10), and a collision makes a new page seen only when the filter also takes it for a seen one
(its error rate, 1% by default): 0.0003 pages expected at 1e9.

Files: the filter at ``path`` (a plain or windowed Bloom filter file, with its stage files when
it grew), the tier in the directory ``path + ".exact"`` beside it (docs/format.md). With a
recrawl window both forget a key after it, generation by generation. The filter always holds
every key the tier holds (it is written first); after a key the tier newly holds was found in
an older generation of a windowed filter, the filter adds it to the current one too, so it
never forgets a key before the tier does.
"""

from __future__ import annotations

import io
import itertools
import os
import threading
from typing import Any, Callable, Iterable, List, Optional, TypeVar

import numpy as np

from .._checks import PathArg, integer_in
from ..bloom import FilterKindError, Generation, GrowingFilter, Stage, as_hash_array
from ..fingerprints import check_keys, take_rows
from ..windows import Clock, Window, system_clock
from .format import ExactFileError
from .runs import Kernels
from .store import DEFAULT_BUFFER_KEYS, RunInfo, RunStore

__all__ = ["TIER_SUFFIX", "ExactFilterBase", "tier_directory"]

#: The tier's directory is the filter's path with this suffix.
TIER_SUFFIX = ".exact"
#: ``update`` adds keys in chunks of this many.
_UPDATE_CHUNK = 1 << 16
_NO_ROWS = np.zeros(0, dtype=np.intp)
_Exact = TypeVar("_Exact", bound="ExactFilterBase")


def tier_directory(path: PathArg) -> str:
    """The directory of the exact tier of the filter at ``path``."""
    return os.fspath(path) + TIER_SUFFIX


def _read_only_error() -> io.UnsupportedOperation:
    return io.UnsupportedOperation("the exact filter is read-only (opened with mode 'r')")


class ExactFilterBase:
    """A set of URL fingerprints that never takes a new one for a seen one (but for 64-bit
    collisions, see the module): a Bloom filter in front of sorted runs on disk.

    The API is the Bloom filter's (``add``, ``in``, ``add_many``, ``contains_many``, the hash
    forms, ``update``, ``flush``, ``close``, ``union``), with exact counts (``len``) and the
    tier's runs (:meth:`runs`, :meth:`merge`, :attr:`nbytes`).

    :param capacity: keys the Bloom filter is sized for (>= 1); past it the filter grows, the
        tier has no limit.
    :param error_rate: the Bloom filter's false-positive rate at capacity: the share of new
        keys that cost a lookup in the tier, never a lost one.
    :param path: the Bloom filter's file; the tier goes in ``path + ".exact"``. None keeps both
        in memory.
    :param window: a recrawl window: keys are forgotten after it, generation by generation.
    :param clock: the time source of the window.
    :param metadata: up to 1024 bytes stored in the Bloom filter's header for the layers above.
    :param overwrite: replace an existing filter and tier at ``path``.
    :param buffer_keys: keys kept in memory (and in the tier's log) before they are written as
        a run file.
    :raises ValueError: for a capacity or error rate out of range or of the wrong type (a wrong
        type is also a ``TypeError``).
    :raises TypeError: for a ``path`` that is not a ``str`` or path-like object.
    :raises FileExistsError: when ``path`` exists and ``overwrite`` is false.
    :raises BlockingIOError: when another process writes a tier at ``path``.
    """

    #: The twin: its run kernels, its Bloom filters and its hash (set by the selector).
    _kernels: Kernels
    _plain_bloom: Any
    _windowed_bloom: Any
    _hash_keys: Callable[[Iterable[Any]], np.ndarray]

    def __init__(
        self,
        capacity: int,
        error_rate: float,
        path: Optional[PathArg] = None,
        *,
        window: Optional[Window] = None,
        clock: Clock = system_clock,
        metadata: bytes = b"",
        overwrite: bool = False,
        buffer_keys: int = DEFAULT_BUFFER_KEYS,
    ) -> None:
        integer_in("buffer_keys", buffer_keys, 1, 1 << 40)
        if window is not None:
            bloom = self._windowed_bloom(
                capacity, error_rate, window, path, overwrite=overwrite, metadata=metadata, clock=clock
            )
        else:
            bloom = self._plain_bloom(capacity, error_rate, path, overwrite=overwrite, metadata=metadata)
        # The filter first: its file appears whole or not at all, so of two processes making one
        # state, one fails here. The tier beside it is then this one's to make.
        try:
            directory = tier_directory(path) if path is not None else None
            store = RunStore.create(self._kernels, directory, window, clock, buffer_keys)
        except BaseException:
            bloom.close()
            if path is not None:
                os.unlink(path)
            raise
        self._attach(GrowingFilter(bloom), store)

    @classmethod
    def open(
        cls: type[_Exact],
        path: PathArg,
        mode: str = "r",
        *,
        clock: Clock = system_clock,
        buffer_keys: int = DEFAULT_BUFFER_KEYS,
    ) -> _Exact:
        """Open an existing exact filter: ``"r"`` to query it (a snapshot of its runs), ``"r+"``
        to add to it as well.

        :raises ValueError: for another mode.
        :raises TypeError: for a ``path`` that is not a ``str`` or path-like object.
        :raises FilterFileError: when the Bloom filter file (or a stage) is missing or not valid.
        :raises ExactFileError: when the tier is missing, damaged (naming the file), or made for
            another window than the filter.
        :raises BlockingIOError: with ``"r+"``, when another process writes it.
        """
        integer_in("buffer_keys", buffer_keys, 1, 1 << 40)
        try:
            base = cls._plain_bloom.open(path, mode)
        except FilterKindError:
            base = cls._windowed_bloom.open(path, mode, clock=clock)
        bloom = GrowingFilter(base)
        directory = tier_directory(path)
        try:
            if mode == "r+" and not os.path.lexists(directory) and bloom.approx_items == 0:
                # Killed between making the filter and its tier: nothing was ever added.
                store = RunStore.create(cls._kernels, directory, bloom.window, clock, buffer_keys)
            elif not os.path.isdir(directory):
                raise ExactFileError(f"{directory}: missing: {os.fspath(path)} has no exact tier beside it")
            else:
                store = RunStore.open(cls._kernels, directory, mode == "r+", bloom.window, clock, buffer_keys)
        except BaseException:
            bloom.close()
            raise
        self = cls.__new__(cls)
        self._attach(bloom, store)
        return self

    def _attach(self, bloom: GrowingFilter, store: RunStore) -> None:
        self._bloom: Optional[GrowingFilter] = bloom
        self._store = store
        self._windowed = bloom.window is not None
        self._lock = threading.Lock()

    def _open_bloom(self) -> GrowingFilter:
        if self._bloom is None:
            raise ValueError("I/O operation on closed filter")
        return self._bloom

    # -- keys ----------------------------------------------------------------------------------

    def add_hashes(self, hashes: Any) -> np.ndarray:
        """Add keys already hashed by ``hash_many``, in order; True where the key was new.

        A key the Bloom filter does not hold is new; one it holds is looked up in the tier.
        A key repeated in the batch is new at its first place only.

        :raises TypeError: for another dtype.
        :raises ValueError: for another shape, or when the filter is closed.
        :raises io.UnsupportedOperation: when the filter is read-only.
        :raises OSError: when the disk cannot hold the new keys (they are then not added).
        """
        with self._lock:
            bloom = self._open_bloom()
            if bloom.read_only:
                raise _read_only_error()
            hashes = as_hash_array(hashes)
            new = bloom.add_hashes(hashes)  # the filter first: it always holds what the tier holds
            keys = hashes[:, 0]
            held = np.flatnonzero(~new)
            fresh = _NO_ROWS
            if len(held):
                fresh = held[~self._store.contains(keys[held])]  # the filter's false positives
                new[fresh] = True
            rows = np.flatnonzero(new)
            ordered = self._kernels.sort_keys(keys[rows])
            if len(ordered) > 1 and bool((ordered[1:] == ordered[:-1]).any()):
                # A key repeated in the batch (or two pages' fingerprints sharing h1): new once.
                ordered, first = np.unique(keys[rows], return_index=True)
                rows = rows[np.sort(first)]
                new[:] = False
                new[rows] = True
                fresh = fresh[new[fresh]]
            if self._windowed and len(fresh):
                bloom.add_hashes(take_rows(hashes, fresh), renew=True)
            self._store.add(keys[rows], ordered)
        return new

    def contains_hashes(self, hashes: Any) -> np.ndarray:
        """Per key already hashed by ``hash_many``, True when the set holds it (exact, but for
        64-bit collisions).

        :raises TypeError: for another dtype.
        :raises ValueError: for another shape, or when the filter is closed.
        """
        with self._lock:
            hashes = as_hash_array(hashes)
            found = self._open_bloom().contains_hashes(hashes)
            rows = np.flatnonzero(found)
            if len(rows):
                found[rows] = self._store.contains(hashes[rows, 0])
        return found

    def add_many(self, items: Iterable[Any]) -> np.ndarray:
        """Add keys (``str`` or bytes-like) in order; True where the key was new.

        :raises TypeError: for a single key (a ``str`` or bytes, not a batch), or a key that is
            neither ``str`` nor bytes-like (nothing is added).
        """
        return self.add_hashes(self._hash_keys(items))

    def contains_many(self, items: Iterable[Any]) -> np.ndarray:
        """Per key, True when the set holds it.

        :raises TypeError: for a single key (a ``str`` or bytes, not a batch), or a key that is
            neither ``str`` nor bytes-like.
        """
        return self.contains_hashes(self._hash_keys(items))

    def add(self, item: Any) -> bool:
        """Add one key; True when it was new.

        :raises TypeError: for a key that is neither ``str`` nor bytes-like.
        """
        return bool(self.add_many([item])[0])

    def __contains__(self, item: Any) -> bool:
        return bool(self.contains_many([item])[0])

    def update(self, items: Iterable[Any]) -> None:
        """Add every key of ``items`` (any iterable, consumed in chunks).

        :raises TypeError: for a single key (a ``str`` or bytes: its characters are not keys), or
            a key that is neither ``str`` nor bytes-like.
        """
        check_keys(items)
        iterator = iter(items)
        while True:
            chunk = list(itertools.islice(iterator, _UPDATE_CHUNK))
            if not chunk:
                return
            self.add_many(chunk)

    # -- life cycle ----------------------------------------------------------------------------

    def flush(self) -> None:
        """Make everything durable (fsync): the Bloom filter, the tier's log, runs and manifest.

        :raises ValueError: when the filter is closed.
        """
        with self._lock:
            bloom = self._open_bloom()
            bloom.flush()
            self._store.flush()

    def close(self) -> None:
        """Flush and release the files; closing twice is allowed."""
        with self._lock:
            if self._bloom is None:
                return
            bloom, self._bloom = self._bloom, None
            try:
                self._store.close()
            finally:
                bloom.close()

    def merge(self) -> None:
        """Merge each generation's runs (the in-memory ones too) into one run file."""
        with self._lock:
            self._open_bloom()
            self._store.compact()

    def union(self: _Exact, other: ExactFilterBase) -> _Exact:
        """Add every key of ``other`` here: the Bloom filters ORed (the same shape, neither grown,
        the same window), the keys this tier lacks added to their generation.

        :raises TypeError: when ``other`` is not an exact filter.
        :raises ValueError: when the filters differ in shape or window, or either grew.
        """
        if not isinstance(other, ExactFilterBase):
            raise TypeError(f"can only union with another exact filter, got {type(other).__name__}")
        with self._lock:
            mine, theirs = self._open_bloom(), other._open_bloom()
            if mine.grown or theirs.grown:
                raise ValueError("cannot union exact filters whose Bloom filter grew past its capacity")
            if mine.read_only:
                raise _read_only_error()
            mine.base.union(theirs.base)
            self._store.absorb(other._store)
        return self

    @property
    def closed(self) -> bool:
        return self._bloom is None

    def __enter__(self: _Exact) -> _Exact:
        self._open_bloom()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- what it holds -------------------------------------------------------------------------

    def __len__(self) -> int:
        """The keys it holds (the live generations'), exactly."""
        with self._lock:
            self._open_bloom()
            return len(self._store)

    @property
    def approx_items(self) -> int:
        """The keys it holds: exact here (the Bloom filter's name for it)."""
        return len(self)

    @property
    def bloom(self) -> GrowingFilter:
        """The Bloom filter in front."""
        return self._open_bloom()

    @property
    def capacity(self) -> int:
        """Keys the Bloom filter's stages are sized for."""
        return self.bloom.capacity

    @property
    def error_rate(self) -> float:
        """The Bloom filter's false-positive rate: the share of new keys that cost a lookup."""
        return self.bloom.error_rate

    @property
    def fill_ratio(self) -> float:
        """The Bloom filter's fraction of bits set (scans them)."""
        return self.bloom.fill_ratio

    @property
    def estimated_error_rate(self) -> float:
        """The chance that a new key is taken for a held one now: the Bloom filter's false
        positive rate (from its fill) times the chance that the key's 64 bits equal a held key's."""
        return self.bloom.estimated_error_rate * len(self) / 2.0**64

    @property
    def expected_error_rate(self) -> float:
        """As :attr:`estimated_error_rate`, from the Bloom filter's counts (no scan)."""
        return self.bloom.expected_error_rate * len(self) / 2.0**64

    @property
    def num_bits(self) -> int:
        """The Bloom filter's bits."""
        return self.bloom.num_bits

    @property
    def nbytes(self) -> int:
        """Bytes of the whole set: the Bloom filter (every stage) and the tier (runs, log, manifest)."""
        return self.bloom.num_bits // 8 + self._store.nbytes

    def runs(self) -> List[RunInfo]:
        """The tier's runs, oldest first, then those in memory."""
        with self._lock:
            self._open_bloom()
            return self._store.runs()

    def stages(self) -> List[Stage]:
        """The Bloom filter's stages."""
        return self.bloom.stages()

    @property
    def grown(self) -> bool:
        return self.bloom.grown

    @property
    def window(self) -> Optional[Window]:
        return self.bloom.window

    def generations(self) -> List[Generation]:
        """The live generations, oldest first, with the keys each holds (exact)."""
        with self._lock:
            counts = self._store.generation_keys()
            return [g._replace(approx_items=counts.get(g.generation, 0)) for g in self._open_bloom().generations()]

    @property
    def metadata(self) -> bytes:
        return self.bloom.metadata

    @property
    def path(self) -> Optional[str]:
        """The Bloom filter's file; the tier is ``path + ".exact"``."""
        return self.bloom.path

    @property
    def directory(self) -> Optional[str]:
        """The tier's directory (None in memory)."""
        return self._store.directory

    @property
    def read_only(self) -> bool:
        return self.bloom.read_only

    def __repr__(self) -> str:
        if self._bloom is None:
            return f"<{type(self).__name__} closed>"
        return (
            f"<{type(self).__name__} path={self.path!r} capacity={self.capacity} error_rate={self.error_rate!r} "
            f"keys={len(self)} runs={len(self.runs())}>"
        )
