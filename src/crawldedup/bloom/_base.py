"""What both Bloom filter twins share: life cycle, statistics, union, copy and repr.

A twin adds the hot paths (``add``, ``__contains__``, the batch calls) and two hooks:
``_map_bits(file)`` takes its view of the blocks, ``_unmap_bits()`` drops it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import itertools
import threading
from typing import Any, Iterable, Iterator, Optional, TypeVar

import numpy as np

from .._checks import PathArg
from .._wording import counted
from ..fingerprints import py_hash_many
from .format import BLOCK_BITS, Header, check_parameters
from .sizing import choose_shape
from .storage import BloomFile

#: ``update`` feeds ``add_many`` in chunks of this many keys: large enough to amortise the
#: call, small enough (~5 MB of hashes and pointers) that an endless iterable is fine.
UPDATE_CHUNK = 1 << 16

_Filter = TypeVar("_Filter", bound="FilterBase")


def closed_error() -> ValueError:
    """The error for any operation on a closed filter, worded like Python's for closed files."""
    return ValueError("I/O operation on closed filter")


def read_only_error() -> io.UnsupportedOperation:
    """The error for adding to a filter opened with mode ``"r"``."""
    return io.UnsupportedOperation("filter is read-only (opened with mode 'r')")


def as_hash_array(hashes: Any) -> np.ndarray:
    """Return ``hashes`` as a C-contiguous ``(n, 2)`` uint64 array, as ``hash_many`` makes.

    :raises TypeError: for arrays whose dtype does not convert to uint64 without loss.
    :raises ValueError: for any shape other than ``(n, 2)``.
    """
    array = np.asarray(hashes)
    if array.size == 0 and array.dtype == np.float64:
        array = array.astype(np.uint64)  # an empty list
    if not np.can_cast(array.dtype, np.uint64, casting="safe"):
        raise TypeError(f"hashes must be an unsigned 64-bit integer array, got dtype {array.dtype}")
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"hashes must have shape (n, 2), got {array.shape}")
    return np.ascontiguousarray(array, dtype=np.uint64)


