"""The canonicalization policy, its digest, and the types shared by both canonicalizer twins.

These live apart from the implementation so that the pure-Python canonicalizer and its
compiled twin raise the same :class:`InvalidURL` and read the same :class:`CanonicalPolicy`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, fields
from typing import Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Tuple, Union

from .._checks import is_integer

__all__ = [
    "Canonicalized",
    "CanonicalPolicy",
    "DEFAULT_DROP_PARAMS",
    "DEFAULT_POLICY",
    "InvalidURL",
    "POLICIES",
    "POLICY_FORMAT_VERSION",
    "POLICY_V1",
    "POLICY_V2",
    "describe_policy",
    "policy_conflict",
    "policy_named",
]

#: The newest version of the canonicalization rules (:attr:`CanonicalPolicy.version`): bumped
#: whenever the canonicalization a policy drives changes in a way that makes equal fields
#: produce different strings. A policy's version is part of its digest.
POLICY_FORMAT_VERSION = 2

#: Query keys that identify a visit, a campaign or a session rather than content (docs/canonical-policy.md, rule 8).
DEFAULT_DROP_PARAMS: FrozenSet[str] = frozenset(
    {
        "gclid",
        "fbclid",
        "msclkid",
        "dclid",
        "yclid",
        "gbraid",
        "wbraid",
        "igshid",
        "mc_cid",
        "mc_eid",
        "_ga",
        "_gl",
        "spm",
        "from",
        "ref",
        "share_token",
        "sessionid",
        "phpsessid",
        "jsessionid",
        "sid",
    }
)

_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*\Z")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class InvalidURL(ValueError):
    """A URL (or a base) that the policy does not accept; the message names the problem."""


class Canonicalized(NamedTuple):
    """The result of :func:`crawldedup.canonicalize_many`.

    ``urls[i]`` is the canonical string of input ``i``, or ``None`` when it was rejected, in
    which case ``errors[i]`` is the :class:`InvalidURL` saying why.
    """

    urls: List[Optional[str]]
    errors: Dict[int, InvalidURL]


def _names(value: Union[str, Iterable[str]], what: str) -> FrozenSet[str]:
    """Validates a collection of names and folds it to ASCII lowercase (comparisons are ASCII-only)."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{what} must be a collection of str, not a single {type(value).__name__} ({value!r})")
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{what} must be a collection of str, got {type(value).__name__}") from None
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"{what} must hold str items, got {type(item).__name__} ({item!r})")
        if not item:
            raise ValueError(f"{what} must not hold an empty string")
        if any(0xD800 <= ord(ch) <= 0xDFFF for ch in item):
            raise ValueError(f"{what} item {item!r} holds an unpaired surrogate")
    return frozenset(item.translate(_ASCII_LOWER) for item in items)


@dataclass(frozen=True)
class CanonicalPolicy:
    """What counts as the same page: every rule of docs/canonical-policy.md that can be switched.

    Collections may be given as any iterable of ``str``; they are stored as frozensets folded
    to ASCII lowercase, because every comparison they drive is ASCII case-insensitive. To
    extend a default list rather than replace it, build on it, for example
    ``dataclasses.replace(DEFAULT_POLICY, drop_params=DEFAULT_POLICY.drop_params | {"campaign"})``.

    :param schemes: accepted schemes (default ``http`` and ``https``).
    :param merge_schemes: write ``http`` as ``https`` (and drop either scheme's default port).
    :param strip_www: remove leading ``www.`` labels while at least two labels remain.
    :param keep_userinfo: keep ``user:pass@`` (percent-normalized like the path).
    :param lowercase_path: lowercase the path's ASCII letters (escapes stay uppercase).
    :param strip_trailing_slash: remove trailing slashes from a path other than ``/``.
    :param semicolon_separator: split the query on ``;`` as well as ``&``.
    :param drop_params: query keys dropped as tracking parameters.
    :param drop_prefixes: query keys starting with one of these are dropped.
    :param keep_params: query keys never dropped (wins over both lists above).
    :param keep_fragment: keep ``#fragment`` (percent-normalized like the path).
    :param max_length: longest accepted input, in characters after stripping its ends.
    :param version: the rules that read a URL: 2 (the default) parses the special schemes as
        browsers do (WHATWG URL Standard, docs/canonical-policy.md "Policy 2"); 1 parses every
        URL by RFC 3986 (:data:`POLICY_V1`, for crawls begun before policy 2).
    :raises TypeError: a field of the wrong type.
    :raises ValueError: an empty or malformed scheme or name, ``max_length`` below 1, or an
        unknown ``version``.
    """

    schemes: FrozenSet[str] = frozenset({"http", "https"})
    merge_schemes: bool = False
    strip_www: bool = False
    keep_userinfo: bool = False
    lowercase_path: bool = False
    strip_trailing_slash: bool = True
    semicolon_separator: bool = False
    drop_params: FrozenSet[str] = DEFAULT_DROP_PARAMS
    drop_prefixes: FrozenSet[str] = frozenset({"utm_"})
    keep_params: FrozenSet[str] = frozenset()
    keep_fragment: bool = False
    max_length: int = 8192
    version: int = POLICY_FORMAT_VERSION

    def __post_init__(self) -> None:
        # Derived attributes (set below), declared for type checkers only.
        self._digest: str
        self._hash: int
        self.query_drop_keys: FrozenSet[str]
        self.query_drop_starts: Tuple[str, ...]
        self.query_keep_keys: FrozenSet[str]
        self.filters_query: bool
        set_ = object.__setattr__
        for flag in (
            "merge_schemes",
            "strip_www",
            "keep_userinfo",
            "lowercase_path",
            "strip_trailing_slash",
            "semicolon_separator",
            "keep_fragment",
        ):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} must be a bool, got {type(getattr(self, flag)).__name__}")
        if not is_integer(self.max_length):
            raise TypeError(f"max_length must be an int, got {type(self.max_length).__name__}")
        if self.max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {self.max_length}")
        if not is_integer(self.version):
            raise TypeError(f"version must be an int, got {type(self.version).__name__}")
        if not 1 <= self.version <= POLICY_FORMAT_VERSION:
            raise ValueError(f"version must be 1 (RFC 3986 reading) or 2 (WHATWG reading), got {self.version}")
        schemes = _names(self.schemes, "schemes")
        if not schemes:
            raise ValueError("schemes must name at least one scheme")
        for scheme in schemes:
            if not _SCHEME_RE.match(scheme):
                raise ValueError(
                    f"schemes: {scheme!r} is not a scheme (RFC 3986: a letter, then letters, digits, '+', '-', '.')"
                )
        set_(self, "schemes", schemes)
        for name in ("drop_params", "drop_prefixes", "keep_params"):
            set_(self, name, _names(getattr(self, name), name))
        # Derived once; plain attributes rather than fields, so they never take part in
        # equality, repr or the digest.
        set_(self, "_digest", _policy_digest(self))
        # Hashed once: the reference caches parsed bases keyed on (base, policy), so every
        # call with a base hashes the policy, and the generated hash rebuilds a 12-field tuple.
        set_(self, "_hash", hash(tuple(getattr(self, f.name) for f in fields(self))))
        # Query keys are compared as bytes decoded from form data, held as latin-1 text so
        # that one str lookup serves both clean ASCII keys and arbitrary decoded bytes.
        set_(self, "query_drop_keys", frozenset(_as_latin1(k) for k in self.drop_params))
        set_(self, "query_drop_starts", tuple(sorted(_as_latin1(k) for k in self.drop_prefixes)))
        set_(self, "query_keep_keys", frozenset(_as_latin1(k) for k in self.keep_params))
        set_(self, "filters_query", bool(self.drop_params or self.drop_prefixes))

    def __hash__(self) -> int:
        return self._hash

    @property
    def digest(self) -> str:
        """16 lowercase hex characters naming this policy, stable across processes, versions and machines.

        It is the first 64 bits of SHA-256 over a canonical JSON form of every field, the
        ``version`` written as ``policy_format``, so it changes whenever a field changes (and a
        version 1 policy keeps the digest it had before versions existed).
        """
        return self._digest


