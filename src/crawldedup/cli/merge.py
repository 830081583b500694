"""``crawldedup merge``: the union of compatible filter files, written whole or not at all."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Any, List, cast

from .._wording import counted
from ..bloom import FilterFile, GrowingFilter, WindowedBloomFilter
from ..exact import ExactFilter, tier_directory
from ._args import file_path
from .exits import CLIError, ExitCode, using
from .info import read_filter


def run_merge(args: argparse.Namespace) -> int:
    """Write the union of compatible filters to a new file (all or nothing)."""
    if os.path.lexists(args.output) and not args.force:
        raise CLIError(ExitCode.STATE, f"{args.output} exists: refusing to overwrite it (use --force to replace it)")
    exact = [os.path.isdir(tier_directory(path)) for path in args.files]
    if any(exact):
        if not all(exact):
            with_tier = args.files[exact.index(True)]
            without = args.files[exact.index(False)]
            raise CLIError(
                ExitCode.STATE,
                f"cannot merge {without} (a Bloom filter alone) with {with_tier} (an exact tier beside it)",
            )
        return _merge_exact(args)
    filters = [read_filter(path) for path in args.files]
    try:
        for path, bloom in zip(args.files, filters):
            if isinstance(bloom, GrowingFilter):
                raise _grown(path, bloom)
        plain = cast(List[FilterFile], filters)
        first = plain[0]
        for path, other in zip(args.files[1:], plain[1:]):
            _check_compatible(args.files[0], first, path, other)
        # Built beside the target and renamed into place: a failure leaves no half-merged file.
        directory = os.path.dirname(os.path.abspath(args.output))
        temporary = os.path.join(directory, f".{os.path.basename(args.output)}.{os.getpid()}.merging")
        try:
            merged = first.copy(path=temporary, overwrite=True)
            with merged:
                for other in plain[1:]:
                    merged.union(other)
                merged.flush()
            os.replace(temporary, args.output)
        except OSError as exc:
            raise CLIError(ExitCode.IO, f"cannot write {args.output}: {exc.strerror or exc}") from None
        finally:
            if os.path.lexists(temporary):
                os.unlink(temporary)
    finally:
        for bloom in filters:
            bloom.close()
    print(f"crawldedup merge: wrote {args.output} from {counted(len(filters), 'filter')}", file=sys.stderr)
    return ExitCode.OK


def _merge_exact(args: argparse.Namespace) -> int:
    """Merge exact states: their filters ORed, their tiers' pages together in one tier."""
    states = []
    try:
        for path in args.files:
            with using(f"state file {path}"):
                states.append(ExactFilter.open(path, "r"))
        first = states[0]
        for path, other in zip(args.files, states):
            if other.grown:
                raise _grown(path, other.bloom)
            _check_compatible(
                args.files[0], cast(FilterFile, first.bloom.base), path, cast(FilterFile, other.bloom.base)
            )
        output = os.path.abspath(args.output)
        temporary = os.path.join(os.path.dirname(output), f".{os.path.basename(output)}.{os.getpid()}.merging")
        try:
            merged = ExactFilter(
                first.bloom.base.capacity,
                first.error_rate,
                temporary,
                window=first.window,
                metadata=first.metadata,
                overwrite=True,
            )
            with merged:
                for other in states:
                    merged.union(other)
                merged.merge()
                pages = len(merged)
            # The filter's file marks a whole state: the old one goes first, the tier, then the filter.
            for leftover in (output, tier_directory(output)):
                if os.path.isdir(leftover):
                    shutil.rmtree(leftover)
                elif os.path.lexists(leftover):
                    os.unlink(leftover)
            os.replace(tier_directory(temporary), tier_directory(output))
            os.replace(temporary, output)
        except OSError as exc:
            raise CLIError(ExitCode.IO, f"cannot write {args.output}: {exc.strerror or exc}") from None
        finally:
            for leftover in (temporary, tier_directory(temporary)):
                if os.path.isdir(leftover):
                    shutil.rmtree(leftover)
                elif os.path.lexists(leftover):
                    os.unlink(leftover)
    finally:
        for state in states:
            state.close()
    print(
        f"crawldedup merge: wrote {args.output} from {counted(len(states), 'filter')}, and its exact tier "
        f"{tier_directory(args.output)} ({counted(pages, 'page')})",
        file=sys.stderr,
    )
    return ExitCode.OK


def _grown(path: str, bloom: GrowingFilter) -> CLIError:
    return CLIError(
        ExitCode.STATE,
        f"cannot merge {path}: it grew past its capacity into "
        f"{counted(len(bloom.stages()) - 1, 'stage file')} ({path}.stage1 ...), "
        "and merge takes only filters that never grew",
    )


def _window_of(bloom: FilterFile) -> str:
    return bloom.window.describe() if isinstance(bloom, WindowedBloomFilter) else "none (claims never expire)"


def _check_compatible(first_path: str, first: FilterFile, path: str, other: FilterFile) -> None:
    """Refuse to merge filters of another window, shape or canonical policy.

    :raises CLIError: (``ExitCode.STATE``) naming both files and what differs.
    """
    if _window_of(first) != _window_of(other):
        raise CLIError(
            ExitCode.STATE,
            f"cannot merge {path} into {first_path}: different recrawl windows "
            f"({_window_of(first)} vs {_window_of(other)})",
        )
    differences = [
        f"{name} {getattr(first, name)!r} vs {getattr(other, name)!r}"
        for name in ("capacity", "error_rate", "num_blocks", "num_hashes", "metadata")
        if getattr(first, name) != getattr(other, name)
    ]
    if differences:
        raise CLIError(
            ExitCode.STATE, f"cannot merge {path} into {first_path}: incompatible filters ({'; '.join(differences)})"
        )


def add_command(commands: Any, epilog: str, formatter: type) -> None:
    """Add ``merge`` to the ``crawldedup`` command's subcommands."""
    merge = commands.add_parser(
        "merge",
        help="union compatible filter files",
        description="Write the union of filters of the same capacity, error rate and canonical policy.",
        epilog=epilog,
        formatter_class=formatter,
    )
    merge.add_argument("files", nargs="+", type=file_path, metavar="FILE")
    merge.add_argument("-o", "--output", required=True, type=file_path, metavar="OUT", help="filter file to create")
    merge.add_argument("--force", action="store_true", help="replace OUT if it exists")
    merge.set_defaults(run=run_merge)
