"""``crawldedup content``: what a fetch of each page found, against the pages stored before.

Inputs are HTML files, or JSON lines of ``{"url": ..., "html": ...}`` (a file named
``*.jsonl`` or ``*.ndjson``, gzip or not, and stdin). Each page's text becomes a SimHash,
and :meth:`~crawldedup.Deduplicator.check_content` says per page ``new``, ``unchanged``,
``changed`` or ``duplicate``, which is printed as one tab-separated line::

    VERDICT  CANONICAL-URL  [DISTANCE  [DUPLICATE-OF]]

A page that cannot be checked (a record that is not such an object, a URL the canonical
policy refuses) prints ``invalid`` and the page's name, its reason goes to stderr as
``NAME:LINE: reason``, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import PurePath
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union
from urllib.parse import quote, urljoin

from .._wording import counted
from ..bloom import FilterFileError
from ..config import DedupConfig
from ..content import page_text, simhash_many
from ..content.index_format import MAX_DISTANCE
from ..dedup import Deduplicator
from ..exact import ExactFileError
from ..pages import INVALID, PAGES_SUFFIX, VERDICTS, PageFileError
from ..stores.base import NamespaceConflict, StoreUnavailable
from ..stores.factory import LOCAL_STRATEGIES
from ._args import base_url, file_path, integer_between, namespace_name, round_name, strategy
from ._io import InputReader, Output
from ._store_options import add_location_options
from .exits import CLIError, ExitCode, error_for, usage_error

__all__ = ["BASE", "BATCH_PAGES", "add_command", "run_content"]

#: Pages per check: 256 pages of 100 KB are 25 MB of HTML in memory at once.
BATCH_PAGES = 256
#: The page an HTML file is, without --base: its path under this URL.
BASE = "http://localhost/"
#: Where pages are kept without --state, --strategy or the environment (beside filter's file).
DEFAULT_STATE = "crawldedup.bloom"
_JSON_SUFFIXES = (".jsonl", ".ndjson")

#: (name shown in messages, line number or 0 for a whole file, URL or None, HTML or a problem)
Page = Tuple[str, int, Optional[str], Union[bytes, str, None], Optional[str]]


def add_command(commands: Any, epilog: str, formatter_class: type) -> None:
    """Add the ``content`` subcommand to the ``crawldedup`` command's subparsers."""
    parser = commands.add_parser(
        "content",
        help="say per page whether its content is new, unchanged, changed or a duplicate",
        description="Fingerprint each page's text and compare it with the page's last fetch and with "
        "the other pages stored: print VERDICT<TAB>URL[<TAB>DISTANCE[<TAB>DUPLICATE-OF]] per page.",
        epilog=epilog,
        formatter_class=formatter_class,
    )
    parser.add_argument(
        "inputs",
        nargs="*",
        metavar="FILE",
        help='HTML files, or JSON lines of {"url", "html"} (*.jsonl, *.ndjson, gzip or not; \'-\' or none: stdin)',
    )
    parser.add_argument(
        "--base",
        type=base_url,
        default=BASE,
        metavar="URL",
        help=f"an HTML file is the page at its path under this URL (default {BASE})",
    )
    parser.add_argument(
        "--max-distance",
        type=_distance,
        default=3,
        metavar="K",
        help="a page within K bits (1 to 7) of a fingerprint is near it (default 3)",
    )
    parser.add_argument(
        "--state",
        type=file_path,
        metavar="FILE",
        help=f"local strategy: the state file, pages in FILE{PAGES_SUFFIX} "
        f"(default $CRAWLDEDUP_STATE or ./{DEFAULT_STATE})",
    )
    parser.add_argument(
        "--strategy", type=strategy, metavar="S", help="keep pages beside a store's claims ($CRAWLDEDUP_STRATEGY)"
    )
    add_location_options(parser)
    parser.add_argument(
        "--namespace",
        type=namespace_name,
        metavar="NAME",
        help="the crawl's key prefix in the store ($CRAWLDEDUP_NAMESPACE)",
    )
    parser.add_argument("--round", type=round_name, metavar="NAME", help="a crawl round: pages of <namespace>:<NAME>")
    parser.add_argument(
        "--batch-size",
        type=_batch_size,
        default=BATCH_PAGES,
        metavar="N",
        help=f"pages per check (default {BATCH_PAGES})",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no summary")
    parser.set_defaults(run=run_content)


def _distance(text: str) -> int:
    return integer_between(text, 1, MAX_DISTANCE, f"an integer in [1, {MAX_DISTANCE}]")


def _batch_size(text: str) -> int:
    return integer_between(text, 1, None, "a positive integer")


def _open(args: argparse.Namespace) -> Deduplicator:
    """The Deduplicator of the options and the environment; its errors as one-line CLIErrors."""
    state = None
    try:
        config = DedupConfig.from_env()
        strategy = args.strategy or config.strategy
        state = args.state or config.state_path or (DEFAULT_STATE if strategy in LOCAL_STRATEGIES else None)
        return Deduplicator(
            strategy,
            config=config,
            redis_url=args.redis_url,
            namespace=args.namespace,
            crawl_round=args.round,
            state=state,
            sqlite_path=args.sqlite,
            postgres_url=args.postgres_url,
            service_url=args.service_url,
            content_distance=args.max_distance,
        )
    except (NamespaceConflict, FilterFileError, ExactFileError) as exc:
        raise CLIError(ExitCode.STATE, str(exc)) from None
    except (StoreUnavailable, OSError) as exc:
        raise _store_error(exc, state) from None
    except (TypeError, ValueError) as exc:  # a setting out of range, naming it
        raise usage_error("content", str(exc)) from None


def _store_error(exc: OSError, state: Optional[str]) -> CLIError:
    """The line of a store that failed, or of the state file (its pages beside it) that did."""
    error = error_for(exc, f"state file {state}" if state else "the pages' file")
    assert error is not None  # every OSError has a line
    return error


def _is_json_lines(name: str) -> bool:
    stem = name[:-3] if name.endswith(".gz") else name
    return name == "-" or stem.endswith(_JSON_SUFFIXES)


def _record(line: str) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """``(url, html, None)`` of one JSON line, or ``(None, None, problem)``."""
    try:
        record = json.loads(line)
    except ValueError as exc:
        return None, None, f"not JSON ({exc})"
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("url"), str)
        or not isinstance(record.get("html"), str)
    ):
        return None, None, 'not a JSON object with "url" and "html" strings'
    return record["url"], record["html"], None


