"""Polars: canonical URLs, refusals and fingerprints as expressions (docs/engines.md).

    import polars as pl
    from crawldedup.integrations.polars import url_columns, with_url_columns

    links = pl.scan_parquet("links/*.parquet")
    pages = with_url_columns(links, base="base").unique("fingerprint")

:func:`url_columns` is one expression over ``map_batches``: Polars hands it whole columns as
Arrow, and the kernels of :mod:`crawldedup.arrow` answer them without the GIL, into a struct of
``canonical`` (String), ``error`` (String) and ``fingerprint`` (Binary, 16 bytes). It is
elementwise (a row's answer is its own), so the streaming engine runs it batch by batch.
"""

from __future__ import annotations

from typing import Any, Optional, Union

import pyarrow as pa

from ..arrow import url_columns as arrow_url_columns
from ..canonical import CanonicalPolicy

__all__ = ["url_columns", "with_url_columns"]

_FIELD = "__crawldedup_url_columns"


def _made(urls: Any, bases: Any, policy: Optional[CanonicalPolicy]) -> Any:
    import polars as pl

    made = arrow_url_columns(urls, bases=bases, policy=policy)
    struct = pa.StructArray.from_arrays(
        [
            made.canonical.combine_chunks().cast(pa.large_string()),
            made.error.combine_chunks().cast(pa.large_string()),
            made.fingerprint.combine_chunks().cast(pa.large_binary()),
        ],
        names=["canonical", "error", "fingerprint"],
    )
    return pl.Series(struct)


def url_columns(
    url: Union[str, Any] = "url", base: Union[str, Any, None] = None, *, policy: Optional[CanonicalPolicy] = None
) -> Any:
    """An expression of the struct ``{canonical, error, fingerprint}`` of column (or expression)
    ``url``, resolved against ``base`` when given."""
    import polars as pl

    url = pl.col(url) if isinstance(url, str) else url
    dtype = pl.Struct({"canonical": pl.String, "error": pl.String, "fingerprint": pl.Binary})
    if base is None:
        return url.map_batches(
            lambda urls: _made(urls.to_arrow(), None, policy), return_dtype=dtype, is_elementwise=True
        )
    base = pl.col(base) if isinstance(base, str) else base
    return pl.struct(url.alias("url"), base.alias("base")).map_batches(
        lambda rows: _made(rows.struct.field("url").to_arrow(), rows.struct.field("base").to_arrow(), policy),
        return_dtype=dtype,
        is_elementwise=True,
    )


def with_url_columns(
    frame: Any, url: str = "url", base: Optional[str] = None, *, policy: Optional[CanonicalPolicy] = None
) -> Any:
    """``frame`` (a DataFrame or LazyFrame) with the columns ``canonical``, ``error`` and
    ``fingerprint`` of column ``url``."""
    return frame.with_columns(url_columns(url, base, policy=policy).alias(_FIELD)).unnest(_FIELD)
