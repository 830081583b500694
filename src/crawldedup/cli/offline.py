"""``crawldedup offline``: the offline job, and the history's exchanges with a state file.

    crawldedup offline run LINKS... --history DIR --new-pages OUT [--engine duckdb|spark|dask]
    crawldedup offline to-state --history DIR STATE
    crawldedup offline from-state STATE --urls FILE... --history DIR

``run`` reads Parquet links (``--url-column``, optionally ``--base-column``), writes each new
page once to ``--new-pages`` (Parquet: url, fingerprint), then replaces the history
(``crawldedup.offline``, docs/engines.md). DuckDB runs it by default, in this process; Spark
(``--engine spark``, ``--master``) and Dask (``--engine dask``, ``--scheduler``) when asked.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import Any

from .._wording import counted
from ..bloom import FilterFileError
from ._store_options import add_policy_option, chosen_policy
from .exits import CLIError, ExitCode, usage_error

__all__ = ["ENGINES", "add_command"]

#: The engines ``offline run`` can run on; the first is the default.
ENGINES = ("duckdb", "spark", "dask")


def add_command(commands: Any, epilog: str, formatter: Any) -> None:
    """Add ``offline`` to the ``crawldedup`` command's subcommands."""
    offline = commands.add_parser(
        "offline",
        help="dedup Parquet links against a Parquet history (DuckDB, Spark, Dask)",
        description="The offline job and its history (docs/engines.md); needs the engines extra.",
        epilog=epilog,
        formatter_class=formatter,
    )
    actions = offline.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = actions.add_parser(
        "run",
        help="links + history -> new pages + updated history",
        description="Canonicalize and fingerprint the links, write each page not in the history (or taken "
        "as new longer than --window-days ago) once to --new-pages, then replace the history.",
        formatter_class=formatter,
    )
    run.add_argument("links", nargs="+", metavar="LINKS", help="Parquet files or directories of links")
    run.add_argument("--history", required=True, metavar="DIR", help="the history (missing: a first run)")
    run.add_argument("--new-pages", required=True, metavar="OUT", help="where the new pages go (must not exist)")
    run.add_argument("--url-column", default="url", metavar="NAME", help="the links' URL column (default url)")
    run.add_argument("--base-column", metavar="NAME", help="the page each link was found on, if the links have it")
    run.add_argument("--window-days", type=float, metavar="DAYS", help="pages taken as new longer ago are new again")
    run.add_argument("--partitions", type=int, metavar="P", help="a new history's partitions (a power of two; 64)")
    run.add_argument("--engine", choices=ENGINES, default=ENGINES[0], help="where the job runs (default duckdb)")
    run.add_argument("--memory-limit", metavar="SIZE", help="duckdb: its memory limit (e.g. 8GB); it spills past it")
    run.add_argument("--temp-directory", metavar="DIR", help="duckdb: where it spills")
    run.add_argument("--master", default="local[*]", help="spark: the master URL (default local[*])")
    run.add_argument("--scheduler", metavar="ADDRESS", help="dask: a scheduler's address (default: a LocalCluster)")
    add_policy_option(run)
    run.set_defaults(run=run_offline)
    to_state = actions.add_parser(
        "to-state",
        help="a new state file holding the history's pages",
        description="Write a new state file (a plain Bloom filter stamped with the history's policy) holding "
        "every page of the history, or with --window-days those taken as new within it.",
        formatter_class=formatter,
    )
    to_state.add_argument("state", metavar="STATE", help="the state file to create")
    to_state.add_argument("--history", required=True, metavar="DIR")
    to_state.add_argument("--error-rate", type=float, default=0.01, help="the filter's false-positive rate")
    to_state.add_argument("--capacity", type=int, help="pages the filter is sized for (default: the history's)")
    to_state.add_argument("--window-days", type=float, metavar="DAYS")
    add_policy_option(to_state)
    to_state.set_defaults(run=run_to_state)
    from_state = actions.add_parser(
        "from-state",
        help="add to the history the listed pages a state file holds",
        description="A Bloom filter cannot list its pages: give them (--urls, a URL a line, e.g. what "
        "crawldedup filter printed); those the state file holds join the history.",
        formatter_class=formatter,
    )
    from_state.add_argument("state", metavar="STATE")
    from_state.add_argument("--urls", nargs="+", required=True, metavar="FILE")
    from_state.add_argument("--history", required=True, metavar="DIR")
    from_state.add_argument("--partitions", type=int, metavar="P")
    from_state.set_defaults(run=run_from_state)


