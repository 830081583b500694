"""Whole Arrow columns of URLs: canonical strings, refusals and fingerprints, without the GIL.

The kernels the engines' integrations call (``crawldedup.integrations.spark``, ``duckdb``,
``polars``, ``dask``, ``ray``) and the offline job (``crawldedup.offline``) reads. They take a
``pyarrow`` ``string`` or ``large_string`` array (chunked or not, with nulls) and hand its
buffers to the canonical and fingerprint layers' batch paths: each row gets what
:func:`crawldedup.canonicalize` and :func:`crawldedup.fingerprint` give it. Needs the ``arrow``
extra (``pip install crawldedup[arrow]``). docs/engines.md has the recipes.
"""

from .kernel import (
    FINGERPRINT_TYPE,
    URLColumns,
    canonicalize_array,
    fingerprint_array,
    fingerprint_halves,
    url_columns,
    with_url_columns,
)

__all__ = [
    "FINGERPRINT_TYPE",
    "URLColumns",
    "canonicalize_array",
    "fingerprint_array",
    "fingerprint_halves",
    "url_columns",
    "with_url_columns",
]
