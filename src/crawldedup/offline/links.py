"""The links of an offline job: Parquet files of discovered URLs (and the page each was found
on) read in batches and made canonical URLs, fingerprints and partitions by the Arrow kernels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from ..arrow import FINGERPRINT_TYPE, canonicalize_array, fingerprint_array
from ..canonical import CanonicalPolicy
from .history import prefixes

__all__ = ["LINK_SCHEMA", "LinkCounts", "link_batches", "open_links"]

#: What :func:`link_batches` yields: a page of each link that is one.
LINK_SCHEMA = pa.schema([("fingerprint", FINGERPRINT_TYPE), ("url", pa.string()), ("prefix", pa.int32())])
#: Rows read at a time: about 60 MB of URLs and their canonical forms in memory.
BATCH_ROWS = 500_000


@dataclass
class LinkCounts:
    """What the links held, counted as they were read."""

    links: int = 0
    refused: int = 0
    null: int = 0


def open_links(sources: Sequence[str], url: str, base: Optional[str]) -> ds.Dataset:
    """The Parquet files (or directories) of links, checked for their columns.

    :raises KeyError: for a column the files lack.
    :raises FileNotFoundError: for a source that does not exist.
    """
    dataset = ds.dataset(list(sources), format="parquet")
    for column in [url] + ([base] if base is not None else []):
        if column not in dataset.schema.names:
            raise KeyError(f"the links have no column {column!r} (they have {', '.join(dataset.schema.names)})")
    return dataset


def link_batches(
    dataset: ds.Dataset,
    counts: LinkCounts,
    *,
    url: str = "url",
    base: Optional[str] = None,
    policy: Optional[CanonicalPolicy] = None,
    partitions: int = 1,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Batches of ``LINK_SCHEMA`` made from the links (:func:`open_links`): refused and null
    links are counted in ``counts`` and left out."""
    columns: List[str] = [url] + ([base] if base is not None else [])
    for batch in dataset.to_batches(columns=columns, batch_size=batch_rows):
        counts.links += batch.num_rows
        urls = batch.column(url)
        counts.null += urls.null_count
        canonical, errors = canonicalize_array(
            urls, bases=batch.column(base) if base is not None else None, policy=policy
        )
        counts.refused += len(errors) - errors.null_count
        kept = canonical.drop_null().combine_chunks() if canonical.null_count else canonical.combine_chunks()
        kept = kept.cast(pa.string()) if not pa.types.is_string(kept.type) else kept
        if len(kept) == 0:
            continue
        fingerprints = fingerprint_array(kept).chunk(0)
        hashes = np.frombuffer(fingerprints.buffers()[1], dtype="<u8").reshape(-1, 2)
        yield pa.RecordBatch.from_arrays(
            [fingerprints, kept, pa.array(prefixes(hashes, partitions))], schema=LINK_SCHEMA
        )
