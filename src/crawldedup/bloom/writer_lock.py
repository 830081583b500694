"""Who writes a filter file: the lock that lets a lone writer set bits without atomic instructions.

Every process writing a file holds an open-file-description lock on it (Linux ``fcntl``
``F_OFD_SETLK``; such a lock belongs to one ``open()``, so two filters of one process on one
file are two writers, and a failed upgrade keeps the lock already held, unlike ``flock``):

- the compiled filter holds a read lock on byte 0 while it is open for writing. A batch of
  adds upgrades it to a write lock when it can (no other writer has the file open): then it
  sets bits with plain ORs, otherwise with atomic ORs, so no bit is ever lost either way.
- the pure-Python filter has no atomic OR: it holds a write lock on bytes 0 and 1 for as long
  as it is open, and a file another writer has open cannot be opened by it, nor it by another
  (``BlockingIOError``). Byte 1 tells a waiting opener that the holder will not let go.

Byte 2 is held while the header page is written (exclusively) or read (shared), so that no
one reads or writes half of another's header. Readers take no other lock. Where
open-file-description locks are missing (macOS, Windows) nothing is locked: the compiled
filter always uses atomic ORs and the pure-Python filter shares unguarded. After ``os.fork``
parent and child each lock the file anew, so each sees the other; a process forked inside
:func:`forking_readers` (workers that never write the file) leaves the file to its parent.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
import threading
import time
import weakref
from typing import Iterator, Optional

try:
    import fcntl
except ImportError:  # pragma: no cover  (Windows)
    fcntl = None  # type: ignore[assignment]

_SETLK: Optional[int] = getattr(fcntl, "F_OFD_SETLK", None)
_SETLKW: Optional[int] = getattr(fcntl, "F_OFD_SETLKW", None)
_GETLK: Optional[int] = getattr(fcntl, "F_OFD_GETLK", None)
#: True where writers of one file can see each other.
SUPPORTED = None not in (_SETLK, _SETLKW, _GETLK) and hasattr(os, "register_at_fork")
#: struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for these locks), padding.
_FLOCK = struct.Struct("@hhqqi4x")
#: An opener waits at most this long for other writers' batches to end before it gives up.
JOIN_TIMEOUT = 60.0
#: What a file system that keeps no such locks answers (some network and FUSE ones): the file
#: is then used as where they are missing.
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS})


def _lock(fd: int, kind: int, start: int, length: int) -> bool:
    """Take (or convert to) a lock of ``kind`` on ``length`` bytes from ``start``; False on conflict."""
    assert _SETLK is not None
    try:
        fcntl.fcntl(fd, _SETLK, _FLOCK.pack(kind, os.SEEK_SET, start, length, 0))
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


@contextlib.contextmanager
def header_access(fd: int, *, write: bool) -> Iterator[None]:
    """Hold byte 2 of the file open as ``fd`` while its header page is read (shared lock) or
    written (exclusive): the writers of one file store their counts and flags at times of
    their own, and a page read or written half-way by two would fail its checksum."""
    if not SUPPORTED or not _wait_for_lock(fd, fcntl.F_WRLCK if write else fcntl.F_RDLCK):
        yield
        return
    try:
        yield
    finally:
        _wait_for_lock(fd, fcntl.F_UNLCK)


def _wait_for_lock(fd: int, kind: int) -> bool:
    """Lock (or unlock) byte 2, waiting for others; False where the file system keeps no locks."""
    assert _SETLKW is not None
    try:
        fcntl.fcntl(fd, _SETLKW, _FLOCK.pack(kind, os.SEEK_SET, 2, 1, 0))
    except OSError as exc:
        if exc.errno in _NO_LOCKS:
            return False
        raise
    return True


def _held_by_other(fd: int, start: int) -> bool:
    """True when another writer holds a lock on byte ``start``."""
    assert _GETLK is not None
    reply = fcntl.fcntl(fd, _GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, start, 1, 0))
    lock_type: int = _FLOCK.unpack(reply)[0]
    return lock_type != fcntl.F_UNLCK


def _open_again(fd: int, path: str) -> int:
    """Return a new descriptor, with an open file description of its own, of the file open as
    ``fd``: through /proc, so a file renamed or replaced at ``path`` since is no matter.

    :raises OSError: when neither /proc nor ``path`` leads to that file any more.
    """
    flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(f"/proc/self/fd/{fd}", flags)
    except OSError:
        again = os.open(path, flags)
    if os.path.samestat(os.fstat(again), os.fstat(fd)):
        return again
    os.close(again)
    raise FileNotFoundError(errno.ENOENT, "the filter file was replaced while it was being opened", path)


def _busy_error(path: str, why: str) -> BlockingIOError:
    return BlockingIOError(errno.EAGAIN, f"filter file is open for writing by another process ({why})", path)


def join(path: str, fd: int, *, atomic_or: bool) -> Optional[WriterLock]:
    """Join the writers of the file open as ``fd`` (at ``path``); None where writers cannot see
    each other (no such locks on this platform or this file system).

    :param atomic_or: True for a filter that can share the file (it has atomic OR).
    :raises BlockingIOError: when the file cannot be shared with the writers it has.
    """
    if not SUPPORTED:
        return None
    try:
        return WriterLock(path, fd, atomic_or=atomic_or)
    except OSError as exc:
        if exc.errno in _NO_LOCKS:
            return None
        raise


class WriterLock:
    """This process's lock as one writer of a filter file (see the module docstring)."""

    def __init__(self, path: str, fd: int, *, atomic_or: bool) -> None:
        """Join the writers of the file open as ``fd`` (at ``path``).

        :param atomic_or: True for a filter that can share the file (it has atomic OR).
        :raises BlockingIOError: when the file cannot be shared with the writers it has.
        """
        self.path = path
        self.atomic_or = atomic_or
        self.writable = True  # False in a forked child of a pure-Python writer
        self.may_be_alone = atomic_or  # False once a forked process could not lock anew
        self._mutex = threading.Lock()  # the descriptor, and a batch's plain-OR window
        self._fd = self._join(fd)
        _LOCKS.add(self)

    def _join(self, same_file_as: int) -> int:
        fd = _open_again(same_file_as, self.path)
        try:
            if not self.atomic_or:
                if not _lock(fd, fcntl.F_WRLCK, 0, 2):
                    raise _busy_error(
                        self.path,
                        "this filter needs the file to itself: a windowed filter, or a plain one of the "
                        "pure-Python twin (the compiled twin shares a plain file)",
                    )
                return fd
            deadline = time.monotonic() + JOIN_TIMEOUT
            while not _lock(fd, fcntl.F_RDLCK, 0, 1):
                if _held_by_other(fd, 1):
                    raise _busy_error(
                        self.path, "it holds the file alone: a windowed filter, or the pure-Python twin's plain one"
                    )
                if time.monotonic() > deadline:
                    raise _busy_error(self.path, f"one batch held it for over {JOIN_TIMEOUT:g} s")
                time.sleep(0.001)  # another writer's batch is running alone: it ends soon
            return fd
        except BaseException:
            os.close(fd)
            raise

    @contextlib.contextmanager
    def plain_or(self) -> Iterator[bool]:
        """Yield True when no other writer has the file open: bits may be set with plain ORs
        until the block ends (others wait to join). Yield False when they must be atomic."""
        with self._mutex:
            alone = self.may_be_alone and _lock(self._fd, fcntl.F_WRLCK, 0, 1)
            try:
                yield alone
            finally:
                if alone:
                    _lock(self._fd, fcntl.F_RDLCK, 0, 1)  # a downgrade never conflicts

    def header_written(self) -> contextlib.AbstractContextManager[None]:
        """Hold the header lock (``header_access``) while this writer stores the header page."""
        return header_access(self._fd, write=True)

    def check_writable(self) -> None:
        """:raises BlockingIOError: in a forked child that shares a pure-Python writer's lock."""
        if not self.writable:
            raise _busy_error(self.path, "the parent of this forked process: reopen the filter here")

    def close(self) -> None:
        _LOCKS.discard(self)
        with self._mutex:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def _after_fork(self) -> None:
        """Lock the file through a descriptor of this process's own, so that parent and child
        are two writers; a pure-Python child cannot, and may no longer write."""
        if self._fd < 0:
            return
        if not self.atomic_or:
            self.writable = False  # only the child runs this for pure-Python writers
            return
        try:
            fd = self._join(self._fd)
        except OSError:
            self.may_be_alone = False  # keeps the shared lock, and atomic ORs from now on
            return
        os.close(self._fd)
        self._fd = fd

    def _leave(self) -> None:
        """Stop being a writer, in a forked child that never writes: the open file description it
        inherited stays its parent's alone (closing this descriptor releases none of its locks)."""
        _LOCKS.discard(self)
        self.writable = False
        self.may_be_alone = False
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


