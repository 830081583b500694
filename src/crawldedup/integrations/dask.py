"""Dask: canonical URLs, refusals and fingerprints of a Dask DataFrame's URL column (docs/engines.md).

    import dask.dataframe as dd
    from crawldedup.integrations.dask import with_url_columns

    links = dd.read_parquet("links/")
    pages = with_url_columns(links, base="base").drop_duplicates(subset=["fingerprint"])

Each partition's URL column goes to the kernels of :mod:`crawldedup.arrow` as Arrow (without a
copy when it is Arrow-backed, as pandas' ``str`` columns are), and the columns come back
Arrow-backed: ``canonical`` and ``error`` strings, ``fingerprint`` 16 bytes.
"""

from __future__ import annotations

from typing import Any, Optional

import pyarrow as pa

from ..arrow import FINGERPRINT_TYPE, url_columns
from ..canonical import CanonicalPolicy

__all__ = ["url_partition", "with_url_columns"]


def url_partition(frame: Any, url: str, base: Optional[str], policy: Optional[CanonicalPolicy]) -> Any:
    """One pandas partition with the three columns (what ``map_partitions`` runs)."""
    import pandas as pd

    def arrow(column: str) -> pa.ChunkedArray:
        return pa.chunked_array([pa.array(frame[column], type=pa.large_string(), from_pandas=True)])

    made = url_columns(arrow(url), bases=arrow(base) if base is not None else None, policy=policy)
    return frame.assign(
        canonical=pd.Series(pd.arrays.ArrowExtensionArray(made.canonical), index=frame.index),
        error=pd.Series(pd.arrays.ArrowExtensionArray(made.error), index=frame.index),
        fingerprint=pd.Series(pd.arrays.ArrowExtensionArray(made.fingerprint), index=frame.index),
    )


def with_url_columns(
    frame: Any, url: str = "url", base: Optional[str] = None, policy: Optional[CanonicalPolicy] = None
) -> Any:
    """``frame`` (a ``dask.dataframe.DataFrame``) with the columns ``canonical``, ``error`` and
    ``fingerprint`` of column ``url``, resolved against column ``base`` when given."""
    import pandas as pd
    from dask.dataframe.utils import make_meta

    meta = url_partition(make_meta(frame), url, base, policy)
    meta = meta.astype(
        {
            "canonical": pd.ArrowDtype(pa.large_string()),
            "error": pd.ArrowDtype(pa.string()),
            "fingerprint": pd.ArrowDtype(FINGERPRINT_TYPE),
        }
    )
    return frame.map_partitions(url_partition, url, base, policy, meta=meta)
