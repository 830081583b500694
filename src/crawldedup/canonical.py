"""URL canonicalization (shared/CANONICAL.md): every spelling of one page becomes one ASCII string.

The policy types live in :mod:`crawldedup._canonical_policy`; the canonicalizer itself is
:mod:`crawldedup._canonical` (pure Python, the typed reference), compiled from the same
source into ``crawldedup._canonical_c`` when the extension is built. The compiled build is
used unless ``CRAWLDEDUP_NO_EXTENSIONS=1`` or the interpreter is not CPython.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _canonical as _py_canonical
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

canonicalize = _py_canonical.canonicalize
canonicalize_many = _py_canonical.canonicalize_many
#: True when the compiled build of the canonicalizer is in use.
HAS_EXTENSION = False

if not TYPE_CHECKING and not NO_EXTENSIONS:
    try:
        from ._canonical_c import canonicalize, canonicalize_many

        HAS_EXTENSION = True
    except ImportError:  # pragma: no cover  (built without a compiler)
        pass
