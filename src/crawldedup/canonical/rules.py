"""Per-host rules of a canonical policy (docs/canonical-policy.md, "Policy files"): the options
that differ on some hosts, the parameters to drop or keep first of all.

A :class:`HostRule` names a host pattern (the host and every host under it) and the options it
changes; :meth:`CanonicalPolicy.for_host <crawldedup.CanonicalPolicy.for_host>` picks the most
specific rule for a canonical host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Dict, FrozenSet, Iterable, Optional, Union

from ._domain import DomainError, domain_to_ascii

__all__ = ["RULE_OPTIONS", "HostRule", "folded_names", "host_pattern"]

#: The policy options a rule may set for its hosts: those that act after the host is known.
RULE_OPTIONS = ("lowercase_path", "strip_trailing_slash", "semicolon_separator", "keep_fragment")

_PATTERN_RE = re.compile(r"[a-z0-9_\-]+(?:\.[a-z0-9_\-]+)*\Z")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def folded_names(value: Union[str, Iterable[str]], what: str) -> FrozenSet[str]:
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


def host_pattern(text: str) -> str:
    """A host pattern as rules match it: the canonical host (lowercase, A-labels, no trailing dot).

    :raises ValueError: for a pattern that names no host (empty, a wildcard, a port, a path...).
    """
    if not isinstance(text, str):
        raise TypeError(f"a host pattern must be a str, got {type(text).__name__}")
    host = text.strip().rstrip(".")
    if host.startswith("*."):
        raise ValueError(
            f"host pattern {text!r}: a pattern already matches its host and every host under it; write {host[2:]!r}"
        )
    if not host.isascii():
        try:
            host = domain_to_ascii(host).rstrip(".")
        except DomainError as exc:
            raise ValueError(f"host pattern {text!r} is no host: {exc}") from None
    host = host.translate(_ASCII_LOWER)
    if _PATTERN_RE.match(host) is None:
        raise ValueError(
            f"host pattern {text!r} is no host name (letters, digits, '-', '_' and dots; no scheme, port or path)"
        )
    return host


@dataclass(frozen=True)
class HostRule:
    """What changes on the hosts that ``match`` names (that host and every host under it).

    :param match: a host name, Unicode or ASCII; stored as its canonical host.
    :param drop_params: query keys dropped on these hosts, on top of the policy's list.
    :param drop_prefixes: key prefixes dropped on these hosts, on top of the policy's.
    :param keep_params: query keys never dropped on these hosts (wins over every drop list).
    :param lowercase_path: ``strip_trailing_slash``, ``semicolon_separator``, ``keep_fragment``:
        the policy's option of that name on these hosts; None leaves the policy's.
    :raises TypeError: a field of the wrong type.
    :raises ValueError: a pattern that names no host, or a key both dropped and kept.
    """

    match: str
    drop_params: FrozenSet[str] = frozenset()
    drop_prefixes: FrozenSet[str] = frozenset()
    keep_params: FrozenSet[str] = frozenset()
    lowercase_path: Optional[bool] = None
    strip_trailing_slash: Optional[bool] = None
    semicolon_separator: Optional[bool] = None
    keep_fragment: Optional[bool] = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "match", host_pattern(self.match))
        for name in ("drop_params", "drop_prefixes", "keep_params"):
            set_(self, name, folded_names(getattr(self, name), f"host rule {self.match!r}: {name}"))
        for option in RULE_OPTIONS:
            value = getattr(self, option)
            if value is not None and not isinstance(value, bool):
                raise TypeError(f"host rule {self.match!r}: {option} must be a bool, got {type(value).__name__}")
        both = self.drop_params & self.keep_params
        if both:
            raise ValueError(f"host rule {self.match!r} both drops and keeps {', '.join(sorted(both))}")

    def options(self) -> Dict[str, bool]:
        """The policy options this rule sets (those not None)."""
        return {name: getattr(self, name) for name in RULE_OPTIONS if getattr(self, name) is not None}

    def document(self) -> Dict[str, object]:
        """The rule as the digest and policy files write it: lists sorted, unset options left out."""
        out: Dict[str, object] = {"match": self.match}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "match" or value is None or value == frozenset():
                continue
            out[f.name] = sorted(value) if isinstance(value, frozenset) else value
        return out


def host_of(authority: str) -> str:
    """The host of a canonical authority: without user info and port."""
    host = authority[authority.rfind("@") + 1 :]
    colon = host.rfind(":")
    if colon >= 0 and colon > host.rfind("]"):
        host = host[:colon]
    return host
