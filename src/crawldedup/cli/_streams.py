"""The standard streams of a ``crawldedup`` run, made safe for every command at once.

- A stream its caller closed (``>&-``, ``2>&-``, ``<&-``): its descriptor is held by
  ``/dev/null``, so that no file the run opens takes its number (a state file on descriptor 1
  would receive the output). Reading that stdin or writing that stdout fails as reading or
  writing a closed descriptor does (``EBADF``): the command's "cannot read" or "cannot write"
  line, never output thrown away while pages count as seen.
- stdout: text holding bytes that were not UTF-8 (a file's name) is written as it was read.
  Whatever write or flush of it fails (a full disk, a closed descriptor) is
  :class:`~.exits.CLIError` ``cannot write stdout: ...`` with exit code 4, never a traceback
  nor an error about another file; a reader that went away stays a ``BrokenPipeError``
  (exit code 141). After a failure stdout is sent to ``/dev/null``, so that nothing still
  buffered fails again when the interpreter exits.
- stderr carries diagnostics only: what cannot be written there (closed, full) is dropped,
  and the exit code is the command's own (a summary that cannot be printed fails nothing).

Only the standard library is imported here: ``crawldedup --version`` goes through it too.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator, List, Optional

from .exits import CLIError, ExitCode

__all__ = ["standard_streams", "silence_stdout"]


@contextmanager
def standard_streams() -> Iterator[None]:
    """Make ``sys.stdin``, ``sys.stdout`` and ``sys.stderr`` safe for the block (see the module
    docstring); the streams the block found are back afterwards."""
    saved = sys.stdin, sys.stdout, sys.stderr
    _hold_closed_descriptors()
    sys.stdin = saved[0] if saved[0] is not None else _ClosedStream("stdin")
    sys.stdout = _Stdout(saved[1] if saved[1] is not None else _ClosedStream("stdout"))
    sys.stderr = _Diagnostics(saved[2])
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


def silence_stdout() -> None:
    """Send stdout to ``/dev/null`` from now on: after its reader went away or a write failed,
    what is still buffered must not fail again (as a second error, or at the interpreter's exit)."""
    stream = sys.stdout
    target = stream._stream if isinstance(stream, _Stdout) else stream
    try:
        fd = target.fileno()
    except (OSError, ValueError, AttributeError):  # no descriptor (a test's capture, a closed stream)
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:  # pragma: no cover  (no /dev/null)
        pass


def _hold_closed_descriptors() -> None:
    """Open ``/dev/null`` on each of descriptors 0, 1 and 2 that is closed."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                held = os.open(os.devnull, os.O_RDWR)
                if held != fd:
                    os.dup2(held, fd)
                    os.close(held)
            except OSError:  # pragma: no cover  (no /dev/null: nothing to hold it with)
                pass


def _closed() -> OSError:
    return OSError(errno.EBADF, os.strerror(errno.EBADF))


class _ClosedStream(io.RawIOBase):
    """A standard stream its caller closed: every read and write fails with ``EBADF``."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    @property
    def buffer(self) -> _ClosedStream:
        return self

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        raise _closed()

    def isatty(self) -> bool:
        return False

    def readinto(self, buffer: Any) -> int:
        raise _closed()

    def read1(self, size: int = -1) -> bytes:
        raise _closed()

    def write(self, data: Any) -> int:
        raise _closed()

    def flush(self) -> None:
        pass


class _Stdout:
    """stdout (text, or its binary ``buffer``) whose write errors are the command's one line."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    @property
    def buffer(self) -> _Stdout:
        return _Stdout(self._stream.buffer)

    def write(self, data: Any) -> int:
        try:
            try:
                return int(self._stream.write(data))
            except UnicodeEncodeError:  # a name holding bytes of another encoding: written as read
                return self._write_as_read(data)
        except OSError as exc:
            raise _failed(exc) from None

    def _write_as_read(self, text: str) -> int:
        """``text`` in the stream's encoding, a character read from bytes it could not decode
        as those bytes again (surrogateescape), any other it cannot encode as an escape."""
        encoding = getattr(self._stream, "encoding", None) or "utf-8"
        try:
            data = text.encode(encoding, "surrogateescape")
        except UnicodeEncodeError:
            data = text.encode(encoding, "backslashreplace")
        self._stream.flush()  # what the text layer holds goes first
        self._stream.buffer.write(data)
        return len(text)

    def writelines(self, lines: List[Any]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise _failed(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _failed(exc: OSError) -> BaseException:
    silence_stdout()
    if isinstance(exc, BrokenPipeError):
        return exc
    return CLIError(ExitCode.IO, f"cannot write stdout: {exc.strerror or exc}")


class _Diagnostics(io.TextIOBase):
    """stderr, whose failures are dropped: each write goes out whole at once, straight to the
    descriptor when there is one (nothing stays buffered to fail later)."""

    def __init__(self, stream: Optional[Any]) -> None:
        super().__init__()
        self._stream = stream
        self._fd: Optional[int] = None
        self._encoding = getattr(stream, "encoding", None) or "utf-8"
        try:
            if stream is not None:
                stream.flush()
                self._fd = stream.fileno()
        except (OSError, ValueError, AttributeError):  # no descriptor (a test's capture), or closed
            pass

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        try:
            return self._fd is not None and os.isatty(self._fd)
        except OSError:  # pragma: no cover
            return False

    def fileno(self) -> int:
        if self._fd is None:
            raise io.UnsupportedOperation("stderr has no descriptor")
        return self._fd

    def write(self, text: str) -> int:
        try:
            if self._fd is not None:
                data = memoryview(text.encode(self._encoding, "backslashreplace"))
                while data:
                    data = data[os.write(self._fd, data) :]
            elif self._stream is not None:
                self._stream.write(text)
                self._stream.flush()
        except (OSError, ValueError):  # closed or full: diagnostics are dropped, the run goes on
            pass
        return len(text)

    def flush(self) -> None:
        pass