class FilterBase:
    """The part of a Bloom filter that does not depend on how the bits are probed."""

    _file: Optional[BloomFile]
    _count: int
    _lock: threading.Lock
    _busy: int
    #: Whether the twin can set bits with atomic ORs, and so share a file with other writers.
    _ATOMIC_OR = False
    #: Whether the filter has a recrawl window (format v2, :mod:`.windowed`).
    _WINDOWED = False
    #: How ``add_many`` and ``contains_many`` hash their keys: the twin's ``hash_many``.
    _hash_keys = staticmethod(py_hash_many)

    def __init__(
        self,
        capacity: int,
        error_rate: float,
        path: Optional[PathArg] = None,
        *,
        overwrite: bool = False,
        metadata: bytes = b"",
    ) -> None:
        check_parameters(capacity, error_rate, metadata)
        num_blocks, num_hashes = choose_shape(capacity, float(error_rate))
        header = Header(capacity, float(error_rate), num_blocks, num_hashes, metadata)
        self._attach(BloomFile.create(header, path, overwrite, self._ATOMIC_OR))

    @classmethod
    def open(cls: type[_Filter], path: PathArg, mode: str = "r") -> _Filter:
        """Open an existing filter file: ``"r"`` to query it, ``"r+"`` to add to it as well.

        :raises ValueError: for another mode.
        :raises FilterFileError: when the path is missing, a directory or not a valid filter.
        :raises BlockingIOError: with ``"r+"``, when another process writes the file and one of
            the two is the pure-Python filter, which cannot share it.
        """
        self = cls.__new__(cls)
        self._attach(BloomFile.open(path, mode, cls._ATOMIC_OR))
        return self

    def _attach(self, file: BloomFile) -> None:
        self._file = file
        self._count = file.header.approx_items
        self._lock = threading.Lock()
        self._busy = 0
        self._map_bits(file)

    def _map_bits(self, file: BloomFile) -> None:
        raise NotImplementedError

    def _unmap_bits(self) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[BloomFile]:
        """Hold the filter's lock, and flag it busy so single calls wait for it too.

        Batch calls hold it while the GIL is released: concurrent adds of one key then give
        exactly one True, and ``close`` cannot unmap the bits under a running probe.
        """
        with self._lock:
            file = self.mapped_file()
            self._busy += 1
            try:
                yield file
            finally:
                self._busy -= 1

    def mapped_file(self) -> BloomFile:
        """The filter's mapped file (its header, blocks and path), for the filter layer's own
        modules and the CLI's ``info``.

        :raises ValueError: once the filter is closed.
        """
        if self._file is None:
            raise closed_error()
        return self._file

    def _header(self) -> Header:
        return self.mapped_file().header

    # -- life cycle -------------------------------------------------------------------------

    def update(self, items: Iterable[Any]) -> None:
        """Add every key of ``items`` (any iterable, consumed in chunks).

        :raises TypeError: for a key that is neither ``str`` nor bytes-like.
        :raises io.UnsupportedOperation: when the filter is read-only.
        """
        iterator = iter(items)
        while True:
            chunk = list(itertools.islice(iterator, UPDATE_CHUNK))
            if not chunk:
                return
            self.add_many(chunk)

    def add_hashes(self, hashes: Any) -> np.ndarray:
        raise NotImplementedError

    def contains_hashes(self, hashes: Any) -> np.ndarray:
        raise NotImplementedError

    def add_many(self, items: Iterable[Any]) -> np.ndarray:
        """Add keys in order; return a bool array, True where the key was new when added.

        :raises TypeError: for a key that is neither ``str`` nor bytes-like (nothing is added).
        :raises io.UnsupportedOperation: when the filter is read-only.
        :raises ValueError: when the filter is closed.
        """
        return self.add_hashes(self._hash_keys(items))

    def contains_many(self, items: Iterable[Any]) -> np.ndarray:
        """Return a bool array, True where the key is probably in the filter.

        :raises TypeError: for a key that is neither ``str`` nor bytes-like.
        :raises ValueError: when the filter is closed.
        """
        return self.contains_hashes(self._hash_keys(items))

    def flush(self) -> None:
        """Write the mapped bits and the current count to disk (msync); a no-op in memory.

        :raises ValueError: when the filter is closed.
        """
        self.mapped_file().flush(self._count)

    def close(self) -> None:
        """Mark the file cleanly closed and unmap it; closing twice is allowed."""
        with self._lock:
            if self._file is None:
                return
            self._unmap_bits()
            file, self._file = self._file, None
            file.close(self._count)

    @property
    def closed(self) -> bool:
        """True once ``close`` has been called."""
        return self._file is None

    def __enter__(self: _Filter) -> _Filter:
        self.mapped_file()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- shape and statistics ---------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """The number of keys the filter was sized for."""
        return self._header().capacity

    @property
    def error_rate(self) -> float:
        """The false-positive rate requested at ``capacity`` keys."""
        return self._header().error_rate

    @property
    def num_blocks(self) -> int:
        """The number of 64-byte blocks."""
        return self._header().num_blocks

    @property
    def num_bits(self) -> int:
        """The size of the bit array (``num_blocks * 512``)."""
        return self._header().num_blocks * BLOCK_BITS

    @property
    def num_hashes(self) -> int:
        """The number of bits each key sets in its block (k)."""
        return self._header().num_hashes

    @property
    def metadata(self) -> bytes:
        """The free field set at creation (at most 1024 bytes) for the layers above."""
        return self._header().metadata

    @property
    def path(self) -> Optional[str]:
        """The file's path, or None for a filter in anonymous memory."""
        return self.mapped_file().path

    @property
    def read_only(self) -> bool:
        """True when opened with mode ``"r"``."""
        return self.mapped_file().read_only

    @property
    def approx_items(self) -> int:
        """Approximate number of keys added: adds that returned True, or a recount from the bits
        after an unclean close. There is no ``len()``, which would promise an exact count."""
        self.mapped_file()
        return self._count

    @property
    def fill_ratio(self) -> float:
        """The fraction of bits set (scans the bit array)."""
        with self._exclusive() as file:
            return file.fill_ratio()

    @property
    def estimated_error_rate(self) -> float:
        """The false-positive rate now, from the fill of each block (scans the bit array)."""
        with self._exclusive() as file:
            return file.estimated_error_rate()

    def __repr__(self) -> str:
        if self._file is None:
            return f"<{type(self).__name__} closed>"
        header = self._file.header
        return (
            f"<{type(self).__name__} path={self._file.path!r} capacity={header.capacity} "
            f"error_rate={header.error_rate!r} {self._shape_fields(header)} approx_items={self._count}>"
        )

    def _shape_fields(self, header: Header) -> str:
        return f"blocks={header.num_blocks} num_hashes={header.num_hashes}"

    # -- whole-filter operations ------------------------------------------------------------

    def union(self: _Filter, other: FilterBase) -> _Filter:
        """Add every key of ``other`` to this filter (bitwise OR, in place) and return self.

        Both filters must have the same shape (blocks, hashes per key; layout, hash and seed are fixed
        by the format). Other processes writing this file at the same time lose no bit.

        :raises TypeError: when ``other`` is not a Bloom filter.
        :raises ValueError: when the shapes differ or either filter is closed.
        :raises io.UnsupportedOperation: when this filter is read-only.
        """
        if not isinstance(other, FilterBase):
            raise TypeError(f"can only union with another Bloom filter, got {type(other).__name__}")
        if other._WINDOWED:
            raise ValueError("cannot union a plain filter with a windowed one")
        theirs = other.mapped_file()
        with self._exclusive() as file:
            if file.read_only:
                raise read_only_error()
            mine_shape = (file.header.num_blocks, file.header.num_hashes)
            their_shape = (theirs.header.num_blocks, theirs.header.num_hashes)
            if mine_shape != their_shape:
                raise ValueError(
                    "cannot union filters of different shapes: "
                    f"{counted(mine_shape[0], 'block')} x {counted(mine_shape[1], 'hash', 'hashes')} per key vs "
                    f"{counted(their_shape[0], 'block')} x {counted(their_shape[1], 'hash', 'hashes')} per key"
                )
            with file.plain_or() as alone:
                if alone:
                    blocks = file.blocks()
                    np.bitwise_or(blocks, theirs.blocks(), out=blocks)
                else:
                    self._or_blocks_atomically(theirs.blocks())
            self._count = file.estimate_items()
        return self

    def _or_blocks_atomically(self, blocks: np.ndarray) -> None:
        """OR ``blocks`` into this filter's with atomic ORs (the twins that have them)."""
        raise NotImplementedError

    def __ior__(self: _Filter, other: FilterBase) -> _Filter:
        return self.union(other)

    def copy(self: _Filter, path: Optional[PathArg] = None, *, overwrite: bool = False) -> _Filter:
        """Return a copy with the same shape, bits, metadata and count (in memory without ``path``).

        :raises FileExistsError: when ``path`` exists and ``overwrite`` is false.
        :raises ValueError: when the filter is closed.
        """
        with self._exclusive() as file:
            header = dataclasses.replace(file.header, approx_items=self._count, clean=True)
            duplicate = type(self).__new__(type(self))
            duplicate._attach(BloomFile.create(header, path, overwrite, self._ATOMIC_OR))
            np.copyto(duplicate.mapped_file().blocks(), file.blocks())  # _attach took the count
        return duplicate
