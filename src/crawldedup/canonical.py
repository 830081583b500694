"""URL canonicalization (shared/CANONICAL.md): every spelling of one page becomes one ASCII string.

The policy types live in :mod:`crawldedup._canonical_policy`, the canonicalizer in
:mod:`crawldedup._canonical`. It is pure Python: on the benchmark mix (bench/test_bench_canonical.py)
it runs at 3-4x the throughput of w3lib, and compiling the same source with Cython gained
only about 7%, too little to pay for a second build (see docs/canonical.md).
"""

from __future__ import annotations

from ._canonical import canonicalize, canonicalize_many
from ._canonical_policy import (
    DEFAULT_DROP_PARAMS,
    DEFAULT_POLICY,
    POLICY_FORMAT_VERSION,
    CanonicalPolicy,
    Canonicalized,
    InvalidURL,
)

__all__ = [
    "DEFAULT_DROP_PARAMS",
    "DEFAULT_POLICY",
    "POLICY_FORMAT_VERSION",
    "CanonicalPolicy",
    "Canonicalized",
    "InvalidURL",
    "canonicalize",
    "canonicalize_many",
]
