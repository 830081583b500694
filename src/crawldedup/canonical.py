"""URL canonicalization (docs/canonical-policy.md): every spelling of one page becomes one ASCII string.

The policy types live in :mod:`crawldedup._canonical_policy`, the typed reference in
:mod:`crawldedup._canonical`. When the extension is built (and ``CRAWLDEDUP_NO_EXTENSIONS`` is
not set), :func:`canonicalize` and :func:`canonicalize_many` are those of
:mod:`crawldedup._canonical_c`: a compiled fast path for the common URL that hands everything
else to the reference, with the same results and exceptions (see docs/canonical.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._canonical import canonicalize, canonicalize_many
from ._canonical_policy import (
    DEFAULT_DROP_PARAMS,
    DEFAULT_POLICY,
    POLICY_FORMAT_VERSION,
    CanonicalPolicy,
    Canonicalized,
    InvalidURL,
)
from ._env import NO_EXTENSIONS

__all__ = [
    "DEFAULT_DROP_PARAMS",
    "DEFAULT_POLICY",
    "HAS_EXTENSION",
    "POLICY_FORMAT_VERSION",
    "CanonicalPolicy",
    "Canonicalized",
    "InvalidURL",
    "canonicalize",
    "canonicalize_many",
]

#: True when canonicalize() and canonicalize_many() take the compiled fast path first.
HAS_EXTENSION = False
if not TYPE_CHECKING and not NO_EXTENSIONS:
    try:
        from ._canonical_c import canonicalize, canonicalize_many
        HAS_EXTENSION = True
    except ImportError:  # pragma: no cover  (installed from an sdist without a compiler)
        pass
