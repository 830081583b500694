"""How the ``crawldedup`` command ends: its exit codes, and the one table that turns what went
wrong into one line on stderr and a code (:func:`error_for`).

A command raises what the layers raise (``StoreUnavailable``, ``NamespaceConflict``, an
``OSError`` of a file...) or a :class:`CLIError` of its own; :func:`crawldedup.cli.main.run`
gives each one line, ``crawldedup: error: ...``, never a traceback. Where the same ``OSError``
means different things (a state file that cannot be written is exit code 3, an output 4), the
command says which file it was using with :func:`using`. What no row of the table expects is
a bug: one line too (:func:`internal_error`), exit code 70.

The layers are imported on the first failure, not with this module: ``crawldedup --version``
and a Ctrl-C while the commands load need nothing of them.
"""

from __future__ import annotations

import enum
import functools
import os
from contextlib import contextmanager
from typing import Iterator, Optional, Tuple, Type

from .._extras import is_missing_extra

__all__ = ["CLIError", "EXIT_CODES", "ExitCode", "error_for", "internal_error", "usage_error", "using"]

#: Set to 1, a bug's line is followed by its traceback.
TRACEBACK_VARIABLE = "CRAWLDEDUP_TRACEBACK"


class ExitCode(enum.IntEnum):
    """The exit codes of the ``crawldedup`` command (:data:`EXIT_CODES` says what each means)."""

    OK = 0
    INVALID = 1
    USAGE = 2
    STATE = 3
    IO = 4
    STORE = 5
    STORE_REFUSED = 6
    INTERNAL = 70
    SIGINT = 130
    SIGPIPE = 141
    SIGTERM = 143


#: Every exit code the command returns, and what it means: the table of ``--help``, of the
#: ``crawldedup.cli`` docstring and of docs/cli.md (a test keeps the three the same).
EXIT_CODES: Tuple[Tuple[int, str], ...] = (
    (ExitCode.OK, "success"),
    (
        ExitCode.INVALID,
        "canonicalize: at least one line was not an accepted URL; audit --content: at least one line was "
        "not read; content: at least one page could not be checked; doctor: at least one check failed",
    ),
    (
        ExitCode.USAGE,
        "usage: an unknown option, a bad option value, a bad environment variable, or an extra the command "
        "needs is not installed (the line names its pip install)",
    ),
    (
        ExitCode.STATE,
        "a state or filter file is missing, corrupt, incompatible or in use by another run, merge would "
        "overwrite a file, or the store's namespace was made by another store kind or canonical policy, does "
        "not exist (stats, migrate), is half way through a migration elsewhere, or holds a seed that is "
        "incomplete, of another file or of another window",
    ),
    (ExitCode.IO, "an input could not be read, or an output could not be written"),
    (
        ExitCode.STORE,
        "the claim store (Redis, SQLite, PostgreSQL, a service) is unavailable after its retries: "
        "unreachable, timed out, locked",
    ),
    (
        ExitCode.STORE_REFUSED,
        "the claim store refused, not retried: a misconfiguration the message names (no "
        "RedisBloom module, a wrong or missing password, an unknown user or role, ACL, a read-only "
        "replica, maxmemory, not a SQLite database)",
    ),
    (
        ExitCode.INTERNAL,
        f"a bug in crawldedup, named in one line (${TRACEBACK_VARIABLE}=1 adds its traceback): please report it",
    ),
    (ExitCode.SIGINT, "interrupted by SIGINT (Ctrl-C): the batch in flight was finished and the summary printed"),
    (ExitCode.SIGPIPE, "stdout was closed by its reader, such as head (SIGPIPE)"),
    (ExitCode.SIGTERM, "terminated by SIGTERM: the batch in flight was finished and the summary printed"),
)


class CLIError(Exception):
    """An expected failure: one line on stderr and an exit code, never a traceback."""

    def __init__(self, exit_code: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def usage_error(command: Optional[str], message: str) -> CLIError:
    """A usage error (exit code 2): ``message`` and where the options are explained."""
    return CLIError(ExitCode.USAGE, f"{message}; see crawldedup{' ' + command if command else ''} --help")


@functools.cache
def _exit_of() -> Tuple[Tuple[Type[BaseException], ExitCode], ...]:
    """What each kind of failure of the layers means for the command, most specific first: the
    exceptions that name their problem in full are shown as they are."""
    from ..bloom import FilterFileError
    from ..exact import ExactFileError
    from ..stores.base import NamespaceConflict, StoreRefused, StoreUnavailable

    return (
        (StoreRefused, ExitCode.STORE_REFUSED),
        (StoreUnavailable, ExitCode.STORE),
        (NamespaceConflict, ExitCode.STATE),
        (FilterFileError, ExitCode.STATE),
        (ExactFileError, ExitCode.STATE),
    )


def error_for(exc: BaseException, about: Optional[str] = None, code: ExitCode = ExitCode.STATE) -> Optional[CLIError]:
    """The one line and exit code of a failure, or None for one the command does not expect.

    :param about: the file the command was using (``state file x``), for an ``OSError``
        that does not name it.
    :param code: the exit code of such an ``OSError``: a state file's (3) or an output's (4).
    """
    if isinstance(exc, CLIError):
        return exc
    if is_missing_extra(exc):  # names the package and its pip install line
        return CLIError(ExitCode.USAGE, str(exc))
    for kind, exit_code in _exit_of():
        if isinstance(exc, kind):
            return CLIError(exit_code, str(exc))
    if isinstance(exc, OSError) and about is not None:
        return CLIError(code, f"{about}: {exc.strerror or exc}")
    return None


def internal_error(exc: BaseException) -> CLIError:
    """The one line of a failure no row of the table expects: a bug (exit code 70)."""
    text = " ".join(str(exc).split())
    where = "" if os.environ.get(TRACEBACK_VARIABLE) == "1" else f"; {TRACEBACK_VARIABLE}=1 prints where it happened"
    return CLIError(
        ExitCode.INTERNAL,
        f"internal error: {type(exc).__name__}{': ' if text else ''}{text} (a bug in crawldedup: "
        f"please report it with the command line{where})",
    )


@contextmanager
def using(about: str, code: ExitCode = ExitCode.STATE) -> Iterator[None]:
    """Turn what goes wrong in the block into a :class:`CLIError` (:func:`error_for`): an
    ``OSError`` is about the file ``about`` names, with exit code ``code``."""
    try:
        yield
    except (OSError, ValueError) as exc:
        error = error_for(exc, about, code)
        if error is None or isinstance(exc, BrokenPipeError):
            raise
        raise error from None
