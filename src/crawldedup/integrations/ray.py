"""Ray Data: canonical URLs, refusals and fingerprints of a Dataset's URL column (docs/engines.md).

    import ray
    from crawldedup.integrations.ray import with_url_columns

    links = ray.data.read_parquet("links/")
    made = with_url_columns(links, base="base")

A ``map_batches`` over Arrow tables: each batch's URL column goes to the kernels of
:mod:`crawldedup.arrow` whole, without the GIL.
"""

from __future__ import annotations

from typing import Any, Optional

import pyarrow as pa

from ..arrow import with_url_columns as arrow_url_columns
from ..canonical import CanonicalPolicy

__all__ = ["url_table", "with_url_columns"]


def url_table(table: pa.Table, url: str, base: Optional[str], policy: Optional[CanonicalPolicy]) -> pa.Table:
    """One batch with the three columns (what ``map_batches`` runs)."""
    return arrow_url_columns(table, url=url, base=base, policy=policy)


def with_url_columns(
    dataset: Any,
    url: str = "url",
    base: Optional[str] = None,
    policy: Optional[CanonicalPolicy] = None,
    **map_batches: Any,
) -> Any:
    """``dataset`` (a ``ray.data.Dataset``) with the columns ``canonical``, ``error`` and
    ``fingerprint`` of column ``url``; ``map_batches`` options (``batch_size``,
    ``concurrency``...) pass through."""
    return dataset.map_batches(
        url_table, fn_kwargs={"url": url, "base": base, "policy": policy}, batch_format="pyarrow", **map_batches
    )