def _window(days: Any) -> Any:
    if days is None:
        return None
    if not days > 0:
        raise usage_error("offline", f"--window-days must be a positive number, got {days}")
    return timedelta(days=days)


def _failure(exc: BaseException) -> CLIError:
    """One line for what a job can meet: a history or state file of another kind, a missing
    column, an output in the way, an unreadable input, an engine not installed."""
    from ..offline import HistoryError

    if isinstance(exc, (HistoryError, FilterFileError)):
        return CLIError(ExitCode.STATE, str(exc))
    if isinstance(exc, KeyError):
        return usage_error("offline", str(exc.args[0]))
    if isinstance(exc, ImportError):
        return CLIError(ExitCode.USAGE, f"{exc}: pip install crawldedup[engines]")
    if isinstance(exc, OSError):
        return CLIError(ExitCode.IO, f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
    return usage_error("offline", str(exc))


def run_offline(args: argparse.Namespace) -> int:
    """Run the job on the chosen engine and print its counts to stderr."""
    policy = chosen_policy(args.policy, "offline")
    try:
        from .. import offline

        job = offline.Job(
            args.links,
            args.history,
            args.new_pages,
            url=args.url_column,
            base=args.base_column,
            policy=policy,
            window=_window(args.window_days),
            partitions=args.partitions,
        )
        if args.engine == "spark":
            report = offline.run_on_spark(job, master=args.master)
        elif args.engine == "dask":
            report = offline.run_on_dask(job, scheduler=args.scheduler)
        else:
            report = offline.run_on_duckdb(job, memory_limit=args.memory_limit, temp_directory=args.temp_directory)
    except CLIError:
        raise
    except (ImportError, OSError, ValueError, KeyError) as exc:
        raise _failure(exc) from None
    print(
        f"crawldedup offline: {counted(report.links, 'link')} read ({report.null:,} null, {report.refused:,} "
        f"refused), {counted(report.pages, 'page')}, {report.new:,} new ({report.renewed:,} past the window); "
        f"history {report.history_before:,} -> {report.history_after:,} pages",
        file=sys.stderr,
    )
    return ExitCode.OK


def run_to_state(args: argparse.Namespace) -> int:
    policy = chosen_policy(args.policy, "offline")
    try:
        from ..offline.state import history_to_state

        pages = history_to_state(
            args.history,
            args.state,
            policy,
            error_rate=args.error_rate,
            capacity=args.capacity,
            window=_window(args.window_days),
        )
    except (ImportError, OSError, ValueError, KeyError) as exc:
        raise _failure(exc) from None
    print(f"crawldedup offline: {args.state} holds {counted(pages, 'page')} of {args.history}", file=sys.stderr)
    return ExitCode.OK


def run_from_state(args: argparse.Namespace) -> int:
    try:
        from ..offline.state import state_to_history

        report = state_to_history(args.state, args.urls, args.history, partitions=args.partitions)
    except (ImportError, OSError, ValueError, KeyError) as exc:
        raise _failure(exc) from None
    print(
        f"crawldedup offline: {counted(report.new, 'page')} of {args.state} joined {args.history} "
        f"({report.extra['not held']:,} listed pages not in the state file, {report.pages - report.new:,} "
        f"already there); history {report.history_before:,} -> {report.history_after:,} pages",
        file=sys.stderr,
    )
    return ExitCode.OK
