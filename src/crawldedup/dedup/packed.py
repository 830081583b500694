"""The canonical URLs of a prepared batch as one block of bytes, made strings only where read.

A batch prepared in another process (``crawldedup filter --jobs``) arrives with its canonical
URLs joined by newlines (a canonical URL never holds one). The process that claims it reads
the canonical form of the won URLs only: on a frontier that repeats itself, a handful in a
batch of thousands. Splitting every batch back into strings on arrival cost that process
about a fifth of its time, so the strings are made on demand: one by one for a few rows, or
all at once (one split) when many are read.
"""

from __future__ import annotations

import operator
from typing import Iterator, List, Optional, Sequence, Union, overload

import numpy as np

_NEWLINE = ord("\n")


class PackedURLs(Sequence[str]):
    """``count`` strings kept as their newline-joined UTF-8 bytes.

    :param data: the strings' UTF-8 bytes, joined by newlines (none of them holds one).
    :param count: how many strings ``data`` holds (0: ``data`` is empty).
    """

    def __init__(self, data: bytes, count: int) -> None:
        self._data = data
        self._count = count
        self._edges: Optional[np.ndarray] = None
        self._strings: Optional[List[str]] = None

    @property
    def data(self) -> bytes:
        """The strings' UTF-8 bytes, joined by newlines."""
        return self._data

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> List[str]: ...
    def __getitem__(self, index: Union[int, slice]) -> Union[str, List[str]]:
        if isinstance(index, slice) or self._strings is not None:
            return self.strings()[index]
        row = operator.index(index)
        if row < 0:
            row += self._count
        if not 0 <= row < self._count:
            raise IndexError("PackedURLs index out of range")
        edges = self._row_edges()
        return self._data[edges[row] : edges[row + 1] - 1].decode()

    def __iter__(self) -> Iterator[str]:
        return iter(self.strings())

    def strings(self) -> List[str]:
        """All the strings (made once, with one split)."""
        if self._strings is None:
            self._strings = self._data.decode().split("\n") if self._count else []
        return self._strings

    def pick(self, rows: np.ndarray) -> List[str]:
        """The strings at ``rows`` (positions), in that order."""
        if not len(rows):  # a batch of repeats: nothing to find
            return []
        if self._strings is not None or 8 * len(rows) >= self._count:  # most of them: one split is cheaper
            strings = self.strings()
            return [strings[row] for row in rows.tolist()]
        edges = self._row_edges()
        data = self._data
        return [data[start : end - 1].decode() for start, end in zip(edges[rows].tolist(), edges[rows + 1].tolist())]

    def _row_edges(self) -> np.ndarray:
        """Where each string starts, and one past the end of the last plus one: string ``i`` is
        ``data[edges[i]:edges[i + 1] - 1]``."""
        if self._edges is None:
            newlines = np.flatnonzero(np.frombuffer(self._data, dtype=np.uint8) == _NEWLINE)
            self._edges = np.concatenate(([0], newlines + 1, [len(self._data) + 1]))
        return self._edges


class PackedCanonical(Sequence[Optional[str]]):
    """Per input URL of a batch, its canonical form, or None when it was refused: the valid
    rows' strings (:class:`PackedURLs`) placed at their input positions.

    :param valid: the canonical forms of the valid URLs, in input order.
    :param positions: the input position of each valid URL.
    :param count: how many URLs the batch holds.
    """

    def __init__(self, valid: PackedURLs, positions: np.ndarray, count: int) -> None:
        self._valid = valid
        self._row_of = np.full(count, -1, dtype=np.intp)
        self._row_of[positions] = np.arange(len(positions))

    def __len__(self) -> int:
        return len(self._row_of)

    @overload
    def __getitem__(self, index: int) -> Optional[str]: ...
    @overload
    def __getitem__(self, index: slice) -> List[Optional[str]]: ...
    def __getitem__(self, index: Union[int, slice]) -> Union[Optional[str], List[Optional[str]]]:
        if isinstance(index, slice):
            return [self._valid[row] if row >= 0 else None for row in self._row_of[index].tolist()]
        row = int(self._row_of[index])
        return self._valid[row] if row >= 0 else None

    def __iter__(self) -> Iterator[Optional[str]]:
        strings = self._valid.strings()
        return (strings[row] if row >= 0 else None for row in self._row_of.tolist())


def pick(urls: Sequence[str], rows: np.ndarray) -> List[str]:
    """``urls`` at ``rows`` (positions), in that order, making only those strings of a
    :class:`PackedURLs`."""
    if isinstance(urls, PackedURLs):
        return urls.pick(rows)
    return [urls[row] for row in rows.tolist()]


def packed_bytes(urls: Sequence[str]) -> bytes:
    """``urls`` joined by newlines as UTF-8 (a :class:`PackedURLs` gives its bytes as they are)."""
    if isinstance(urls, PackedURLs):
        return urls.data
    return "\n".join(urls).encode()
