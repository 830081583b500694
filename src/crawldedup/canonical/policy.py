"""The canonicalization policy, its digest, and the types shared by both canonicalizer twins.

These live apart from the implementation so that the pure-Python canonicalizer and its
compiled twin raise the same :class:`InvalidURL` and read the same :class:`CanonicalPolicy`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, fields, replace
from typing import Any, Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Tuple

from .._checks import is_integer
from .rules import HostRule, folded_names

__all__ = [
    "Canonicalized",
    "CanonicalPolicy",
    "DEFAULT_DROP_PARAMS",
    "DEFAULT_POLICY",
    "InvalidURL",
    "POLICIES",
    "POLICY_FORMAT_VERSION",
    "POLICY_V1",
    "POLICY2_DROP_PARAMS",
    "POLICY_V2",
    "POLICY_V3",
    "DEFAULT_POLICY_NAME",
    "describe_policy",
    "policy_conflict",
    "policy_named",
]

#: The newest version of the canonicalization rules (:attr:`CanonicalPolicy.version`): bumped
#: whenever the canonicalization a policy drives changes in a way that makes equal fields
#: produce different strings. A policy's version is part of its digest.
POLICY_FORMAT_VERSION = 3

#: The drop list of policies 1 and 2, kept bit for bit so that their digests stay the same.
#: It holds names that select content on some sites (``sid``, ``ref``, ``from``...): policy 3
#: keeps those by default.
POLICY2_DROP_PARAMS: FrozenSet[str] = frozenset(
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

#: Policy 3's drop list: query keys that never select content, only a click, a campaign, an
#: analytics visit or a session with a name no site uses for content (docs/canonical-policy.md,
#: "Policy 3"; the evidence for each name: docs/canonical.md).
DEFAULT_DROP_PARAMS: FrozenSet[str] = frozenset(
    {
        # Ad click identifiers.
        "gclid",
        "gclsrc",
        "dclid",
        "gbraid",
        "wbraid",
        "fbclid",
        "msclkid",
        "yclid",
        "ysclid",
        "twclid",
        "ttclid",
        "li_fat_id",
        "epik",
        "sccid",
        "rdt_cid",
        "irclickid",
        "srsltid",
        "s_kwcid",
        "ef_id",
        "wickedid",
        # Mail and analytics identifiers.
        "mc_cid",
        "mc_eid",
        "_ga",
        "_gl",
        "_hsenc",
        "_hsmi",
        "hsctatracking",
        "_kx",
        "mkt_tok",
        "igshid",
        "igsh",
        "ref_src",
        "spm",
        "vero_id",
        "vero_conv",
        "oly_anon_id",
        "oly_enc_id",
        "hsa_acc",
        "hsa_ad",
        "hsa_cam",
        "hsa_grp",
        "hsa_kw",
        "hsa_mt",
        "hsa_net",
        "hsa_src",
        "hsa_tgt",
        "hsa_ver",
        "pk_campaign",
        "pk_kwd",
        "pk_keyword",
        "pk_source",
        "pk_medium",
        "pk_content",
        "pk_cid",
        "mtm_campaign",
        "mtm_kwd",
        "mtm_keyword",
        "mtm_source",
        "mtm_medium",
        "mtm_content",
        "mtm_cid",
        "mtm_group",
        "mtm_placement",
        # Session identifiers under names no site gives content.
        "jsessionid",
        "phpsessid",
        "aspsessionid",
        "cftoken",
        "oscsid",
        "zenid",
    }
)

_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*\Z")


class InvalidURL(ValueError):
    """A URL (or a base) that the policy does not accept; the message names the problem."""


class Canonicalized(NamedTuple):
    """The result of :func:`crawldedup.canonicalize_many`.

    ``urls[i]`` is the canonical string of input ``i``, or ``None`` when it was rejected, in
    which case ``errors[i]`` is the :class:`InvalidURL` saying why.
    """

    urls: List[Optional[str]]
    errors: Dict[int, InvalidURL]


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
    :param version: the rules that read a URL: 3 (the default) reads hosts as the URL
        Standard's domain to ASCII does (docs/canonical-policy.md "Policy 3"); 2 parses the
        special schemes as browsers do but hosts by the ``idna`` package (:data:`POLICY_V2`);
        1 parses every URL by RFC 3986 (:data:`POLICY_V1`). Each keeps its policy's rules for
        crawls begun under it; the drop list is a field of its own (:data:`POLICY_V2` and
        :data:`POLICY_V1` carry :data:`POLICY2_DROP_PARAMS`).
    :param host_rules: :class:`HostRule` s, the options that differ on some hosts (most
        specific pattern wins); part of the digest when there are any.
    :raises TypeError: a field of the wrong type.
    :raises ValueError: an empty or malformed scheme or name, ``max_length`` below 1, an
        unknown ``version``, or two rules with one pattern.
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
    host_rules: Tuple[HostRule, ...] = ()

    def __post_init__(self) -> None:
        # Derived attributes (set below), declared for type checkers only.
        self._digest: str
        self._hash: int
        self.query_drop_keys: FrozenSet[str]
        self.query_drop_starts: Tuple[str, ...]
        self.query_keep_keys: FrozenSet[str]
        self.filters_query: bool
        self._by_host: Dict[str, CanonicalPolicy]
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
            raise ValueError(
                "version must be 1 (RFC 3986 reading), 2 (WHATWG reading) or 3 (WHATWG reading with the "
                f"URL Standard's hosts), got {self.version}"
            )
        schemes = folded_names(self.schemes, "schemes")
        if not schemes:
            raise ValueError("schemes must name at least one scheme")
        for scheme in schemes:
            if not _SCHEME_RE.match(scheme):
                raise ValueError(
                    f"schemes: {scheme!r} is not a scheme (RFC 3986: a letter, then letters, digits, '+', '-', '.')"
                )
        set_(self, "schemes", schemes)
        for name in ("drop_params", "drop_prefixes", "keep_params"):
            set_(self, name, folded_names(getattr(self, name), name))
        set_(self, "host_rules", _sorted_rules(self.host_rules))
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
        set_(self, "_by_host", {rule.match: _ruled(self, rule) for rule in self.host_rules})

    def __hash__(self) -> int:
        return self._hash

    def for_host(self, host: str) -> CanonicalPolicy:
        """The policy for a canonical host (no port): the most specific rule's, else this one.

        A rule matches its pattern and every host under it (``example.com`` matches
        ``shop.example.com``); the returned policy has no rules of its own.
        """
        by_host = self._by_host
        if not by_host:
            return self
        name = host
        while True:
            ruled = by_host.get(name)
            if ruled is not None:
                return ruled
            dot = name.find(".")
            if dot < 0:
                return self
            name = name[dot + 1 :]

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


def _sorted_rules(rules: object) -> Tuple[HostRule, ...]:
    if isinstance(rules, (str, bytes, HostRule)) or not isinstance(rules, Iterable):
        raise TypeError(f"host_rules must be a collection of HostRule, got {type(rules).__name__}")
    items = list(rules)
    for rule in items:
        if not isinstance(rule, HostRule):
            raise TypeError(f"host_rules must hold HostRule items, got {type(rule).__name__}")
    items.sort(key=lambda rule: rule.match)
    for before, after in zip(items, items[1:]):
        if before.match == after.match:
            raise ValueError(f"host_rules: two rules for {before.match!r}; merge them into one")
    return tuple(items)


def _ruled(policy: CanonicalPolicy, rule: HostRule) -> CanonicalPolicy:
    """The policy on the hosts of ``rule``: its keys dropped or kept first of all, its options set."""
    changes: Dict[str, Any] = {
        "host_rules": (),
        "drop_params": (policy.drop_params | rule.drop_params) - rule.keep_params,
        "drop_prefixes": policy.drop_prefixes | rule.drop_prefixes,
        "keep_params": (policy.keep_params - rule.drop_params) | rule.keep_params,
        **rule.options(),
    }
    return replace(policy, **changes)


def _policy_digest(policy: CanonicalPolicy) -> str:
    document: Dict[str, object] = {"policy_format": policy.version}
    for f in fields(policy):
        if f.name == "version":
            continue
        value = getattr(policy, f.name)
        if f.name == "host_rules":
            # Left out when empty, so that policies without rules keep the digests they had.
            if value:
                document[f.name] = [rule.document() for rule in value]
            continue
        document[f.name] = sorted(value) if isinstance(value, frozenset) else value
    blob = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()[:16]


#: Policy 1 of docs/canonical-policy.md (RFC 3986 reading), bit for bit with its digest
#: 716e8d2d2c1c1eae: the crawls, filter files and namespaces made before policy 2 continue with it.
POLICY_V1 = CanonicalPolicy(version=1, drop_params=POLICY2_DROP_PARAMS)
#: Policy 2 of docs/canonical-policy.md (links read as browsers read them), bit for bit with its
#: digest c9072d952e9a5c87: the crawls made before policy 3 continue with it.
POLICY_V2 = CanonicalPolicy(version=2, drop_params=POLICY2_DROP_PARAMS)
#: Policy 3 of docs/canonical-policy.md (hosts as browsers read them, no content parameter dropped).
POLICY_V3 = CanonicalPolicy()
#: The policy of docs/canonical-policy.md (policy 3); its digest is pinned in the tests (a file format).
DEFAULT_POLICY = POLICY_V3
#: The policies a setting names (``--policy``, ``CRAWLDEDUP_POLICY``): name -> policy.
POLICIES: Dict[str, CanonicalPolicy] = {"v1": POLICY_V1, "v2": POLICY_V2, "v3": POLICY_V3}
#: The newest policy's name, the default of every setting.
DEFAULT_POLICY_NAME = "v3"
_NAME_OF_DIGEST = {policy.digest: name for name, policy in POLICIES.items()}


def policy_named(name: str) -> CanonicalPolicy:
    """The policy a setting names: ``v1`` (:data:`POLICY_V1`), ``v2`` (:data:`POLICY_V2`) or
    ``v3`` (:data:`POLICY_V3`, the default).

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
        how = (
            "to continue the crawl that made it, use the policy file (--policy-file, CRAWLDEDUP_POLICY_FILE) "
            "or the CanonicalPolicy it was made with"
        )
    return f"{describe_policy(stored)}, this crawl uses {describe_policy(ours)}: {how}"