def pages(names: List[str], base: str) -> Iterator[Page]:
    """Every page of the inputs, in order: ``(name, line, url, html, problem)``.

    :raises CLIError: (``ExitCode.IO``) an input that cannot be read.
    """
    for name in names or ["-"]:
        if _is_json_lines(name):
            for _, first, block in InputReader([name]).blocks():
                for offset, line in enumerate(block.lines):
                    if line.strip():
                        url, html, problem = _record(line)
                        yield name, first + offset, url, html, problem
            continue
        try:
            with open(name, "rb") as file:
                data = file.read()
        except OSError as exc:
            raise CLIError(ExitCode.IO, f"cannot read input {name}: {exc.strerror or exc}") from None
        yield name, 0, urljoin(base, quote(PurePath(name).as_posix().lstrip("/"))), data, None


class ContentRun:
    """One ``content`` run: pages in batches, one check each, one line per page."""

    def __init__(self, dedup: Deduplicator, batch_size: int) -> None:
        self.dedup = dedup
        self.batch_size = batch_size
        self.out = Output(sys.stdout.buffer, "stdout")
        self.counts: Dict[str, int] = dict.fromkeys(VERDICTS, 0)

    def run(self, inputs: Iterator[Page]) -> None:
        batch: List[Page] = []
        for page in inputs:
            batch.append(page)
            if len(batch) >= self.batch_size:
                self._check(batch)
                batch = []
        if batch:
            self._check(batch)

    def _check(self, batch: List[Page]) -> None:
        usable = [page for page in batch if page[4] is None]
        texts = [page_text(html) for _, _, _, html, _ in usable]  # type: ignore[arg-type]  # usable pages hold HTML
        checks = iter(self.dedup.check_content([url for _, _, url, _, _ in usable], simhash_many(texts)))  # type: ignore[misc]  # usable pages hold a URL
        lines = []
        for name, line, url, _, problem in batch:
            where = f"{'<stdin>' if name == '-' else name}{f':{line}' if line else ''}"
            check = None if problem is not None else next(checks)
            if check is None or check.verdict == INVALID:
                reason = problem or f"not an accepted URL: {url!r}"
                print(f"crawldedup content: {where}: {reason}", file=sys.stderr)
                self.counts[INVALID] += 1
                lines.append(f"{INVALID}\t{url or where}")
                continue
            self.counts[check.verdict] += 1
            fields = [check.verdict, check.canonical or ""]
            if check.distance is not None:
                fields.append(str(check.distance))
            if check.duplicate_of is not None:
                fields.append(check.duplicate_of)
            lines.append("\t".join(fields))
        self.out.write_lines(lines)

    def summary(self) -> str:
        total = sum(self.counts.values())
        parts = ", ".join(f"{count:,} {verdict}" for verdict, count in self.counts.items())
        return f"crawldedup content: {counted(total, 'page')}: {parts}"


def run_content(args: argparse.Namespace) -> int:
    """Check each page of the inputs and print its verdict; see :func:`add_parser` for the options."""
    InputReader(args.inputs).check_readable()
    page_text("")  # selectolax, before anything is stored
    dedup = _open(args)
    try:
        job = ContentRun(dedup, args.batch_size)
        try:
            job.run(pages(args.inputs, args.base))
        except (NamespaceConflict, PageFileError) as exc:
            raise CLIError(ExitCode.STATE, str(exc)) from None
        except OSError as exc:
            raise _store_error(exc, dedup.local_filter.path) from None
        if not args.quiet:
            print(job.summary(), file=sys.stderr)
    finally:
        dedup.close()
    return ExitCode.INVALID if job.counts[INVALID] else ExitCode.OK
