"""The ``crawldedup`` command: filter a crawl frontier, check canonical forms, audit a fetch log,
inspect and merge filters, check a claim store and report what it holds.

Exit codes (``EXIT_CODES``, also in ``--help`` and docs/cli.md)::

    0    success
    1    canonicalize: at least one line was not an accepted URL; audit --content: at least one
         line was not read; content: at least one page could not be checked; doctor: at least
         one check failed
    2    usage: an unknown option, a bad option value, a bad environment variable, or an extra
         the command needs is not installed (the line names its pip install)
    3    a state or filter file is missing, corrupt, incompatible or in use by another run,
         merge would overwrite a file, or the store's namespace was made by another store kind
         or canonical policy, does not exist (stats, migrate), is half way through a migration
         elsewhere, or holds a seed that is incomplete, of another file or of another window
    4    an input could not be read, or an output could not be written
    5    the claim store (Redis, SQLite, PostgreSQL, a service) is unavailable after its
         retries: unreachable, timed out, locked
    6    the claim store refused, not retried: a misconfiguration the message names (no
         RedisBloom module, a wrong or missing password, an unknown user or role, ACL, a
         read-only replica, maxmemory, not a SQLite database)
    70   a bug in crawldedup, named in one line ($CRAWLDEDUP_TRACEBACK=1 adds its traceback):
         please report it
    130  interrupted by SIGINT (Ctrl-C): the batch in flight was finished and the summary
         printed
    141  stdout was closed by its reader, such as head (SIGPIPE)
    143  terminated by SIGTERM: the batch in flight was finished and the summary printed

Errors are one line on stderr, ``crawldedup: error: ...``, never a traceback; a usage error
ends with ``see crawldedup COMMAND --help``. A stderr that cannot be written (closed, full)
changes no exit code.

The package is laid out one module per command (``filter``, ``canonicalize``, ``info``,
``audit``, ``content``, ``merge``, ``serve``, ``doctor``, ``stats``, ``migrate``, ``offline``), each with its
``add_command``; :mod:`.main` builds the parser from them and turns what a command raised into
one line and an exit code (:mod:`.exits`).
"""

from __future__ import annotations

import signal
from typing import Optional, Sequence

# Light (the standard library and the exit codes): the commands load inside run(), so that a
# Ctrl-C while they load ends the command quietly too. Imported here, before main() is defined,
# so that the submodule .main never takes the place of the function main on this package.
try:
    from .main import run
except KeyboardInterrupt:  # Ctrl-C while the command itself loads: it ends as quietly
    raise SystemExit(128 + signal.SIGINT) from None

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``crawldedup`` command (:func:`.main.run`).

    :param argv: the arguments (``sys.argv[1:]`` when None).
    :returns: the exit code (see the module docstring).
    """
    return run(argv)
