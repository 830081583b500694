"""PySpark: canonical URLs, refusals and fingerprints of a DataFrame's URL column (docs/engines.md).

    from crawldedup.integrations.spark import with_url_columns

    links = spark.read.parquet("links/")              # url, and optionally base
    pages = with_url_columns(links, base="base").dropDuplicates(["fingerprint"])

The columns are made by ``mapInArrow``: each executor's Python worker gets Arrow batches and
runs the kernels of :mod:`crawldedup.arrow` on them whole. Spark has no fixed-size binary type:
the fingerprint is a ``binary`` column of 16 bytes (:func:`crawldedup.fingerprint`).
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Tuple

import pyarrow as pa

from ..arrow import url_columns
from ..arrow import with_url_columns as arrow_url_columns
from ..canonical import CanonicalPolicy

__all__ = ["URL_COLUMNS", "page_batches", "pages_of", "url_batches", "with_url_columns"]

#: The names of the columns added, in order.
URL_COLUMNS: Tuple[str, str, str] = ("canonical", "error", "fingerprint")


def url_batches(
    batches: Iterator[pa.RecordBatch], url: str, base: Optional[str], policy: Optional[CanonicalPolicy]
) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: each batch with the three columns, typed as Spark expects
    them (text as the URL column's type, the fingerprint as ``binary``)."""
    for batch in batches:
        made = arrow_url_columns(batch, url=url, base=base, policy=policy)
        text = batch.schema.field(url).type
        if pa.types.is_string_view(text) or pa.types.is_null(text):
            text = pa.string()
        columns = made.columns[: batch.num_columns] + [
            made.column(URL_COLUMNS[0]).cast(text),
            made.column(URL_COLUMNS[1]).cast(text),
            made.column(URL_COLUMNS[2]).cast(pa.binary()),
        ]
        yield pa.RecordBatch.from_arrays(columns, names=batch.schema.names + list(URL_COLUMNS))


def with_url_columns(
    frame: Any, url: str = "url", base: Optional[str] = None, policy: Optional[CanonicalPolicy] = None
) -> Any:
    """``frame`` (a ``pyspark.sql.DataFrame``) with the columns ``canonical`` (string, null
    where refused), ``error`` (string) and ``fingerprint`` (binary, 16 bytes) of column
    ``url``, resolved against column ``base`` when given."""
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    schema = StructType(
        [
            *frame.schema.fields,
            StructField(URL_COLUMNS[0], StringType()),
            StructField(URL_COLUMNS[1], StringType()),
            StructField(URL_COLUMNS[2], BinaryType()),
        ]
    )
    return frame.mapInArrow(lambda batches: url_batches(batches, url, base, policy), schema)


def page_batches(
    batches: Iterator[pa.RecordBatch], url: str, base: Optional[str], policy: Optional[CanonicalPolicy]
) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function of :func:`pages_of`: each batch's pages, its refused and
    null links left out in the worker, so that only they cross back to the JVM."""
    for batch in batches:
        made = url_columns(batch.column(url), bases=batch.column(base) if base is not None else None, policy=policy)
        kept = made.canonical.is_valid()
        yield pa.RecordBatch.from_arrays(
            [
                made.canonical.filter(kept).combine_chunks().cast(pa.string()),
                made.fingerprint.filter(kept).combine_chunks().cast(pa.binary()),
            ],
            names=["url", "fingerprint"],
        )


def pages_of(frame: Any, url: str = "url", base: Optional[str] = None, policy: Optional[CanonicalPolicy] = None) -> Any:
    """The pages of ``frame``'s links: ``url`` (canonical) and ``fingerprint`` (binary, 16 bytes)
    of each link that is one, in link order, repeats kept (``dropDuplicates(["fingerprint"])``
    keeps one of each). The lean form of :func:`with_url_columns` for a job that needs no more."""
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    schema = StructType([StructField("url", StringType()), StructField("fingerprint", BinaryType())])
    columns = [url] + ([base] if base is not None else [])
    return frame.select(*columns).mapInArrow(lambda batches: page_batches(batches, url, base, policy), schema)