_LOCKS: weakref.WeakSet[WriterLock] = weakref.WeakSet()
_forking: list[WriterLock] = []
#: Set by :func:`forking_readers` around forks whose children never write a filter file.
_readers_only = threading.local()


@contextlib.contextmanager
def forking_readers() -> Iterator[None]:
    """Processes forked by this thread inside the block never write the filter files open here
    (workers that only compute): they leave them to this process, which stays their one writer,
    so a filter can still set its bits with plain ORs and grow. A child that writes anyway gets
    ``BlockingIOError``."""
    _readers_only.on = True
    try:
        yield
    finally:
        _readers_only.on = False


def _before_fork() -> None:
    _forking[:] = list(_LOCKS)
    for lock in _forking:
        lock._mutex.acquire()  # no plain-OR window is open while the process forks


def _after_fork_in_parent() -> None:
    readers = getattr(_readers_only, "on", False)
    for lock in _forking:
        if lock.atomic_or and not readers:
            lock._after_fork()
        lock._mutex.release()
    _forking.clear()


def _after_fork_in_child() -> None:
    readers = getattr(_readers_only, "on", False)
    for lock in _forking:
        if readers:
            lock._leave()
        else:
            lock._after_fork()
        lock._mutex.release()
    _forking.clear()


if SUPPORTED:
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)
