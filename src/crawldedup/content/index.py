"""NearDuplicateIndex: stored 64-bit fingerprints within Hamming distance k of a query, without a scan.

Manku, Jain and Das Sarma's blocked tables (WWW 2007, section 3): the 64 bits are cut into
k + 1 blocks, and two fingerprints that differ in at most k bits agree exactly on at least one
block (k differing bits touch at most k blocks). Table t holds every fingerprint rotated so
that block t leads, sorted; a query looks up the run of entries that share its block t in
each table (two binary searches) and checks only those. With k = 3 the blocks are 16 bits,
so at n stored fingerprints a query reads about 4 n / 65,536 candidates (600 at 10M).

Adds go into sorted runs merged as they grow (the largest run is at least twice the next),
so an add costs O(log n) amortized merges, not a re-sort of everything. A file holds one
run, written whole on :meth:`flush` to a temporary file that replaces the old one, so a crash
leaves the last flushed index, never a torn one; it is mapped, not read, when opened.
"""

from __future__ import annotations

import mmap
import os
import zlib
from pathlib import Path
from typing import Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from .._checks import is_integer
from .._files import replace_file
from .index_format import (
    ENTRY_BYTES,
    INDEX_HEADER_BYTES,
    MAX_DISTANCE,
    MAX_FINGERPRINTS,
    IndexFileError,
    IndexHeader,
)
from .policy import DEFAULT_CONTENT_POLICY, ContentPolicy

__all__ = ["Matches", "NearDuplicateIndex"]

PathLike = Union[str, "os.PathLike[str]"]
_ONE = np.uint64(1)
# Queries are answered this many at a time: at 10M stored fingerprints and k = 3, 8,192
# queries gather about 5M candidates (60 MB of temporaries).
_QUERY_CHUNK = 8192


class Matches(NamedTuple):
    """The stored fingerprints within the distance of each query, one row per (query, match).

    ``query[i]`` is the position of the query in the batch, ``ids[i]`` the id of the stored
    fingerprint (its position in the order of adds), ``distance[i]`` their Hamming distance.
    Rows are sorted by query, then distance, then id.
    """

    query: np.ndarray
    ids: np.ndarray
    distance: np.ndarray


def blocks(max_distance: int) -> List[Tuple[int, int]]:
    """``(offset, width)`` of each of the ``max_distance + 1`` blocks, counted from the top bit;
    the first ``64 % (k + 1)`` blocks are one bit wider."""
    count = max_distance + 1
    out, offset = [], 0
    for t in range(count):
        width = 64 // count + (1 if t < 64 % count else 0)
        out.append((offset, width))
        offset += width
    return out


def _rotate_left(values: np.ndarray, shift: int) -> np.ndarray:
    if shift == 0:
        return values.copy()
    return (values << np.uint64(shift)) | (values >> np.uint64(64 - shift))


if hasattr(np, "bitwise_count"):  # numpy >= 2.0

    def popcount(values: np.ndarray) -> np.ndarray:
        """The number of set bits of each uint64."""
        counts: np.ndarray = np.bitwise_count(values)
        return counts
else:  # pragma: no cover  (numpy 1.x)
    _BYTE_BITS = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)

    def popcount(values: np.ndarray) -> np.ndarray:
        """The number of set bits of each uint64."""
        counts: np.ndarray = _BYTE_BITS[np.ascontiguousarray(values).view(np.uint8).reshape(-1, 8)].sum(
            axis=1, dtype=np.uint8
        )
        return counts


def as_fingerprints(values: Union[np.ndarray, Iterable[int]], name: str = "fingerprints") -> np.ndarray:
    """A 1-D uint64 array of ``values`` (unsigned 64-bit ints).

    :raises TypeError: for a single value or a non-integer array.
    :raises ValueError: for a value outside [0, 2**64).
    """
    if isinstance(values, (int, str, bytes)):
        raise TypeError(f"{name} must be a sequence or array of ints, got a single {type(values).__name__}")
    if not isinstance(values, np.ndarray):
        items = list(values)
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in items):
            raise TypeError(f"{name} must hold ints, got {sorted({type(v).__name__ for v in items})}")
        if items and (min(items) < 0 or max(items) >= 2**64):
            raise ValueError(f"{name} must be unsigned 64-bit ints (0 <= x < 2**64)")
        return np.array(items, dtype=np.uint64)
    array = values
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.dtype.kind == "u":
        return array.astype(np.uint64, copy=False)
    if array.dtype.kind == "i":
        if array.size and int(array.min()) < 0:
            raise ValueError(f"{name} must be unsigned 64-bit ints (0 <= x < 2**64), got {int(array.min())}")
        return array.astype(np.uint64)
    raise TypeError(f"{name} must hold ints, got {array.dtype}")


