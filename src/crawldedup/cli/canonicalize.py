"""``crawldedup canonicalize``: the canonical form of each line, line for line."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._args import BASE_HELP, INPUTS_HELP, base_url
from ._io import InputReader, Output
from ._lines import canonicalize_lines, display, reason, stdout
from ._store_options import add_policy_option, chosen_policy
from .exits import ExitCode


def run_canonicalize(args: argparse.Namespace) -> int:
    """Print the canonical form of each line; an invalid line prints an empty line.

    The output stays line-aligned with the input (``paste`` them side by side); each invalid
    line's reason goes to stderr as ``NAME:LINE: reason`` and the exit code is 1.
    """
    policy = chosen_policy(args.policy, "canonicalize", args.policy_file)
    reader = InputReader(args.inputs)
    reader.check_readable()
    out = Output(stdout(), "stdout")
    invalid = 0
    for name, first_line, block in reader.blocks():
        result = canonicalize_lines(block, args.base, policy)
        errors = result.errors
        out.write_lines([url or "" for url in result.urls])
        for index in sorted(errors):
            print(f"{display(name)}:{first_line + index}: {reason(errors[index])}", file=sys.stderr)
        invalid += len(errors)
    return ExitCode.INVALID if invalid else ExitCode.OK


def add_command(commands: Any, epilog: str, formatter: type) -> None:
    """Add ``canonicalize`` to the ``crawldedup`` command's subcommands."""
    canon = commands.add_parser(
        "canonicalize",
        help="print the canonical form of each URL",
        description="Print the canonical form of each line: an empty line for an invalid one, "
        "its reason on stderr, and exit code 1.",
        epilog=epilog,
        formatter_class=formatter,
    )
    canon.add_argument("inputs", nargs="*", metavar="FILE", help=INPUTS_HELP)
    canon.add_argument("--base", type=base_url, help=BASE_HELP)
    add_policy_option(canon)
    canon.set_defaults(run=run_canonicalize)
