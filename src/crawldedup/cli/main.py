"""The ``crawldedup`` command: its parser, made of each command's module, and :func:`main`, the one
place where whatever a command raised becomes one line on stderr and an exit code."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from .. import __version__
from . import audit, canonicalize, content, doctor, filter, info, merge, migrate, offline, serve, stats
from ._args import Formatter, Parser, exit_codes_epilog
from .exits import ExitCode, error_for, usage_error

#: The commands, in the order ``--help`` lists them: each module adds its own.
COMMANDS = (filter, canonicalize, info, audit, content, merge, serve, doctor, stats, migrate, offline)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``crawldedup`` command and its subcommands.

    Its errors raise :class:`CLIError` (exit code 2) instead of exiting.
    """
    epilog = exit_codes_epilog()
    parser = Parser(
        prog="crawldedup",
        description="Has this page already been claimed? Deduplicate crawl frontiers by canonical URL.",
        epilog=epilog,
        formatter_class=Formatter,
    )
    parser.add_argument("--version", action="version", version=f"crawldedup {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_command(commands, epilog, Formatter)
    return parser


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``crawldedup`` command (see :func:`crawldedup.cli.main`)."""
    parser = build_parser()
    try:
        # parse_known_args, so that an unknown option is reported with its subcommand's help.
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            raise usage_error(getattr(args, "command", None), f"unrecognized arguments: {' '.join(unknown)}")
        return int(args.run(args))
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else ExitCode.USAGE
    except BrokenPipeError:
        # The reader went away (`crawldedup filter | head`): stop quietly, as `cat` would.
        _silence_stdout()
        return ExitCode.SIGPIPE
    except KeyboardInterrupt:
        return ExitCode.SIGINT
    except Exception as exc:
        error = error_for(exc)
        if error is None:
            raise
        print(f"crawldedup: error: {error}", file=sys.stderr)
        return error.exit_code


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover  (no real stdout)
        pass
