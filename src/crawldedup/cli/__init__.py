"""The ``crawldedup`` command: filter a crawl frontier, check canonical forms, audit a fetch log,
inspect and merge filters, check a claim store and report what it holds.

Exit codes (``EXIT_CODES``, also in ``--help`` and docs/cli.md)::

    0    success
    1    canonicalize: at least one line was not an accepted URL; content: at least one page could
         not be checked; doctor: at least one check failed
    2    usage: an unknown option, a bad option value or a bad environment variable
    3    a state or filter file is missing, corrupt, incompatible or in use by another run, merge
         would overwrite a file, or the store's namespace was made by another store kind or
         canonical policy, does not exist (stats, migrate), is half way through a migration
         elsewhere, or holds a seed that is incomplete, of another file or of another window
    4    an input could not be read, or an output could not be written
    5    the claim store (Redis, SQLite, PostgreSQL, a service) is unavailable after its retries:
         unreachable, timed out, locked
    6    the claim store refused, not retried: a misconfiguration the message names (no RedisBloom
         module, a wrong or missing password, an unknown user or role, ACL, a read-only replica,
         maxmemory, not a SQLite database)
    130  interrupted by SIGINT (Ctrl-C): the batch in flight was finished and the summary printed
    141  stdout was closed by its reader, such as head (SIGPIPE)
    143  terminated by SIGTERM: the batch in flight was finished and the summary printed

Errors are one line on stderr, ``crawldedup: error: ...``, never a traceback; a usage error
ends with ``see crawldedup COMMAND --help``.

The package is laid out one module per command (``filter``, ``canonicalize``, ``info``,
``audit``, ``content``, ``merge``, ``serve``, ``doctor``, ``stats``, ``migrate``, ``offline``), each with its
``add_command``; :mod:`.main` builds the parser from them and turns what a command raised into
one line and an exit code (:mod:`.exits`).
"""

from __future__ import annotations

import signal
import sys
from typing import Optional, Sequence

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``crawldedup`` command.

    The commands are imported here, inside the call, so that a Ctrl-C while they load (numpy,
    the canonicalizer: a few tenths of a second) ends the command quietly too.

    :param argv: the arguments (``sys.argv[1:]`` when None).
    :returns: the exit code (see the module docstring).
    """
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments == ["--version"]:  # answered before the commands load: no layer, no server client
        from .. import __version__

        print(f"crawldedup {__version__}")
        return 0
    try:
        from .main import run
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    return run(arguments)