def _as_latin1(name: str) -> str:
    return name.encode("utf-8").decode("latin-1")


def _policy_digest(policy: CanonicalPolicy) -> str:
    document: Dict[str, object] = {"policy_format": policy.version}
    for f in fields(policy):
        if f.name == "version":
            continue
        value = getattr(policy, f.name)
        document[f.name] = sorted(value) if isinstance(value, frozenset) else value
    blob = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()[:16]


#: Policy 1 of docs/canonical-policy.md (RFC 3986 reading), bit for bit with its digest
#: 716e8d2d2c1c1eae: the crawls, filter files and namespaces made before policy 2 continue with it.
POLICY_V1 = CanonicalPolicy(version=1)
#: Policy 2 of docs/canonical-policy.md (links read as browsers read them).
POLICY_V2 = CanonicalPolicy(version=2)
#: The policy of docs/canonical-policy.md (policy 2); its digest is pinned in the tests (a file format).
DEFAULT_POLICY = POLICY_V2
#: The policies a setting names (``--policy``, ``CRAWLDEDUP_POLICY``): name -> policy.
POLICIES: Dict[str, CanonicalPolicy] = {"v1": POLICY_V1, "v2": POLICY_V2}
_NAME_OF_DIGEST = {policy.digest: name for name, policy in POLICIES.items()}


def policy_named(name: str) -> CanonicalPolicy:
    """The policy a setting names: ``v1`` (:data:`POLICY_V1`) or ``v2`` (:data:`POLICY_V2`, the default).

    :raises ValueError: for any other name.
    """
    policy = POLICIES.get(name.strip().lower()) if isinstance(name, str) else None
    if policy is None:
        raise ValueError(f"canonical policy must be one of {', '.join(POLICIES)}, got {name!r}")
    return policy


def describe_policy(digest: str) -> str:
    """A policy digest as people name it: ``canonical policy 1 (716e8d2d2c1c1eae)``, or a custom one."""
    name = _NAME_OF_DIGEST.get(digest)
    if name is None:
        return f"a custom canonical policy ({digest})"
    return f"canonical policy {name[1:]} ({digest})"


def policy_conflict(stored: str, ours: str) -> str:
    """Why a file or namespace made with policy digest ``stored`` refuses a crawl using ``ours``,
    to follow "made with": both policies, and the setting that continues the old crawl."""
    name = _NAME_OF_DIGEST.get(stored)
    if name is not None:
        how = (
            f"to continue the crawl that made it, pass --policy {name} (CRAWLDEDUP_POLICY={name}; "
            f"in Python policy=POLICY_{name.upper()})"
        )
    else:
        how = "to continue the crawl that made it, use the CanonicalPolicy it was made with"
    return f"{describe_policy(stored)}, this crawl uses {describe_policy(ours)}: {how}"
