"""One run at a time per state file: a lock file beside it (``<state>.lock``), held while a run
has the state file open.

Two runs that claim into one state file without a store would each win the pages the other has
not added yet, and print them twice. The lock is ``flock`` on the lock file, which the kernel
releases when its holder dies, however it dies: a dead run never blocks the next. The file holds
the holder's process id, so that a refused run can name it, and is removed when the run ends.
A process forked by the holder (its ``--jobs`` workers, or any other) closes its copy of the
descriptor at once, so that only the holder keeps the file locked.
"""

from __future__ import annotations

import errno
import os
import weakref
from typing import Optional

try:
    import fcntl
except ImportError:  # pragma: no cover  (Windows: runs are not kept apart)
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_SUFFIX", "StateInUse", "StateLock"]

#: What follows a state file's path to name its lock file.
LOCK_SUFFIX = ".lock"


class StateInUse(BlockingIOError):
    """Another process runs on the state file; the message names the file and the process."""


class StateLock:
    """Hold ``<state>.lock`` for this process, or refuse.

    :param state_path: the state file.
    :raises StateInUse: when another process holds it.
    :raises OSError: when the lock file cannot be made (the directory is read-only, say).
    """

    def __init__(self, state_path: str) -> None:
        self.state_path = os.fspath(state_path)
        self.path = self.state_path + LOCK_SUFFIX
        self._fd = -1
        if fcntl is None:  # pragma: no cover
            return
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = _holder(fd)
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                    raise
                by = f"process {holder}" if holder else "another process"
                raise StateInUse(
                    errno.EAGAIN,
                    f"in use by {by} ({self.path} is locked): one run at a time writes a state "
                    "file; wait for it to end, or give this run another state file",
                    self.state_path,
                ) from None
            if _same_file(fd, self.path):
                break
            os.close(fd)  # removed by the run that held it just before: lock the new one
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        _HELD.add(self)

    def release(self) -> None:
        """Remove the lock file and let it go (idempotent)."""
        if self._fd < 0:
            return
        _HELD.discard(self)
        try:
            if _same_file(self._fd, self.path):
                os.unlink(self.path)  # while still locked: the next run makes a new one
        finally:
            os.close(self._fd)
            self._fd = -1

    def _forget(self) -> None:
        """In a forked child: close the inherited descriptor (the lock stays the parent's)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> StateLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _holder(fd: int) -> Optional[int]:
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _same_file(fd: int, path: str) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


_HELD: weakref.WeakSet[StateLock] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for lock in list(_HELD):
        lock._forget()
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
