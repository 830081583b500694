"""The pure-Python twin of the exact tier's kernels: the typed reference (numpy).

A run holds ``n`` sorted 64-bit keys in two parts (docs/format.md, "The exact tier"): the
prefix index, ``index[b]`` = how many keys have their top ``t`` bits below ``b`` (``2**t + 1``
u64), and the suffix stream, the low ``w = 64 - t`` bits of each key in order, packed
LSB-first (suffix ``i`` is bits ``[i w, (i + 1) w)`` of the stream, bit ``j`` being bit ``j & 7``
of byte ``j >> 3``), then 8 zero bytes. ``_runs_c`` computes the same with C loops and writes
the same bytes; the selector (:mod:`crawldedup.exact`) chooses between them. Every kernel
takes whole arrays: a batch is one call, never one Python step per key.
"""

from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np

from .format import KEY_BITS

__all__ = ["decode_run", "encode_run", "merge_runs", "probe_run", "sort_keys"]

#: Keys packed or unpacked at a time (a multiple of 8, so a chunk starts on a byte): its
#: temporaries (64 bytes a key) stay at 4 MiB.
_CHUNK = 1 << 16
_EIGHT = np.arange(8, dtype=np.intp)

#: A run as the kernels take it: its index, its stream and its prefix bits.
RunArrays = Tuple[np.ndarray, np.ndarray, int]


def _mask(width: int) -> np.uint64:
    return np.uint64((1 << width) - 1)


def sort_keys(keys: np.ndarray) -> np.ndarray:
    """A sorted copy of the uint64 ``keys``."""
    return np.sort(np.asarray(keys, dtype=np.uint64))


def encode_run(keys: np.ndarray, prefix: int, index: np.ndarray, stream: np.ndarray) -> None:
    """Write the run of the sorted ``keys`` with ``prefix`` prefix bits into ``index`` (``2**prefix
    + 1`` u64) and ``stream`` (uint8, zeros, ``format.stream_bytes`` long)."""
    width = KEY_BITS - prefix
    keys = np.asarray(keys, dtype=np.uint64)
    counts = np.bincount((keys >> np.uint64(width)).astype(np.intp), minlength=1 << prefix)
    index[0] = 0
    np.cumsum(counts, out=index[1:])
    suffixes = keys & _mask(width)
    for start in range(0, len(keys), _CHUNK):
        chunk = suffixes[start : start + _CHUNK].astype("<u8")
        bits = np.unpackbits(chunk.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")[:, :width]
        packed = np.packbits(bits.ravel(), bitorder="little")
        first = start * width // 8
        stream[first : first + len(packed)] = packed


def _suffixes(stream: np.ndarray, start: int, count: int, width: int) -> np.ndarray:
    """Suffixes ``start`` to ``start + count`` (``start`` a multiple of 8) unpacked."""
    first = start * width // 8
    bits = np.unpackbits(stream[first : first + (count * width + 7) // 8], bitorder="little", count=count * width)
    full = np.zeros((count, KEY_BITS), dtype=np.uint8)
    full[:, :width] = bits.reshape(count, width)
    return np.packbits(full, axis=1, bitorder="little").view("<u8").reshape(count).astype(np.uint64)


def decode_run(index: np.ndarray, stream: np.ndarray, prefix: int) -> np.ndarray:
    """The sorted keys of a run."""
    width = KEY_BITS - prefix
    keys = int(index[-1])
    suffixes = np.empty(keys, dtype=np.uint64)
    for start in range(0, keys, _CHUNK):
        count = min(_CHUNK, keys - start)
        suffixes[start : start + count] = _suffixes(stream, start, count, width)
    prefixes = np.repeat(np.arange(1 << prefix, dtype=np.uint64), np.diff(index).astype(np.intp))
    return (prefixes << np.uint64(width)) | suffixes


def _suffixes_at(stream: np.ndarray, positions: np.ndarray, width: int) -> np.ndarray:
    """The suffixes at ``positions`` (int64): 8 bytes read from each one's first byte, shifted."""
    bit = positions.astype(np.uint64) * np.uint64(width)
    window = stream[(bit >> np.uint64(3)).astype(np.intp)[:, None] + _EIGHT]
    words = np.ascontiguousarray(window).view("<u8").reshape(len(positions)).astype(np.uint64)
    return (words >> (bit & np.uint64(7))) & _mask(width)


def probe_run(index: np.ndarray, stream: np.ndarray, prefix: int, queries: np.ndarray) -> np.ndarray:
    """Per query (uint64, any order), True when the run holds it: a binary search inside each
    query's bucket, all queries a step at a time."""
    width = KEY_BITS - prefix
    queries = np.asarray(queries, dtype=np.uint64)
    buckets = (queries >> np.uint64(width)).astype(np.intp)
    targets = queries & _mask(width)
    low = index[buckets].astype(np.int64)
    high = index[buckets + 1].astype(np.int64)
    end = high.copy()
    active = np.flatnonzero(low < high)
    while len(active):
        middle = (low[active] + high[active]) >> 1
        less = _suffixes_at(stream, middle, width) < targets[active]
        low[active[less]] = middle[less] + 1
        high[active[~less]] = middle[~less]
        active = active[low[active] < high[active]]
    found = low < end
    rows = np.flatnonzero(found)
    found[rows] = _suffixes_at(stream, low[rows], width) == targets[rows]
    return found


def merge_runs(sources: Sequence[RunArrays], prefix: int, index: np.ndarray, stream: np.ndarray) -> None:
    """Write the run of every key of ``sources`` (disjoint runs) with ``prefix`` prefix bits into
    ``index`` and ``stream`` (zeros), as :func:`encode_run` does."""
    keys = np.concatenate([decode_run(*source) for source in sources])
    keys.sort(kind="stable")  # sorted runs one after the other: merged in linear time
    encode_run(keys, prefix, index, stream)
