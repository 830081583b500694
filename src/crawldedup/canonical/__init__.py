"""URL canonicalization (docs/canonical-policy.md): every spelling of one page becomes one ASCII string.

The selector of the canonical layer: the policy types live in :mod:`.policy`, the typed
reference in :mod:`._canonical_py`. When the extension is built (and
``CRAWLDEDUP_NO_EXTENSIONS`` is not set), :func:`canonicalize` and :func:`canonicalize_many` are
those of :mod:`._canonical_c`: a compiled fast path for the common URL that hands everything
else to the reference, with the same results and exceptions (see docs/canonical.md). Nothing
but this module imports a twin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Union

from .._checks import check_batch
from .._env import compiled
from ._canonical_py import canonicalize, canonicalize_buffers, canonicalize_many
from .policy import (
    DEFAULT_DROP_PARAMS,
    DEFAULT_POLICY,
    POLICIES,
    POLICY2_DROP_PARAMS,
    POLICY_FORMAT_VERSION,
    POLICY_V1,
    POLICY_V2,
    POLICY_V3,
    Canonicalized,
    CanonicalPolicy,
    InvalidURL,
    describe_policy,
    policy_conflict,
    policy_named,
)
from .policy_file import POLICY_FILE_FORMAT, PolicyFileError, load_policy_file
from .rules import HostRule

__all__ = [
    "DEFAULT_DROP_PARAMS",
    "DEFAULT_POLICY",
    "HAS_EXTENSION",
    "POLICIES",
    "POLICY2_DROP_PARAMS",
    "POLICY_FILE_FORMAT",
    "POLICY_FORMAT_VERSION",
    "POLICY_V1",
    "POLICY_V2",
    "POLICY_V3",
    "CanonicalPolicy",
    "Canonicalized",
    "HostRule",
    "InvalidURL",
    "PolicyFileError",
    "canonicalize",
    "canonicalize_buffers",
    "canonicalize_each",
    "canonicalize_many",
    "describe_policy",
    "load_policy_file",
    "policy_conflict",
    "policy_named",
]

_compiled = None if TYPE_CHECKING else compiled("crawldedup.canonical._canonical_c")
#: True when canonicalize() and canonicalize_many() take the compiled fast path first.
HAS_EXTENSION = _compiled is not None
if not TYPE_CHECKING and _compiled is not None:
    canonicalize = _compiled.canonicalize
    canonicalize_many = _compiled.canonicalize_many
    canonicalize_buffers = _compiled.canonicalize_buffers


def canonicalize_each(
    urls: Sequence[Union[str, bytes]],
    bases: Sequence[Optional[Union[str, bytes]]],
    policy: Optional[CanonicalPolicy] = None,
) -> Canonicalized:
    """Canonicalize each URL against its own base, as links found on many pages arrive.

    One :func:`canonicalize_many` call per distinct base (the links of one page share it). A
    refused base is reported for each of its URLs in ``errors``, not raised.

    :param bases: one base per URL; None for a URL that needs none.
    :raises TypeError: when ``urls`` is a single string.
    :raises ValueError: when ``bases`` does not hold one base per URL.
    """
    check_batch("urls", urls, "URLs")
    urls, bases = list(urls), list(bases)
    if len(bases) != len(urls):
        raise ValueError(f"bases must hold one base per URL ({len(urls)}), got {len(bases)}")
    by_base: Dict[Optional[Union[str, bytes]], List[int]] = {}
    for i, page in enumerate(bases):
        by_base.setdefault(page, []).append(i)
    canonical: List[Optional[str]] = [None] * len(urls)
    errors: Dict[int, InvalidURL] = {}
    for page, positions in by_base.items():
        try:
            found, refused = canonicalize_many([urls[i] for i in positions], base=page, policy=policy)
        except InvalidURL as exc:  # the base itself: every link found on it is refused
            errors.update((i, exc) for i in positions)
            continue
        for n, i in enumerate(positions):
            canonical[i] = found[n]
            if n in refused:
                errors[i] = refused[n]
    return Canonicalized(canonical, dict(sorted(errors.items())))
