"""The ``crawldedup`` command: its parser, made of each command's module, and :func:`run`, the one
place where whatever a command raised becomes one line on stderr and an exit code.

Nothing heavy is imported with this module: the commands load inside :func:`run`, so that a
Ctrl-C while they load (numpy, the canonicalizer, the stores: a few tenths of a second) ends
the command as quietly as one while it runs, and ``crawldedup --version`` loads no layer.
"""

from __future__ import annotations

import argparse
import os
import sys
from types import ModuleType
from typing import Optional, Sequence, Tuple

from .. import __version__
from ._streams import silence_stdout, standard_streams
from .exits import TRACEBACK_VARIABLE, ExitCode, error_for, internal_error, usage_error


def commands() -> Tuple[ModuleType, ...]:
    """The commands' modules, in the order ``--help`` lists them: each module adds its own."""
    from . import audit, canonicalize, content, doctor, filter, info, merge, migrate, offline, serve, stats

    return (filter, canonicalize, info, audit, content, merge, serve, doctor, stats, migrate, offline)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``crawldedup`` command and its subcommands.

    Its errors raise :class:`CLIError` (exit code 2) instead of exiting.
    """
    from ._args import Formatter, Parser, exit_codes_epilog

    epilog = exit_codes_epilog()
    parser = Parser(
        prog="crawldedup",
        description="Has this page already been claimed? Deduplicate crawl frontiers by canonical URL.",
        epilog=epilog,
        formatter_class=Formatter,
    )
    parser.add_argument("--version", action="version", version=f"crawldedup {__version__}")
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in commands():
        command.add_command(subcommands, epilog, Formatter)
    return parser


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``crawldedup`` command (see :func:`crawldedup.cli.main`): every failure is one line
    on stderr and an exit code of :data:`~.exits.EXIT_CODES`, whichever command raised it and
    whatever state the standard streams are in (:mod:`._streams`)."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    with standard_streams():
        try:
            code = _command(arguments)
            sys.stdout.flush()  # what is still buffered goes out now: its failure is this command's
            return code
        except BrokenPipeError:
            # The reader went away (`crawldedup filter | head`): stop quietly, as `cat` would.
            silence_stdout()
            return ExitCode.SIGPIPE
        except KeyboardInterrupt:
            _drop_stdout()
            return ExitCode.SIGINT
        except Exception as exc:
            error = error_for(exc)
            if error is None:
                error = internal_error(exc)
                if os.environ.get(TRACEBACK_VARIABLE) == "1":
                    import traceback

                    traceback.print_exc(file=sys.stderr)
            _drop_stdout()
            print(f"crawldedup: error: {error}", file=sys.stderr)
            return error.exit_code


def _command(arguments: Sequence[str]) -> int:
    if list(arguments) == ["--version"]:  # answered before the commands load: no layer, no server client
        print(f"crawldedup {__version__}")
        return ExitCode.OK
    parser = build_parser()
    try:
        # parse_known_args, so that an unknown option is reported with its subcommand's help.
        args, unknown = parser.parse_known_args(arguments)
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else ExitCode.USAGE
    if unknown:
        raise usage_error(getattr(args, "command", None), f"unrecognized arguments: {' '.join(unknown)}")
    return int(args.run(args))


def _drop_stdout() -> None:
    """After a failure, write what stdout still buffers if it can, else drop it quietly: the
    failure's own line is the one to show."""
    try:
        sys.stdout.flush()
    except Exception:  # the first failure is the one reported
        silence_stdout()
