"""MurmurHash3 x64-128 (seed 0) of keys, in Python over mmh3: the reference twin and oracle.

A key is a ``str`` (hashed as UTF-8) or a bytes-like object (hashed as its raw bytes). The
128-bit hash is read as two little-endian 64-bit halves ``(h1, h2)``, exactly as
``mmh3.hash64(key, signed=False)`` returns them; it never changes between processes or hosts.
The compiled twin (``_fingerprints_c``) gives the same rows from C.
"""

from __future__ import annotations

from typing import Iterable, Union

import mmh3
import numpy as np

from .._checks import ColumnBytes, Offsets, check_offsets

Key = Union[str, bytes, bytearray, memoryview]


def key_bytes(item: object) -> bytes:
    """Return the bytes that are hashed for ``item``.

    :raises TypeError: when ``item`` is neither ``str`` nor bytes-like.
    :raises UnicodeEncodeError: for a ``str`` that has no UTF-8 form (lone surrogates).
    """
    if isinstance(item, str):
        return item.encode("utf-8")
    if isinstance(item, bytes):
        return item
    try:
        return memoryview(item).tobytes()  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"items must be str or bytes-like, got {type(item).__name__}") from None


def fingerprint(canonical: Key) -> bytes:
    """Return the 16-byte MurmurHash3 x64-128 fingerprint of a canonical URL.

    Equal to ``mmh3.hash_bytes(canonical.encode("utf-8"))``: ``h1`` then ``h2``, little-endian.

    :raises TypeError: when ``canonical`` is neither ``str`` nor bytes-like.
    """
    # mmh3 is handed bytes only: given a str with a lone surrogate it crashes (mmh3 5.x).
    return mmh3.hash_bytes(key_bytes(canonical))


def hash_one(item: object) -> tuple[int, int]:
    """Return ``(h1, h2)`` of one key as unsigned 64-bit ints.

    :raises TypeError: when ``item`` is neither ``str`` nor bytes-like.
    """
    return mmh3.hash64(key_bytes(item), signed=False)


def hash_many(items: Iterable[object]) -> np.ndarray:
    """Return the ``(n, 2)`` uint64 array of ``(h1, h2)`` rows for ``items``.

    ``hashes[i].tobytes() == fingerprint(items[i])`` on little-endian hosts.

    :raises TypeError: when an item is neither ``str`` nor bytes-like.
    """
    digest = mmh3.hash_bytes
    if not isinstance(items, (list, tuple)):
        items = list(items)
    try:
        # All-ASCII str (canonical URLs): mmh3 hashes each str as is, 48 ns a 45-byte URL against
        # 64 through str.encode. Only ASCII may go that way: mmh3 5.x crashes on a lone surrogate.
        # The join fails on any other type, and its isascii() is a flag read.
        all_ascii = "".join(items).isascii()  # type: ignore[arg-type]
    except TypeError:
        all_ascii = False
    if all_ascii:
        joined = b"".join(map(digest, items))
    else:
        joined = b"".join([digest(key_bytes(item)) for item in items])
    return np.frombuffer(joined, dtype="<u8").reshape(-1, 2).astype(np.uint64)


def hash_buffers(offsets: Offsets, data: ColumnBytes) -> np.ndarray:
    """Return the ``(n, 2)`` rows of the keys of a binary or text column laid out as Arrow lays
    one out: key ``i`` is ``data[offsets[i]:offsets[i + 1]]`` (``n + 1`` ascending offsets).

    ``hash_buffers(offsets, data)[i]`` is ``hash_many([key_i])[0]``.

    :raises ValueError: for offsets that do not ascend within ``data``.
    """
    raw = bytes(data)
    check_offsets(offsets, len(raw))
    return hash_many([raw[start:stop] for start, stop in zip(offsets[:-1], offsets[1:])])