class _Run:
    """One sorted run: per block, the rotated fingerprints (sorted) and the ids beside them."""

    __slots__ = ("tables", "ids")

    def __init__(self, tables: List[np.ndarray], ids: List[np.ndarray]) -> None:
        self.tables = tables
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids[0])

    @classmethod
    def build(cls, fingerprints: np.ndarray, first_id: int, layout: List[Tuple[int, int]]) -> _Run:
        ids = np.arange(first_id, first_id + len(fingerprints), dtype=np.uint32)
        tables, id_columns = [], []
        for offset, _ in layout:
            rotated = _rotate_left(fingerprints, offset)
            order = np.argsort(rotated, kind="stable")
            tables.append(rotated[order])
            id_columns.append(ids[order])
        return cls(tables, id_columns)

    def merge(self, other: _Run) -> _Run:
        tables, id_columns = [], []
        for t in range(len(self.tables)):
            rotated = np.concatenate([self.tables[t], other.tables[t]])
            order = np.argsort(rotated, kind="stable")  # two sorted runs: a linear merge
            tables.append(rotated[order])
            id_columns.append(np.concatenate([self.ids[t], other.ids[t]])[order])
        return _Run(tables, id_columns)


class NearDuplicateIndex:
    """Stored 64-bit fingerprints, queried for those within ``max_distance`` bits of each query.

    In memory (``path=None``) or in a file (docs/content.md, "The index file"): a new file is
    created, an existing one opened (its ``max_distance`` and policy must be the ones given).
    One process writes a file at a time; any number may read it (:meth:`open`).

    :param max_distance: the largest Hamming distance that counts as a match, 0 to 7; 3 is
        Manku et al.'s near-duplicate threshold for 64-bit SimHashes.
    :param path: the index file, or None for an index in memory.
    :param policy: the content policy the fingerprints were made with, stamped in the file.
    :raises TypeError: for arguments of the wrong type.
    :raises ValueError: for a max_distance out of range, or an existing file that is not an
        index (:class:`IndexFileError`, naming the file and the problem) or is one of another
        max_distance or policy.
    """

    def __init__(
        self, max_distance: int = 3, path: Optional[PathLike] = None, policy: Optional[ContentPolicy] = None
    ) -> None:
        if not is_integer(max_distance):
            raise TypeError(f"max_distance must be an int, got {type(max_distance).__name__}")
        if not 0 <= max_distance <= MAX_DISTANCE:
            raise ValueError(f"max_distance must be in [0, {MAX_DISTANCE}], got {max_distance}")
        if policy is not None and not isinstance(policy, ContentPolicy):
            raise TypeError(f"policy must be a ContentPolicy, got {type(policy).__name__}")
        self._max_distance = max_distance
        self._layout = blocks(max_distance)
        self._policy_digest = (policy or DEFAULT_CONTENT_POLICY).digest
        self._runs: List[_Run] = []
        self._count = 0
        self._path: Optional[Path] = None if path is None else Path(os.fspath(path))
        self._map: Optional[mmap.mmap] = None
        self._writable = True
        self._dirty = False
        self._closed = False
        if self._path is not None:
            if self._path.exists():
                self._attach()
                header_distance, header_digest = self._max_distance, self._policy_digest
                if header_distance != max_distance or (policy is not None and header_digest != policy.digest):
                    self.close()
                    raise ValueError(
                        f"{self._path}: holds an index of max_distance {header_distance} and policy "
                        f"{header_digest}, not {max_distance} and {(policy or DEFAULT_CONTENT_POLICY).digest}"
                    )
            else:
                self._dirty = True
                self.flush()

    @classmethod
    def open(cls, path: PathLike, mode: str = "r") -> NearDuplicateIndex:
        """Open an existing index file, with its own max_distance and policy.

        :param mode: ``"r"`` to query only, ``"r+"`` to add as well.
        :raises ValueError: for another mode, or a file that is not an index (:class:`IndexFileError`).
        :raises FileNotFoundError: when ``path`` does not exist.
        """
        if mode not in ("r", "r+"):
            raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
        index = cls.__new__(cls)
        index._runs, index._count, index._map = [], 0, None
        index._path, index._dirty, index._closed = Path(os.fspath(path)), False, False
        index._writable = mode == "r+"
        index._max_distance, index._layout, index._policy_digest = 0, blocks(0), ""  # until read
        index._attach()
        return index

    def _attach(self) -> None:
        """Map the file at ``self._path`` and take its one run as the index's content."""
        assert self._path is not None
        with open(self._path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            header = IndexHeader.unpack(file.read(INDEX_HEADER_BYTES), str(self._path), size)
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        data = memoryview(mapped)[INDEX_HEADER_BYTES:]
        crc = zlib.crc32(data)
        if crc != header.data_crc:
            data.release()
            mapped.close()
            raise IndexFileError(
                f"{self._path}: corrupted tables: checksum {crc:#010x} does not match "
                f"the stored {header.data_crc:#010x}"
            )
        data.release()
        self._max_distance = header.max_distance
        self._layout = blocks(header.max_distance)
        self._policy_digest = header.policy_digest
        self._count = header.count
        self._map = mapped
        self._runs = []
        if header.count:
            n, tables_bytes = header.count, header.num_tables * header.count * 8
            tables = [
                np.frombuffer(mapped, dtype="<u8", count=n, offset=INDEX_HEADER_BYTES + t * n * 8)
                for t in range(header.num_tables)
            ]
            ids = [
                np.frombuffer(mapped, dtype="<u4", count=n, offset=INDEX_HEADER_BYTES + tables_bytes + t * n * 4)
                for t in range(header.num_tables)
            ]
            self._runs = [_Run(tables, ids)]

    # -- properties ---------------------------------------------------------------------------

    @property
    def max_distance(self) -> int:
        """The largest Hamming distance that counts as a match."""
        return self._max_distance

    @property
    def policy_digest(self) -> str:
        """The digest of the content policy the stored fingerprints were made with."""
        return self._policy_digest

    @property
    def path(self) -> Optional[Path]:
        return self._path

    @property
    def bytes_per_fingerprint(self) -> int:
        """Bytes each stored fingerprint takes, in memory and in the file: 12 per block."""
        return ENTRY_BYTES * len(self._layout)

    def __len__(self) -> int:
        """The exact number of stored fingerprints."""
        return self._count

    # -- adding and querying -------------------------------------------------------------------

    def _check_open(self, writing: bool = False) -> None:
        if self._closed:
            raise ValueError("the index is closed")
        if writing and not self._writable:
            raise ValueError(f"{self._path}: opened read-only (mode 'r')")

    def add_many(self, fingerprints: Union[np.ndarray, Sequence[int]]) -> np.ndarray:
        """Store fingerprints; return their ids (consecutive, from :func:`len` before the call).

        :raises TypeError: for something other than a sequence or array of ints.
        :raises ValueError: for a value outside [0, 2**64), a closed or read-only index, or
            more than 2**32 - 1 fingerprints in all.
        """
        self._check_open(writing=True)
        values = as_fingerprints(fingerprints)
        first = self._count
        if first + len(values) > MAX_FINGERPRINTS:
            raise ValueError(
                f"an index holds at most {MAX_FINGERPRINTS} fingerprints, {first} + {len(values)} would exceed it"
            )
        if len(values):
            self._runs.append(_Run.build(values, first, self._layout))
            self._count += len(values)
            self._dirty = True
            while len(self._runs) >= 2 and len(self._runs[-2]) <= 2 * len(self._runs[-1]):
                last = self._runs.pop()
                self._runs[-1] = self._runs[-1].merge(last)
        return np.arange(first, self._count, dtype=np.int64)

    def query_many(self, fingerprints: Union[np.ndarray, Sequence[int]]) -> Matches:
        """Find, for each query, every stored fingerprint within :attr:`max_distance` bits.

        :raises TypeError: for something other than a sequence or array of ints.
        :raises ValueError: for a value outside [0, 2**64), or a closed index.
        """
        self._check_open()
        queries = as_fingerprints(fingerprints)
        parts: List[Tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for start in range(0, len(queries), _QUERY_CHUNK):
            chunk = queries[start : start + _QUERY_CHUNK]
            for run in self._runs:
                for t, (offset, width) in enumerate(self._layout):
                    found = self._probe(run.tables[t], run.ids[t], _rotate_left(chunk, offset), width)
                    if found is not None:
                        parts.append((found[0] + start, found[1], found[2]))
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return Matches(empty, empty.copy(), np.zeros(0, dtype=np.uint8))
        query = np.concatenate([p[0] for p in parts])
        ids = np.concatenate([p[1] for p in parts])
        distance = np.concatenate([p[2] for p in parts])
        # A match that agrees on several blocks is found once per block: keep one row.
        _, first = np.unique(query.astype(np.uint64) << np.uint64(32) | ids.astype(np.uint64), return_index=True)
        query, ids, distance = query[first], ids[first], distance[first]
        order = np.lexsort((ids, distance, query))
        return Matches(query[order], ids[order], distance[order])

    def _probe(
        self, table: np.ndarray, ids: np.ndarray, rotated: np.ndarray, width: int
    ) -> Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The (query, id, distance) of the entries of one table within the distance of each query."""
        if width == 64:
            low, high = rotated, rotated
        else:
            below = (_ONE << np.uint64(64 - width)) - _ONE  # the bits under the leading block
            low, high = rotated & ~below, rotated | below
        left = np.searchsorted(table, low, side="left")
        counts = np.searchsorted(table, high, side="right") - left
        total = int(counts.sum())
        if total == 0:
            return None
        query = np.repeat(np.arange(len(rotated), dtype=np.int64), counts)
        positions = np.arange(total, dtype=np.int64) + np.repeat(left - (np.cumsum(counts) - counts), counts)
        distance = popcount(table[positions] ^ rotated[query])
        near = distance <= self._max_distance
        return query[near], ids[positions[near]].astype(np.int64), distance[near].astype(np.uint8)

    def query(self, fingerprint: int) -> List[Tuple[int, int]]:
        """The ``(id, distance)`` of each stored fingerprint within the distance of one, nearest first."""
        found = self.query_many([fingerprint])
        return list(zip(found.ids.tolist(), found.distance.tolist()))

    # -- the file ------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write the index to its file, if it has one and changed since the last flush.

        The tables are written to a temporary file beside it, synced, and renamed over it:
        a crash at any point leaves the previous flushed index.

        :raises ValueError: for a closed index.
        :raises OSError: when the file cannot be written (the index in memory is kept).
        """
        self._check_open()
        if self._path is None or not self._dirty:
            return
        while len(self._runs) >= 2:
            last = self._runs.pop()
            self._runs[-1] = self._runs[-1].merge(last)
        arrays = [
            np.ascontiguousarray(c, dtype="<u8" if c.dtype.itemsize == 8 else "<u4")
            for run in self._runs[:1]
            for c in (*run.tables, *run.ids)
        ]
        crc = 0
        for array in arrays:
            crc = zlib.crc32(array.data.cast("B"), crc)
        header = IndexHeader(self._max_distance, self._count, self._policy_digest, crc)
        replace_file(self._path, [header.pack(), *(array.data.cast("B") for array in arrays)])
        del arrays  # they may be views of the old mapping, which is released next
        self._release_map()
        self._attach()
        self._dirty = False

    def _release_map(self) -> None:
        self._runs = []
        if self._map is not None:
            self._map.close()
            self._map = None

    def close(self) -> None:
        """Flush (when writable) and release the file; a second call does nothing."""
        if self._closed:
            return
        try:
            if self._writable:
                self.flush()
        finally:
            self._release_map()
            self._closed = True

    def __enter__(self) -> NearDuplicateIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = "memory" if self._path is None else str(self._path)
        return f"NearDuplicateIndex(max_distance={self._max_distance}, {len(self)} fingerprints, {where})"
