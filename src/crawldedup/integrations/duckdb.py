"""DuckDB: canonical URLs and fingerprints as SQL functions over Arrow batches (docs/engines.md).

    import duckdb
    from crawldedup.integrations.duckdb import register

    con = duckdb.connect()
    register(con)
    con.sql("SELECT canonical_url(url), url_fingerprint(url) FROM 'links.parquet'")

Each function is an Arrow function: DuckDB hands it a vector of rows as an Arrow column and
the kernels of :mod:`crawldedup.arrow` answer it whole, without the GIL.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import pyarrow as pa

from ..arrow import canonicalize_array, fingerprint_array
from ..canonical import CanonicalPolicy

__all__ = ["FUNCTIONS", "register"]

#: The SQL functions :func:`register` adds, with what each returns for a row.
FUNCTIONS = {
    "canonical_url": "canonical_url(url): the canonical URL (VARCHAR), NULL when refused",
    "canonical_link": "canonical_link(url, base): the same, a relative link resolved against base",
    "url_refusal": "url_refusal(url): why the URL is refused (VARCHAR), NULL when it is not",
    "link_refusal": "link_refusal(url, base): the same for a link on a page",
    "url_fingerprint": "url_fingerprint(url): the canonical URL's 16-byte fingerprint (BLOB), NULL when refused",
    "link_fingerprint": "link_fingerprint(url, base): the same for a link on a page",
}


def register(connection: Any, *, policy: Optional[CanonicalPolicy] = None) -> None:
    """Add the :data:`FUNCTIONS` to a DuckDB connection, under ``policy`` (the default when None).

    A NULL URL gives NULL; a NULL base means none.
    """
    import duckdb

    text, blob = duckdb.sqltype("VARCHAR"), duckdb.sqltype("BLOB")

    def canonical(urls: Any, bases: Any = None) -> pa.ChunkedArray:
        return canonicalize_array(urls, bases=bases, policy=policy)[0]

    def refusal(urls: Any, bases: Any = None) -> pa.ChunkedArray:
        return canonicalize_array(urls, bases=bases, policy=policy)[1]

    def fingerprint(urls: Any, bases: Any = None) -> pa.ChunkedArray:
        return fingerprint_array(canonical(urls, bases)).cast(pa.binary())

    for name, function, returns in (
        ("url", canonical, text),
        ("refusal", refusal, text),
        ("fingerprint", fingerprint, blob),
    ):
        one = "canonical_url" if name == "url" else f"url_{name}"
        two = "canonical_link" if name == "url" else f"link_{name}"
        connection.create_function(one, _alone(function), [text], returns, type="arrow", null_handling="special")
        connection.create_function(two, function, [text, text], returns, type="arrow", null_handling="special")


def _alone(function: Callable[[Any, Any], pa.ChunkedArray]) -> Callable[[Any], pa.ChunkedArray]:
    """``function`` without a base: DuckDB counts a function's parameters."""
    return lambda urls: function(urls, None)
