"""``crawldedup audit``: which pages a crawl fetched more than once, and through which spellings.

A log of fetched URLs is canonicalized with the policy ``filter`` uses; every canonical form
met on more than one line is a page fetched more than once. For each spelling that merged into
it, :func:`merge_rules` says why, by comparing the spelling's parsed parts with the canonical
form's (``urllib.parse``): it explains a merge, it does not canonicalize.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import sys
from collections import Counter
from typing import Any, Dict, Iterable, List, Optional, Tuple
from urllib.parse import SplitResult, unquote, unquote_plus, urlsplit

from .._wording import counted
from ..canonical import CanonicalPolicy, canonicalize_many
from ._args import INPUTS_HELP, positive_int
from ._io import InputReader, Output, as_read
from ._lines import stdout
from ._store_options import add_policy_option, chosen_policy
from .audit_rules import RuleLearner, parse_fingerprint
from .exits import ExitCode, using

WRAPPED = "wrapped URL"
CASE = "scheme/host case"
UNICODE_HOST = "Unicode host"
HOST_DOT = "host trailing dot"
PORT = "default port"
DOT_SEGMENTS = "dot segments"
TRAILING_SLASH = "trailing slash"
ENCODING = "percent-encoding"
EMPTY_PARAMETER = "empty parameter"
TRACKING = "tracking parameter dropped"
ORDER = "parameter order"
FRAGMENT = "fragment"
OTHER = "other"
#: Every rule :func:`merge_rules` names, in the order it lists them.
RULES = (
    WRAPPED,
    CASE,
    UNICODE_HOST,
    HOST_DOT,
    PORT,
    DOT_SEGMENTS,
    TRAILING_SLASH,
    ENCODING,
    EMPTY_PARAMETER,
    TRACKING,
    ORDER,
    FRAGMENT,
    OTHER,
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


def merge_rules(spelling: str, canonical: str) -> List[str]:
    """The rules (from :data:`RULES`) that make ``spelling`` read as ``canonical``.

    Empty when the spelling is the canonical form; ``other`` for a difference none of the named
    rules explains (a host IDNA 2003 cannot encode, a userinfo...). The comparison
    is of parsed parts: it names what differs, and does not apply the canonical policy again.
    """
    if spelling == canonical:
        return []
    found = set()
    if urlsplit(spelling).scheme.lower() not in _DEFAULT_PORTS and "%" in spelling:
        unwrapped = unquote(spelling)
        if urlsplit(unwrapped).scheme.lower() in _DEFAULT_PORTS:
            found.add(WRAPPED)
            spelling = unwrapped
    ours, theirs = urlsplit(spelling), urlsplit(canonical)
    if spelling.partition(":")[0] != theirs.scheme:  # urlsplit lowercases the scheme
        found.add(CASE if spelling.partition(":")[0].lower() == theirs.scheme else OTHER)
    found.update(_authority_rules(ours, theirs))
    found.update(_path_rules(ours.path, theirs.path))
    found.update(_query_rules(ours.query, theirs.query))
    if ours.fragment != theirs.fragment or (spelling.endswith("#") and not canonical.endswith("#")):
        found.add(FRAGMENT)
    return [rule for rule in RULES if rule in found] or [OTHER]


def _host(parts: SplitResult) -> str:
    """The host as written (urllib's ``hostname`` is lowercased)."""
    host_port = parts.netloc.rpartition("@")[2]
    if host_port.startswith("["):
        return host_port[: host_port.find("]") + 1]
    return host_port.partition(":")[0]


def _port(parts: SplitResult) -> Optional[int]:
    try:
        return parts.port
    except ValueError:
        return None


def _authority_rules(ours: SplitResult, theirs: SplitResult) -> Iterable[str]:
    host, canonical_host = _host(ours), _host(theirs)
    if host != canonical_host:
        yield from _host_rules(host, canonical_host)
    port = _port(ours)
    if port != _port(theirs):
        yield PORT if port == _DEFAULT_PORTS.get(theirs.scheme) else OTHER
    if ours.netloc.rpartition("@")[0] != theirs.netloc.rpartition("@")[0]:
        yield OTHER


def _host_rules(host: str, canonical: str) -> Iterable[str]:
    if host.endswith(".") and not canonical.endswith("."):
        yield HOST_DOT
        host = host[:-1]
    if host.lower() != host:
        yield CASE
        host = host.lower()
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
            yield UNICODE_HOST
        except UnicodeError:  # what IDNA 2003 refuses: no cheap rule to name
            pass
    if host != canonical:
        yield OTHER


def _path_rules(path: str, canonical: str) -> Iterable[str]:
    if any(segment in (".", "..") for segment in path.split("/")):
        yield DOT_SEGMENTS
        trailing = path.endswith("/")
        path = posixpath.normpath(path).replace("//", "/")
        path = "/" if path == "." else path + ("/" if trailing and path != "/" else "")
    if path == canonical:
        return
    if not path and canonical == "/":  # http://host and http://host/
        yield TRAILING_SLASH
        return
    if unquote(path) != unquote(canonical) and unquote(path).rstrip("/") == unquote(canonical).rstrip("/"):
        yield TRAILING_SLASH
        path, canonical = path.rstrip("/"), canonical.rstrip("/")
    if path != canonical:
        yield ENCODING if unquote(path) == unquote(canonical) else OTHER


def _query_rules(query: str, canonical: str) -> Iterable[str]:
    pieces = [piece for piece in query.split("&") if piece]
    if query and len(pieces) < query.count("&") + 1:  # a=1&&b=2, ?&a=1
        yield EMPTY_PARAMETER
    canonical_pieces = [piece for piece in canonical.split("&") if piece]
    kept_keys = {_decoded(piece)[0] for piece in canonical_pieces}
    kept = [piece for piece in pieces if _decoded(piece)[0] in kept_keys]
    if len(kept) < len(pieces):
        yield TRACKING
    decoded, canonical_decoded = [_decoded(p) for p in kept], [_decoded(p) for p in canonical_pieces]
    if decoded != canonical_decoded:
        yield ORDER if sorted(decoded) == sorted(canonical_decoded) else OTHER
    if sorted(kept) != sorted(canonical_pieces) and sorted(decoded) == sorted(canonical_decoded):
        yield ENCODING


def _decoded(piece: str) -> Tuple[str, str]:
    key, _, value = piece.partition("=")
    return unquote_plus(key), unquote_plus(value)


class Audit:
    """The counts of one audit: lines, invalid lines, and the spellings of each canonical form."""

    def __init__(self, policy: Optional[CanonicalPolicy] = None) -> None:
        #: The canonical policy (None: the default), as ``filter`` is given it.
        self.policy = policy
        self.lines = 0
        self.invalid = 0
        self.spellings: Dict[str, Counter[str]] = {}

    def read(self, reader: InputReader) -> None:
        """Canonicalize every line of ``reader``, one block (~1 MiB of lines) per call."""
        for _, _, block in reader.blocks():
            lines = block.lines
            result = canonicalize_many(as_read(lines) if reader.undecodable else lines, policy=self.policy)
            self.lines += len(lines)
            self.invalid += len(result.errors)
            for line, url in zip(lines, result.urls):
                if url is not None:
                    self.spellings.setdefault(url, Counter())[line] += 1

    def report(self, top: Optional[int], spellings: Optional[int]) -> Dict[str, Any]:
        """The audit as one JSON-ready document (the fields docs/cli.md lists).

        :param top: at most this many pages in ``repeated`` (all when None), most-fetched first.
        :param spellings: at most this many spellings per page (all when None), most-used first.
        """
        repeated = sorted(
            ((sum(counts.values()), url) for url, counts in self.spellings.items() if sum(counts.values()) > 1),
            key=lambda item: (-item[0], item[1]),
        )
        valid = self.lines - self.invalid
        return {
            "lines": self.lines,
            "invalid": self.invalid,
            "distinct_pages": len(self.spellings),
            "pages_fetched_more_than_once": len(repeated),
            "extra_fetches": valid - len(self.spellings),
            "repeated": [self._page(url, fetches, spellings) for fetches, url in repeated[:top]],
        }

    def _page(self, url: str, fetches: int, limit: Optional[int]) -> Dict[str, Any]:
        counts = sorted(self.spellings[url].items(), key=lambda item: (-item[1], item[0]))
        shown: List[Dict[str, Any]] = [
            {"spelling": spelling, "fetches": count, "rules": merge_rules(spelling, url)}
            for spelling, count in counts[:limit]
        ]
        return {
            "canonical": url,
            "fetches": fetches,
            "distinct_spellings": len(counts),
            "rules": [rule for rule in RULES if any(rule in row["rules"] for row in shown)],
            "spellings": shown,
        }


def render(report: Dict[str, Any]) -> str:
    """The human form of :meth:`Audit.report`: the totals, then each page and its spellings."""
    rows = [
        "crawldedup audit",
        f"  lines read              {report['lines']:>12,}",
        f"  invalid                 {report['invalid']:>12,}",
        f"  distinct pages          {report['distinct_pages']:>12,}",
        f"  fetched more than once  {report['pages_fetched_more_than_once']:>12,}",
        f"  extra fetches           {report['extra_fetches']:>12,}",
    ]
    if report["repeated"]:
        rows += ["", "fetches  page, then each spelling merged into it (fetches, spelling, rules)"]
    for page in report["repeated"]:
        rows.append(f"{page['fetches']:>7,}  {page['canonical']}")
        for row in page["spellings"]:
            rules = ", ".join(row["rules"]) or "canonical form"
            rows.append(f"{row['fetches']:>16,}  {row['spelling']}  ({rules})")
        hidden = page["distinct_spellings"] - len(page["spellings"])
        if hidden:
            rows.append(f"{'':>16}  ... {counted(hidden, 'more spelling')} (--spellings)")
    hidden = report["pages_fetched_more_than_once"] - len(report["repeated"])
    if hidden:
        rows.append(f"... {counted(hidden, 'more page')} fetched more than once (--top)")
    return "\n".join(rows) + "\n"


#: Pages and spellings per page that ``audit`` shows without --top and --spellings: one screen.
AUDIT_TOP = 20
AUDIT_SPELLINGS = 5


def run_audit(args: argparse.Namespace) -> int:
    """Report the pages a log of fetched URLs holds more than once, and the spellings that merged."""
    reader = InputReader(args.inputs)
    reader.check_readable()
    if args.content:
        return _audit_content(args, reader)
    audit = Audit(chosen_policy(args.policy, "audit", args.policy_file))
    audit.read(reader)
    top = args.top if args.top is not None or args.json else AUDIT_TOP
    spellings = args.spellings if args.spellings is not None or args.json else AUDIT_SPELLINGS
    report = audit.report(top, spellings)
    text = json.dumps(report, indent=2) + "\n" if args.json else render(report)
    Output(stdout(), "stdout").write_lines(text.splitlines())
    return ExitCode.OK


def _audit_content(args: argparse.Namespace, reader: InputReader) -> int:
    """``audit --content``: per host, which parameters changed the pages' content (keep), which
    never did over --min-pages groups (drop), and a policy file of rules with --write-policy."""
    learner = RuleLearner(chosen_policy(args.policy, "audit", args.policy_file), args.distance, args.min_pages)
    bad = 0
    for name, first, block in reader.blocks():
        for number, line in enumerate(block.lines, first):
            url, tab, fingerprint = line.rstrip("\r\n").rpartition("\t")
            try:
                if not tab:
                    raise ValueError("expected URL<TAB>SIMHASH")
                learner.add(url, parse_fingerprint(fingerprint))
            except ValueError as exc:
                bad += 1
                if bad <= 10:
                    print(f"{name}:{number}: {exc}", file=sys.stderr)
    rows = [
        f"{item.host}\t{item.parameter}\t{item.verdict}\t{item.pages}\t{item.changed}" for item in learner.verdicts()
    ]
    Output(stdout(), "stdout").write_lines(rows)
    if args.write_policy:
        with (
            using(f"cannot write {args.write_policy}", ExitCode.IO),
            open(args.write_policy, "w", encoding="utf-8") as out,
        ):
            out.write(learner.policy_file())
    print(
        f"crawldedup audit: {counted(learner.records, 'page')}, {counted(learner.invalid + bad, 'line')} "
        f"not read, {counted(len(rows), 'parameter')} judged",
        file=sys.stderr,
    )
    return ExitCode.INVALID if bad or learner.invalid else ExitCode.OK


def add_command(commands: Any, epilog: str, formatter: type) -> None:
    """Add ``audit`` to the ``crawldedup`` command's subcommands."""
    audit = commands.add_parser(
        "audit",
        help="find the pages a log of fetched URLs holds more than once",
        description="Canonicalize a log of fetched URLs as filter does and report each page fetched more "
        "than once: its fetches, the spellings that merged into it, and the rule that merged each. "
        "Invalid lines are counted.",
        epilog=epilog,
        formatter_class=formatter,
    )
    audit.add_argument("inputs", nargs="*", metavar="FILE", help=INPUTS_HELP)
    audit.add_argument(
        "--top",
        type=positive_int,
        metavar="N",
        help=f"show the N most-fetched pages (default {AUDIT_TOP}; with --json: all)",
    )
    audit.add_argument(
        "--spellings",
        type=positive_int,
        metavar="N",
        help=f"show the N most-used spellings of each page (default {AUDIT_SPELLINGS}; with --json: all)",
    )
    audit.add_argument("--json", action="store_true", help="print one JSON document (fields in docs/cli.md)")
    audit.add_argument(
        "--content",
        action="store_true",
        help="lines are URL<TAB>SIMHASH of fetched pages: print HOST PARAMETER VERDICT PAGES CHANGED, "
        "where keep means the parameter changed the content and drop that it never did over --min-pages",
    )
    audit.add_argument(
        "--distance", type=int, default=3, metavar="K", help="--content: bits apart that make two pages differ (3)"
    )
    audit.add_argument(
        "--min-pages",
        type=positive_int,
        default=5,
        metavar="N",
        help="--content: pages differing from another in a parameter alone needed to call it safe to drop (5)",
    )
    audit.add_argument(
        "--write-policy", metavar="FILE", help="--content: write the learned per-host rules as a policy file"
    )
    add_policy_option(audit)
    audit.set_defaults(run=run_audit)
