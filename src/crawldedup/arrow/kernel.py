"""The Arrow kernels: a column of URLs to canonical strings, refusals and 128-bit fingerprints.

Zero-copy where Arrow allows it: a chunk's offsets and bytes go to the canonical layer's
:func:`~crawldedup.canonical.canonicalize_buffers` as they lie in memory (a ``string_view``
column is cast to ``large_string`` first), the canonical bytes come back as one buffer that
becomes the output array's, and the fingerprints are hashed from that buffer
(:func:`~crawldedup.fingerprints.hash_buffers`) into a buffer the ``fixed_size_binary(16)``
array wraps. Both batch paths run without the GIL in the compiled twins.
"""

from __future__ import annotations

from typing import List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from .._extras import needs_extra
from ..canonical import CanonicalPolicy, canonicalize_buffers, canonicalize_many
from ..fingerprints import FINGERPRINT_BYTES, hash_buffers

with needs_extra("crawldedup.arrow", "arrow"):
    import pyarrow as pa

__all__ = [
    "FINGERPRINT_TYPE",
    "URLColumns",
    "canonicalize_array",
    "fingerprint_array",
    "fingerprint_halves",
    "url_columns",
    "with_url_columns",
]

#: The type of a fingerprint column: the 16 bytes of :func:`crawldedup.fingerprint`.
FINGERPRINT_TYPE = pa.binary(FINGERPRINT_BYTES)

ArrayLike = Union[pa.Array, pa.ChunkedArray]
_INT32_MAX = 2**31 - 1


class URLColumns(NamedTuple):
    """What :func:`url_columns` makes of a column of URLs, row for row."""

    #: The canonical URL (``string``), null where the URL is null or refused.
    canonical: pa.ChunkedArray
    #: Why a URL was refused (the :class:`~crawldedup.InvalidURL` message), else null.
    error: pa.ChunkedArray
    #: The canonical URL's fingerprint (``fixed_size_binary(16)``), null where it is.
    fingerprint: pa.ChunkedArray


def _chunks(array: ArrayLike, name: str) -> List[pa.Array]:
    """The chunks of a text column, ``string_view`` cast to ``large_string``.

    :raises TypeError: for a column of another type.
    """
    if isinstance(array, pa.ChunkedArray):
        chunks = list(array.chunks)
        kind = array.type
    elif isinstance(array, pa.Array):
        chunks = [array]
        kind = array.type
    else:
        raise TypeError(f"{name} must be a pyarrow Array or ChunkedArray, got {type(array).__name__}")
    if pa.types.is_string_view(kind):
        return [chunk.cast(pa.large_string()) for chunk in chunks]
    if pa.types.is_null(kind):
        return [chunk.cast(pa.string()) for chunk in chunks]
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise TypeError(f"{name} must be a string, large_string or string_view column, got {kind}")
    return chunks


