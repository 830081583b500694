"""One writer per exact tier: a lock on its log, held for as long as the tier is open for writing.

The log and the in-memory runs it backs belong to one process, so a second writer is refused
(``BlockingIOError``) instead of sharing. The lock is ``flock`` on the log file: it belongs to
one ``open()`` of the file, so two tiers of one process on one directory are two writers too.
A forked child closes its copy of the descriptor at once and may not write (it gets
``BlockingIOError``): it reopens the tier, as it would a pure-Python filter. Readers take no lock. Where ``flock`` is
missing (Windows) or the file system refuses it, nothing is locked.
"""

from __future__ import annotations

import errno
import os
import weakref

try:
    import fcntl
except ImportError:  # pragma: no cover  (Windows)
    fcntl = None  # type: ignore[assignment]

#: What a file system that keeps no locks answers: the tier is then used unlocked.
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS})


def busy_error(path: str, why: str) -> BlockingIOError:
    return BlockingIOError(errno.EAGAIN, f"the exact tier is open for writing by {why}", path)


class WriterLock:
    """This process's hold on a tier's log (see the module docstring).

    :param fd: the log, open for writing; it stays open (and locked) until :meth:`close`.
    :raises BlockingIOError: when another writer holds the tier.
    """

    def __init__(self, fd: int, path: str) -> None:
        self.path = path
        self.writable = True
        self._fd = fd
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise busy_error(path, "another process (one process writes a state at a time)") from None
                if exc.errno not in _NO_LOCKS:
                    raise
        _LOCKS.add(self)

    def check_writable(self) -> None:
        """:raises BlockingIOError: in a forked child of the writer."""
        if not self.writable:
            raise busy_error(self.path, "the parent of this forked process: reopen it here")

    def close(self) -> None:
        _LOCKS.discard(self)
        if self._fd >= 0:
            os.close(self._fd)  # lets the lock go, unless a forked child still holds the file
            self._fd = -1


_LOCKS: weakref.WeakSet[WriterLock] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # The child drops its copy of the descriptor at once: the lock stays its parent's alone, and
    # goes when the parent closes the tier, whether or not the child still runs.
    for lock in list(_LOCKS):
        lock.writable = False
        lock.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
