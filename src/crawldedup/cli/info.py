"""``crawldedup info``: a filter file's parameters and statistics."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, cast

from .._wording import counted
from ..bloom import FilterFile, FilterFileError, GrowingFilter, LocalFilter, WindowedBloomFilter, open_filter
from ..canonical import describe_policy
from ..dedup.state import state_policy
from ._lines import stdout
from .exits import ExitCode, using


def read_filter(path: str) -> LocalFilter:
    """Open an existing filter file (plain or windowed) read-only.

    :raises CLIError: (``ExitCode.STATE``) a missing, unreadable or invalid file.
    """
    with using(f"filter file {path}"):
        return open_filter(path, "r")


def run_info(args: argparse.Namespace) -> int:
    """Print a filter file's parameters and statistics, one ``name  value`` row each."""
    with read_filter(args.file) as bloom:
        grown = bloom if isinstance(bloom, GrowingFilter) else None
        first = cast(FilterFile, grown.base if grown else bloom)
        size = os.path.getsize(args.file)
        metadata = bloom.metadata.decode("ascii", "backslashreplace") or "(none)"
        windowed = isinstance(first, WindowedBloomFilter)
        slots = f" in each of {first.window.live_count} slots" if isinstance(first, WindowedBloomFilter) else ""
        rows = [
            ("file", args.file),
            ("format", f"crawldedup filter v{first.mapped_file().header.version}, 64-byte blocks, MurmurHash3 x64-128"),
            ("size", f"{size:,} bytes ({size / 2**20:,.1f} MiB)"),
            ("capacity", f"{first.capacity:,}{' per window' if windowed else ''}"),
            ("error rate", f"{first.error_rate:g}"),
            (
                "bits",
                f"{first.num_bits:,} ({counted(first.num_blocks, 'block')}{slots}, "
                f"{counted(first.num_hashes, 'hash', 'hashes')} per key)",
            ),
            ("bits per item", f"{first.num_bits / first.capacity:.2f} at capacity"),
            ("fill", f"{bloom.fill_ratio:.4%}"),
            ("estimated items", f"{bloom.approx_items:,}"),
            ("error rate now", f"{bloom.estimated_error_rate:.3g}"),
            ("metadata", metadata),
        ]
        try:
            rows.insert(len(rows) - 1, ("policy", describe_policy(state_policy(bloom, args.file))))
        except FilterFileError:  # a filter file that no crawl stamped: no policy to name
            pass
        if isinstance(first, WindowedBloomFilter):
            rows[5:5] = [("window", f"{first.window.describe()} (claims forgotten after it)")] + [
                (
                    f"generation {g.generation}",
                    f"slot {g.slot}, from {_utc(g.starts_at)}, forgotten at "
                    f"{_utc(g.forgotten_at)}, ~{g.approx_items:,} items",
                )
                for g in first.generations()
            ]
        if grown is not None:
            stages = grown.stages()
            rows[4:4] = [
                (
                    "grown",
                    f"{counted(len(stages) - 1, 'stage')} past its capacity: holds "
                    f"{grown.capacity:,} keys in all, {grown.num_bits / 8 / 2**20:,.1f} MiB",
                )
            ] + [
                (
                    f"stage {stage.number}",
                    f"{stage.path}: capacity {stage.capacity:,} at error rate "
                    f"{stage.error_rate:g}, ~{stage.approx_items:,} items, full at {stage.full_at:,}",
                )
                for stage in stages
            ]
    width = max(len(name) for name, _ in rows) + 2
    stdout().write("".join(f"{name:<{width}}{value}\n" for name, value in rows).encode("utf-8", "backslashreplace"))
    return ExitCode.OK


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def add_command(commands: Any, epilog: str, formatter: type) -> None:
    """Add ``info`` to the ``crawldedup`` command's subcommands."""
    info = commands.add_parser(
        "info",
        help="describe a filter file",
        description="Print a filter file's parameters, size, fill, estimated items and error rate.",
        epilog=epilog,
        formatter_class=formatter,
    )
    info.add_argument("file", metavar="FILE")
    info.set_defaults(run=run_info)