def _buffers(chunk: pa.Array) -> Tuple[np.ndarray, np.ndarray]:
    """A text chunk's offsets (its own ``n + 1``, into the whole data buffer) and data bytes."""
    _, offsets_buffer, data_buffer = chunk.buffers()
    width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
    if offsets_buffer is None:  # an empty chunk may carry no buffers
        return np.zeros(1, dtype=width), np.zeros(0, dtype=np.uint8)
    offsets = np.frombuffer(offsets_buffer, dtype=width)[chunk.offset : chunk.offset + len(chunk) + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    return offsets, data


def _valid(chunk: pa.Array) -> Optional[np.ndarray]:
    """A chunk's rows that are not null, as a bool array; None when none is null."""
    if chunk.null_count == 0:
        return None
    valid: np.ndarray = chunk.is_valid().to_numpy(zero_copy_only=False)
    return valid


def _bitmap(mask: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(mask, bitorder="little"))


def _base_runs(bases: pa.Array) -> List[Tuple[int, Optional[str]]]:
    """``(stop, base)`` runs of equal consecutive bases: the links of one page arrive together."""
    if len(bases) == 0:
        return []
    encoded = bases.dictionary_encode()
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    names = encoded.dictionary.to_pylist()
    stops = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    starts = np.concatenate([[0], stops])
    return [
        (int(stop), None if codes[start] < 0 else names[codes[start]])
        for start, stop in zip(starts, np.append(stops, len(codes)))
    ]


def _errors_array(count: int, errors: Mapping[int, object]) -> pa.Array:
    """A ``string`` array of ``count`` rows holding each error's message at its row, else null."""
    if not errors:
        return pa.nulls(count, pa.string())
    rows = np.fromiter(errors.keys(), dtype=np.int64, count=len(errors))
    where = np.zeros(count, dtype=np.int32)
    where[rows] = np.arange(1, len(rows) + 1, dtype=np.int32)
    messages = pa.array([None, *(str(error) for error in errors.values())], type=pa.string())
    return messages.take(pa.array(where))


def _canonical_chunk(
    chunk: pa.Array, runs: Optional[Sequence[Tuple[int, Optional[str]]]], policy: Optional[CanonicalPolicy]
) -> Tuple[pa.Array, pa.Array]:
    offsets, data = _buffers(chunk)
    made_offsets, out_data, errors = canonicalize_buffers(offsets, data, runs, policy)
    valid = _valid(chunk)
    if valid is not None:  # a null row is no URL: null out, and no refusal of an empty one
        errors = {row: error for row, error in errors.items() if valid[row]}
    keep = np.ones(len(chunk), dtype=bool) if valid is None else valid.copy()
    if errors:
        keep[np.fromiter(errors.keys(), dtype=np.int64, count=len(errors))] = False
    out_offsets = np.asarray(made_offsets, dtype=np.int64)
    large = pa.types.is_large_string(chunk.type) or int(out_offsets[-1]) > _INT32_MAX
    kind = pa.large_string() if large else pa.string()
    if not large:
        out_offsets = out_offsets.astype(np.int32)
    nulls = len(chunk) - int(keep.sum())
    canonical = pa.Array.from_buffers(
        kind,
        len(chunk),
        [_bitmap(keep) if nulls else None, pa.py_buffer(out_offsets), pa.py_buffer(out_data)],
        null_count=nulls,
    )
    return canonical, _errors_array(len(chunk), errors)


def _aligned(bases: ArrayLike, chunks: List[pa.Array]) -> List[pa.Array]:
    """``bases`` cut into pieces as long as the URL chunks."""
    if len(bases) != sum(len(chunk) for chunk in chunks):
        raise ValueError(f"bases must hold one base per URL ({sum(map(len, chunks))}), got {len(bases)}")
    pieces, start = [], 0
    for chunk in chunks:
        piece = bases.slice(start, len(chunk))
        pieces.append(piece.combine_chunks() if isinstance(piece, pa.ChunkedArray) else piece)
        start += len(chunk)
    return pieces


def canonicalize_array(
    urls: ArrayLike,
    *,
    base: Optional[str] = None,
    bases: Optional[ArrayLike] = None,
    policy: Optional[CanonicalPolicy] = None,
) -> Tuple[pa.ChunkedArray, pa.ChunkedArray]:
    """Canonicalize a column of URLs: ``(canonical, error)``, chunked as ``urls`` is.

    Row ``i`` of ``canonical`` is ``canonicalize(urls[i], base, policy)``, or null where the URL
    is null or refused; row ``i`` of ``error`` is then the refusal's message (null otherwise).
    ``canonical`` is ``large_string`` when ``urls`` is (or when its bytes pass 2 GiB), else
    ``string``.

    :param base: one base for every row (a relative link resolves against it).
    :param bases: a base per row (a column as long as ``urls``; null: none), e.g. the page each
        link was found on. A refused base is the error of each of its links.
    :raises TypeError: for a column that is not text, or both ``base`` and ``bases``.
    :raises InvalidURL: when ``base`` is refused.
    """
    chunks = _chunks(urls, "urls")
    if base is not None and bases is not None:
        raise TypeError("give base (one for all rows) or bases (one per row), not both")
    base_chunks = _aligned(bases, chunks) if bases is not None else None
    if base is not None:
        canonicalize_many([], base=base, policy=policy)  # a refused base refuses the call, as there
    canonical, errors = [], []
    for index, chunk in enumerate(chunks):
        if base_chunks is not None:
            runs: Optional[List[Tuple[int, Optional[str]]]] = _base_runs(base_chunks[index].cast(pa.string()))
        else:
            runs = [(len(chunk), base)] if base is not None else None
        made, refused = _canonical_chunk(chunk, runs, policy)
        canonical.append(made)
        errors.append(refused)
    kind = canonical[0].type if canonical else pa.string()
    return pa.chunked_array(canonical, type=kind), pa.chunked_array(errors, type=pa.string())


def _hashes(chunk: pa.Array) -> np.ndarray:
    offsets, data = _buffers(chunk)
    return hash_buffers(offsets, data)


def fingerprint_array(canonical: ArrayLike) -> pa.ChunkedArray:
    """The 16-byte fingerprint of each row (``fixed_size_binary(16)``): ``fingerprint(row)``,
    null where the row is null. The rows are hashed as they are: canonicalize them first."""
    chunks = []
    for chunk in _chunks(canonical, "canonical"):
        hashes = _hashes(chunk)
        valid = _valid(chunk)
        nulls = chunk.null_count
        validity = _bitmap(valid) if valid is not None else None
        chunks.append(pa.Array.from_buffers(FINGERPRINT_TYPE, len(chunk), [validity, pa.py_buffer(hashes)], nulls))
    return pa.chunked_array(chunks, type=FINGERPRINT_TYPE)


def fingerprint_halves(canonical: ArrayLike) -> Tuple[pa.ChunkedArray, pa.ChunkedArray]:
    """The fingerprint of each row as two ``uint64`` columns ``(h1, h2)`` (little-endian halves
    of the 16 bytes, as :func:`crawldedup.fingerprints.hash_many` gives them); null where the row is."""
    firsts, seconds = [], []
    for chunk in _chunks(canonical, "canonical"):
        hashes = _hashes(chunk)
        valid = _valid(chunk)
        mask = None if valid is None else ~valid
        firsts.append(pa.array(np.ascontiguousarray(hashes[:, 0]), mask=mask))
        seconds.append(pa.array(np.ascontiguousarray(hashes[:, 1]), mask=mask))
    return pa.chunked_array(firsts, type=pa.uint64()), pa.chunked_array(seconds, type=pa.uint64())


def url_columns(
    urls: ArrayLike,
    *,
    base: Optional[str] = None,
    bases: Optional[ArrayLike] = None,
    policy: Optional[CanonicalPolicy] = None,
) -> URLColumns:
    """The canonical URL, refusal and fingerprint of each row of ``urls``
    (:func:`canonicalize_array`, then :func:`fingerprint_array`)."""
    canonical, error = canonicalize_array(urls, base=base, bases=bases, policy=policy)
    return URLColumns(canonical, error, fingerprint_array(canonical))


Tabular = Union[pa.Table, pa.RecordBatch]


def with_url_columns(
    data: Tabular,
    *,
    url: str = "url",
    base: Optional[str] = None,
    policy: Optional[CanonicalPolicy] = None,
    names: Tuple[str, str, str] = ("canonical", "error", "fingerprint"),
) -> Tabular:
    """``data`` (a Table or RecordBatch) with three columns added: the canonical URL, refusal
    and fingerprint of column ``url``, resolved against column ``base`` when given (the page
    each link was found on). The step every engine integration runs on its batches.

    :raises KeyError: for a column that ``data`` lacks.
    """
    for column in (url, base):
        if column is not None and column not in data.schema.names:
            raise KeyError(f"no column {column!r} in {data.schema.names}")
    made = url_columns(data.column(url), bases=data.column(base) if base is not None else None, policy=policy)
    for name, column in zip(names, made):
        if isinstance(data, pa.RecordBatch):
            column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        data = data.append_column(name, column)
    return data
