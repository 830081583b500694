"""``crawldedup audit --content``: which query parameters change a host's pages, learned from
what fetched pages hold (docs/canonical.md, "Learning rules from content").

Each input line is ``URL<TAB>SIMHASH`` (a page's 64-bit content fingerprint, hex or decimal).
After "Do not crawl in the DUST" (Bar-Yossef, Keidar, Schonfeld, WWW 2007) and Koppula et al.
(WSDM 2010), a parameter is judged by URLs that differ in it alone: per host, URLs are grouped
by (path, every other parameter), and a group whose members differ in the parameter's value is
compared with its first page: each page that differs from it in that parameter alone is one
piece of evidence, the content changed with it (a fingerprint farther than ``distance``), or
it did not.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Dict, Iterable, List, NamedTuple, Optional, Set, Tuple
from urllib.parse import unquote_plus

from ..canonical import CanonicalPolicy, HostRule, InvalidURL, canonicalize
from ..canonical.policy_file import policy_file_text
from ..canonical.rules import host_of

__all__ = ["DROP", "KEEP", "UNKNOWN", "ParameterVerdict", "RuleLearner"]

KEEP = "keep"
DROP = "drop"
UNKNOWN = "unknown"


class ParameterVerdict(NamedTuple):
    host: str
    parameter: str
    verdict: str  # KEEP, DROP or UNKNOWN
    pages: int  # pages compared with one that differs from them in this parameter alone
    changed: int  # of which the content changed with it


def parse_fingerprint(text: str) -> int:
    """A 64-bit fingerprint written in hex (``0x`` optional) or decimal.

    :raises ValueError: for anything else.
    """
    text = text.strip()
    value = int(text, 16) if text.lower().startswith("0x") or not text.isdigit() else int(text)
    if not 0 <= value < 1 << 64:
        raise ValueError(f"a fingerprint has 64 bits, got {text!r}")
    return value


class RuleLearner:
    """Collects (URL, fingerprint) records and judges each parameter of each host.

    :param policy: the crawl's policy: URLs are read by it with nothing dropped, and the rules
        written are relative to it.
    :param distance: the Hamming distance above which two fingerprints are different content.
    :param min_pages: pages compared a parameter needs, none changed, to be safe to drop.
    """

    def __init__(self, policy: CanonicalPolicy, distance: int = 3, min_pages: int = 5) -> None:
        self.policy = policy
        self.distance = distance
        self.min_pages = min_pages
        self._reader = dataclasses.replace(
            policy, drop_params=frozenset(), drop_prefixes=frozenset(), keep_params=frozenset(), host_rules=()
        )
        # host -> [(path, pairs, fingerprint)]; pairs are (folded key, canonical pair text)
        self._pages: Dict[str, List[Tuple[str, Tuple[Tuple[str, str], ...], int]]] = defaultdict(list)
        self.records = 0
        self.invalid = 0

    def add(self, url: str, fingerprint: int) -> None:
        """One fetched page; a URL the policy refuses is counted in ``invalid``."""
        self.records += 1
        try:
            canonical = canonicalize(url, policy=self._reader)
        except (InvalidURL, TypeError):
            self.invalid += 1
            return
        rest = canonical.split("://", 1)[1]
        slash = rest.find("/")
        authority, target = rest[:slash], rest[slash:]
        path, _, query = target.partition("?")
        pairs = tuple(
            (unquote_plus(pair.partition("=")[0]).lower(), pair) for pair in query.split("&") if query and pair
        )
        self._pages[host_of(authority)].append((path, pairs, fingerprint))

    def verdicts(self) -> List[ParameterVerdict]:
        """Every (host, parameter) seen, judged; sorted by host and parameter."""
        out: List[ParameterVerdict] = []
        for host in sorted(self._pages):
            pages = self._pages[host]
            names: Set[str] = {key for _, pairs, _ in pages for key, _ in pairs}
            for name in sorted(names):
                groups: Dict[Tuple[str, Tuple[str, ...]], List[Tuple[Tuple[str, ...], int]]] = defaultdict(list)
                for path, pairs, fingerprint in pages:
                    others = tuple(text for key, text in pairs if key != name)
                    values = tuple(text for key, text in pairs if key == name)
                    groups[(path, others)].append((values, fingerprint))
                evidence = changed = 0
                for members in groups.values():
                    first_values, first = members[0]
                    differing = [fp for values, fp in members[1:] if values != first_values]
                    if not differing:
                        continue
                    evidence += len(differing)
                    changed += sum(bin(first ^ fp).count("1") > self.distance for fp in differing)
                if evidence == 0:
                    continue
                verdict = KEEP if changed else DROP if evidence >= self.min_pages else UNKNOWN
                out.append(ParameterVerdict(host, name, verdict, evidence, changed))
        return out

    def rules(self, verdicts: Optional[Iterable[ParameterVerdict]] = None) -> List[HostRule]:
        """A rule per host where the verdicts differ from what the policy does there: the safe
        names it keeps to drop, the names it drops that changed content to keep."""
        by_host: Dict[str, Tuple[Set[str], Set[str]]] = defaultdict(lambda: (set(), set()))
        for item in self.verdicts() if verdicts is None else verdicts:
            ruled = self.policy.for_host(item.host)
            dropped = item.parameter not in ruled.keep_params and (
                item.parameter in ruled.drop_params or item.parameter.startswith(tuple(ruled.drop_prefixes))
            )
            if item.verdict == DROP and not dropped:
                by_host[item.host][0].add(item.parameter)
            elif item.verdict == KEEP and dropped:
                by_host[item.host][1].add(item.parameter)
        return [
            HostRule(host, drop_params=frozenset(drop), keep_params=frozenset(keep))
            for host, (drop, keep) in sorted(by_host.items())
        ]

    def policy_file(self) -> str:
        """A policy file of the crawl's named policy (by its version) with the learned rules."""
        verdicts = self.verdicts()
        rules = self.rules(verdicts)
        notes = {}
        for rule in rules:
            lines = [
                f"{item.parameter}: {item.verdict}, content changed in {item.changed} of {item.pages} pages"
                for item in verdicts
                if item.host == rule.match and item.parameter in rule.drop_params | rule.keep_params
            ]
            notes[rule.match] = "\n".join(lines)
        return policy_file_text(f"v{self.policy.version}", {}, rules, notes)
