"""Line input and output of the ``crawldedup`` command: a gzip-aware line reader, batch writes,
a progress bar, and signals that wait for the end of a batch."""

from __future__ import annotations

import errno
import os
import select
import signal
import stat
import struct
import sys
import time
import zlib
from contextlib import contextmanager
from typing import IO, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union, overload

import numpy as np

from .._wording import counted
from .exits import CLIError, ExitCode

try:
    import fcntl
    import termios
except ImportError:  # pragma: no cover  (Windows: no pipe to wait on)
    fcntl = termios = None  # type: ignore[assignment]

GZIP_MAGIC = b"\x1f\x8b"
NEWLINE = 0x0A
#: A block of lines as read: bytes, or a view of them (shared memory, for a --jobs worker).
Block = Union[bytes, memoryview]
#: One read takes up to 1 MiB: about 13,000 frontier lines of 80 bytes, so one read feeds one batch.
READ_BYTES = 1 << 20
#: A line longer than this is not kept whole, so that a binary file cannot grow memory without
#: bound: it is one invalid line ("line too long"), read up to its newline and dropped (the
#: policy refuses URLs far shorter: 8,192 characters).
MAX_LINE_BYTES = 1 << 20
#: What stands for such a line in a block of lines, followed by its length and its first bytes
#: (:func:`long_lines` reads it back). Three NUL bytes cannot start a line a crawler wrote.
LONG_LINE = b"\x00\x00\x00crawldedup-long-line "
#: Bytes of a long line kept, to name it in ``--rejects``.
LONG_LINE_HEAD = 120
#: Seconds a pipe stays silent before the lines read so far are handed on as a batch (a crawler
#: still writing its links gets its pages back without waiting for 10,000 more lines).
IDLE_SECONDS = 0.2


class Idle:
    """What the reader yields when a pipe has been silent for ``idle_seconds``: hand on what
    you have (:func:`line_batches` ends its batch there)."""


#: The one :class:`Idle` marker.
IDLE = Idle()
#: Progress redraws at most this often (seconds): a terminal write per batch would cost more than the batch.
PROGRESS_INTERVAL = 0.2


# --------------------------------------------------------------------------- input


class InputReader:
    """Reads lines from files (``-`` is stdin), gunzipping any that starts with the gzip magic.

    :param names: paths, or ``-`` for stdin; none means stdin.
    :raises CLIError: (``ExitCode.IO``) an input that cannot be opened or read, or a broken gzip stream.
    """

    def __init__(self, names: Sequence[str], *, idle_seconds: Optional[float] = None) -> None:
        self.names = list(names) or ["-"]
        #: After this long without input on a pipe, :meth:`raw_blocks` yields :data:`IDLE` (None: never).
        self.idle_seconds = idle_seconds
        #: Bytes taken from the inputs so far (compressed bytes for gzip), for the progress bar.
        self.bytes_read = 0
        self.total_bytes = self._total_size()
        #: True once a line held bytes that are not UTF-8 (see :func:`as_read`).
        self.undecodable = False
        self._current: Optional[IO[bytes]] = None

    def _total_size(self) -> Optional[int]:
        total = 0
        for name in self.names:
            try:
                info = os.stat(sys.stdin.fileno()) if name == "-" else os.stat(name)
            except (OSError, ValueError):
                return None
            if not _is_regular(info.st_mode):
                return None
            total += info.st_size
        return total

    def check_readable(self) -> None:
        """Fail before any work when a named input is missing or not a readable file.

        :raises CLIError: (``ExitCode.IO``) naming the input.
        """
        for name in self.names:
            if name == "-":
                continue
            if os.path.isdir(name):
                raise CLIError(ExitCode.IO, f"cannot read input {name}: Is a directory")
            if not os.access(name, os.R_OK):
                problem = "Permission denied" if os.path.exists(name) else "No such file or directory"
                raise CLIError(ExitCode.IO, f"cannot read input {name}: {problem}")

    def blocks(self) -> Iterator[Tuple[str, int, Lines]]:
        """Yield ``(input name, number of its first line, lines)`` blocks, newlines removed."""
        for name in self.names:
            stream = self._open(name)
            try:
                line_number = 1
                for lines in self._lines(name, stream):
                    yield name, line_number, lines
                    line_number += len(lines.lines)
            finally:
                if stream is not _stdin():
                    stream.close()

    def _open(self, name: str) -> IO[bytes]:
        if name == "-":
            return _stdin()
        try:
            return open(name, "rb")
        except OSError as exc:
            raise CLIError(ExitCode.IO, f"cannot read input {name}: {exc.strerror or exc}") from None

    def _chunks(self, name: str, stream: IO[bytes]) -> Iterator[Union[bytes, Idle]]:
        read = getattr(stream, "read1", stream.read)
        while True:
            if self._silent(stream):
                yield IDLE
            try:
                chunk = read(READ_BYTES)
            except OSError as exc:
                raise CLIError(ExitCode.IO, f"cannot read input {name}: {exc.strerror or exc}") from None
            if not chunk:
                return
            self.bytes_read += len(chunk)
            yield chunk

    def _silent(self, stream: IO[bytes]) -> bool:
        """Whether ``stream`` is a pipe (or terminal) that stays silent for ``idle_seconds``."""
        if self.idle_seconds is None:
            return False
        try:
            fd = stream.fileno()
            if _is_regular(os.fstat(fd).st_mode) or select.select([fd], [], [], 0)[0]:
                return False
            return not select.select([fd], [], [], self.idle_seconds)[0]
        except (OSError, ValueError):
            return False

    def _decoded(self, name: str, stream: IO[bytes]) -> Iterator[Union[bytes, Idle]]:
        chunks = self._chunks(name, stream)
        head = b""
        for chunk in chunks:
            if isinstance(chunk, Idle):
                continue  # nothing to hand on before the first bytes are known
            head += chunk
            if len(head) >= len(GZIP_MAGIC):
                break
        if not head.startswith(GZIP_MAGIC):
            if head:
                yield head
            yield from chunks
            return
        yield from _gunzip(name, head, chunks)

    def raw_blocks(self) -> Iterator[Union[bytes, Idle]]:
        """Yield the inputs as blocks of whole lines, still bytes: the lines of a block joined by
        newlines, without the last one (:func:`decode_lines` makes them lines); and :data:`IDLE`
        when a pipe stays silent (with ``idle_seconds``)."""
        for name in self.names:
            stream = self._open(name)
            self._current = stream
            try:
                yield from self._raw_lines(name, stream)
            finally:
                self._current = None
                if stream is not _stdin():
                    stream.close()

    def may_wait(self) -> bool:
        """Whether the next read may wait for input to arrive: a pipe or terminal with nothing to
        read yet (a crawler still writing its links). A regular file never waits."""
        stream = self._current
        if stream is None:
            return False
        try:
            fd = stream.fileno()
            if _is_regular(os.fstat(fd).st_mode):
                return False
            readable, _, _ = select.select([fd], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def _lines(self, name: str, stream: IO[bytes]) -> Iterator[Lines]:
        for block in self._raw_lines(name, stream):
            if isinstance(block, Idle):
                continue
            decoded = decode_lines(block)
            self.undecodable |= decoded.undecodable
            yield decoded

    def _raw_lines(self, name: str, stream: IO[bytes]) -> Iterator[Union[bytes, Idle]]:
        rest = b""
        skipped: Optional[Tuple[bytes, int]] = None  # a line too long: its first bytes, its length so far
        for chunk in self._decoded(name, stream):
            if isinstance(chunk, Idle):
                yield chunk
                continue
            if skipped is not None:
                cut = chunk.find(b"\n")
                if cut < 0:
                    skipped = (skipped[0], skipped[1] + len(chunk))
                    continue
                yield _long_line(skipped[0], skipped[1] + cut)
                skipped, chunk = None, chunk[cut + 1 :]
            data = rest + chunk if rest else chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                if len(rest) > MAX_LINE_BYTES:  # read on to its newline, keeping its head alone
                    skipped, rest = (rest[:LONG_LINE_HEAD], len(rest)), b""
                continue
            rest = data[cut + 1 :]
            yield _cap_lines(data[:cut])
        if skipped is not None:
            yield _long_line(skipped[0], skipped[1])
        elif rest:
            yield _cap_lines(rest)


def _long_line(head: bytes, length: int) -> bytes:
    """What stands for a line of ``length`` bytes that starts with ``head`` (see :data:`LONG_LINE`)."""
    return LONG_LINE + b"%d " % length + head.replace(b"\r", b"")


def _cap_lines(block: bytes) -> bytes:
    """``block`` with each line longer than :data:`MAX_LINE_BYTES` replaced by its marker; a block
    that short holds none (the common case costs one comparison)."""
    if len(block) <= MAX_LINE_BYTES:
        return block
    ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == NEWLINE)
    starts = np.concatenate(([0], ends + 1))
    stops = np.concatenate((ends, [len(block)]))
    long = np.flatnonzero(stops - starts > MAX_LINE_BYTES)
    if not len(long):
        return block
    parts, position = [], 0
    for row in long.tolist():
        start, stop = int(starts[row]), int(stops[row])
        parts += [block[position:start], _long_line(block[start : start + LONG_LINE_HEAD], stop - start)]
        position = stop
    parts.append(block[position:])
    return b"".join(parts)


class Lines(NamedTuple):
    """The lines of a block (:func:`decode_lines`)."""

    lines: List[str]
    #: Whether some held bytes that are not UTF-8 (then :func:`as_read` gives them back as bytes).
    undecodable: bool
    #: The rows that stand for lines too long to keep: row -> (their first characters, their length in bytes).
    too_long: Dict[int, Tuple[str, int]]


_LONG_LINE_TEXT = LONG_LINE.decode("ascii")


def decode_lines(block: Block) -> Lines:
    """The lines of a block of :meth:`InputReader.raw_blocks`."""
    try:
        text, undecodable = str(block, "utf-8"), False  # as fast as the fallback on valid input
    except UnicodeDecodeError:
        # surrogateescape keeps the bytes that are not UTF-8: --output raw and --rejects
        # write them back unchanged, and as_read() gives them back to the canonicalizer.
        text, undecodable = str(block, "utf-8", "surrogateescape"), True
    lines = _split(text)
    too_long = {}
    if _LONG_LINE_TEXT in text:  # one search of the block: the common case lists no line
        for row, line in enumerate(lines):
            if line.startswith(_LONG_LINE_TEXT):
                length, _, head = line[len(_LONG_LINE_TEXT) :].partition(" ")
                too_long[row] = (head, int(length))
    return Lines(lines, undecodable, too_long)


def line_batches(blocks: Iterator[Union[bytes, Idle]], size: int) -> Iterator[bytes]:
    """Regroup blocks of :meth:`InputReader.raw_blocks` into blocks of ``size`` lines each (the
    last one, and one cut short by :data:`IDLE`, may hold fewer), cut at the newlines that one
    vectorized comparison per block marks."""
    pending: List[bytes] = []
    count = 0  # lines in pending
    for block in blocks:
        if isinstance(block, Idle):
            if pending:
                yield b"\n".join(pending)
                pending, count = [], 0
            continue
        newlines = np.frombuffer(block, dtype=np.uint8) == NEWLINE
        start = 0  # where the block's lines not yet batched begin
        while True:
            # The batch's last line ends at the newline that many lines on, or at the block's end.
            stop, found = _nth_newline(newlines, start, size - count)
            if stop < 0 and found + 1 == size - count:
                stop = len(block)
            if stop < 0:
                pending.append(block[start:])
                count += found + 1
                break
            pending.append(block[start:stop])
            yield b"\n".join(pending)
            pending, count = [], 0
            start = stop + 1
            if start > len(block):
                break
    if pending:
        yield b"\n".join(pending)


#: Bytes of a block whose newlines are counted at once when looking for a batch's end: listing
#: every newline's position (numpy's nonzero) cost 0.45 ms a MiB, counting them 0.1 ms.
NEWLINE_PIECE = 1 << 16


def _nth_newline(newlines: np.ndarray, start: int, n: int) -> Tuple[int, int]:
    """The position of the ``n``-th newline at or after ``start`` (marked True in ``newlines``)
    and ``n``; or -1 and the number of newlines there are from ``start``, when fewer."""
    found = 0
    for piece in range(start, len(newlines), NEWLINE_PIECE):
        marks = newlines[piece : piece + NEWLINE_PIECE]
        here = int(np.count_nonzero(marks))
        if found + here >= n:
            return piece + int(np.flatnonzero(marks)[n - found - 1]), n
        found += here
    return -1, found


def _stdin() -> IO[bytes]:
    return sys.stdin.buffer


def _is_regular(mode: int) -> bool:
    return stat.S_ISREG(mode)


def _gunzip(name: str, head: bytes, chunks: Iterator[Union[bytes, Idle]]) -> Iterator[bytes]:
    """Decompress one or more concatenated gzip members (what ``cat a.gz b.gz`` makes)."""
    decoder = zlib.decompressobj(wbits=31)
    pending: Optional[bytes] = head
    in_member = False
    while pending is not None:
        if pending:
            in_member = True
            data = pending
            while True:  # at most READ_BYTES out per call: a small input may hold gigabytes
                try:
                    out = decoder.decompress(data, READ_BYTES)
                except zlib.error as exc:
                    raise CLIError(ExitCode.IO, f"cannot read input {name}: broken gzip data ({exc})") from None
                if out:
                    yield out
                data = decoder.unconsumed_tail
                if decoder.eof or (not data and len(out) < READ_BYTES):
                    break
            if decoder.eof:
                pending, in_member = decoder.unused_data, False
                decoder = zlib.decompressobj(wbits=31)
                continue
        chunk = next(chunks, None)
        pending = b"" if isinstance(chunk, Idle) else chunk
    if in_member:
        raise CLIError(
            ExitCode.IO, f"cannot read input {name}: gzip data ends before the end of its stream (truncated file?)"
        )


def _split(text: str) -> List[str]:
    if "\r" in text:  # CRLF line ends; a block ends where a newline was cut off
        text = text.replace("\r\n", "\n").removesuffix("\r")
    return text.split("\n")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


@overload
def as_read(texts: Sequence[str]) -> List[Union[str, bytes]]: ...
@overload
def as_read(texts: Sequence[Optional[str]]) -> List[Optional[Union[str, bytes]]]: ...
def as_read(texts: Sequence[Optional[str]]) -> Sequence[Optional[Union[str, bytes]]]:
    """``texts`` as they were read: each one holding bytes that are not UTF-8 is those bytes again.

    The canonicalizer then names the first bad byte and its offset, as it does for a caller of
    the API, instead of the character that stands for it in the line. Only for the lines of an
    :class:`InputReader` whose ``undecodable`` is set: the others hold none.
    """
    return [_as_read(text) for text in texts]


def _as_read(text: Optional[str]) -> Optional[Union[str, bytes]]:
    if text is None or text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a byte that surrogateescape kept
        return _encode(text)
    return text


# --------------------------------------------------------------------------- output


class Output:
    """Writes whole batches to a binary stream in one call each, written and flushed on return.

    On a regular file a batch that fails is cut off again (the file is truncated to where the
    batch began), so the file holds whole batches only: the lines of a batch that was handed
    back are not in it, and a rerun that prints them prints each page once.

    With ``until_read``, on a pipe a batch is written only once its reader has taken every byte
    of it out of the pipe: ``head`` exits with the rest of the pipe unread (up to 64 KiB on
    Linux), and those lines must count as not written. A reader that exits first is a
    :class:`BrokenPipeError`.

    :raises CLIError: (``ExitCode.IO``) the stream cannot be written (disk full, closed pipe...).
    """

    def __init__(self, stream: IO[bytes], name: str, *, until_read: bool = False) -> None:
        self.stream = stream
        self.name = name
        try:
            self._fd: Optional[int] = stream.fileno()
            mode = os.fstat(self._fd).st_mode
        except (OSError, ValueError, AttributeError):  # no descriptor (a test's BytesIO)
            self._fd, mode = None, 0
        self.regular_file = _is_regular(mode)
        self._pipe = until_read and stat.S_ISFIFO(mode) and _pipe_pending(self._fd) is not None

    def write_lines(self, lines: List[str]) -> None:
        if not lines:
            return
        start = os.lseek(self._fd, 0, os.SEEK_CUR) if self.regular_file and self._fd is not None else None
        try:
            self._write_all(_encode("\n".join(lines) + "\n"))
            if self._pipe:
                self._wait_until_read()
        except BaseException as exc:
            self._drop_batch(start)
            if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
                raise CLIError(ExitCode.IO, f"cannot write {self.name}: {exc.strerror or exc}") from None
            raise

    def _write_all(self, data: bytes) -> None:
        """Write ``data`` whole or raise: straight to the descriptor, because a buffered stream can
        take a short write (a file reaching its size limit) for a whole one and go on."""
        if self._fd is None:
            self.stream.write(data)
            self.stream.flush()
            return
        self.stream.flush()  # nothing buffered, so the bytes stay in order
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def _wait_until_read(self) -> None:
        """Return once the pipe is empty; raise BrokenPipeError once its reader is gone.

        Polls the bytes left in the pipe, from 0.5 ms up to every 50 ms: a reader that keeps up
        (``wc``, ``sort``, a file) empties it within the first polls.
        """
        assert self._fd is not None
        gone = select.poll()
        gone.register(self._fd, select.POLLERR)  # the write end of a pipe whose reader closed
        delay = 0.0005
        while _pipe_pending(self._fd):
            if gone.poll(0):
                raise BrokenPipeError(errno.EPIPE, "the reader of stdout went away")
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def sync(self) -> None:
        """Flush, and on a regular file fsync: what was written is on disk.

        :raises CLIError: (``ExitCode.IO``) when the file system refuses.
        """
        try:
            self.stream.flush()
            if self.regular_file and self._fd is not None:
                os.fsync(self._fd)
        except OSError as exc:
            raise CLIError(ExitCode.IO, f"cannot write {self.name}: {exc.strerror or exc}") from None

    def _drop_batch(self, start: Optional[int]) -> None:
        """Drop what a failed batch left: truncate a regular file where the batch began, and send
        what the stream still buffers to /dev/null, so that no later flush writes it (after the
        cut, or as a second error at exit). Nothing more is written to this stream."""
        if self._fd is None:
            return
        try:
            if start is not None:
                os.ftruncate(self._fd, start)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._fd)
            os.close(devnull)
        except OSError:  # pragma: no cover  (the batch stays handed back: a rerun prints it again)
            pass


def _pipe_pending(fd: Optional[int]) -> Optional[int]:
    """Bytes written to the pipe ``fd`` and not yet read (FIONREAD, which Linux answers on either
    end of a pipe); None where the system does not say."""
    if fd is None or fcntl is None:
        return None
    try:
        return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])
    except OSError:
        return None


class UnwrittenPages:
    """The file of pages claimed for good but never written (``--unwritten``): one canonical URL
    a line, appended, created only when a page needs it, and fsynced after each batch. A batch
    that does not fit is cut off again, so the file only ever holds whole lines of pages kept.

    :param path: the file.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        #: Pages kept in the file, and pages that could not be (lost, and said so).
        self.kept = 0
        self.lost = 0
        self.error: Optional[str] = None

    def keep(self, urls: List[str]) -> None:
        """Append ``urls``; a failure is remembered (``lost``, ``error``), not raised: the run is
        already failing for another reason."""
        if not urls:
            return
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            self._lose(urls, exc)
            return
        start: Optional[int] = None
        try:
            start = os.fstat(fd).st_size
            data = memoryview(_encode("".join(url + "\n" for url in urls)))
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        except OSError as exc:
            if start is not None:
                try:
                    os.ftruncate(fd, start)
                except OSError:  # pragma: no cover
                    pass
            self._lose(urls, exc)
            return
        finally:
            os.close(fd)
        self.kept += len(urls)

    def _lose(self, urls: List[str], exc: OSError) -> None:
        self.lost += len(urls)
        self.error = exc.strerror or str(exc)

    def report(self) -> Optional[str]:
        """One line saying where the unwritten pages went, or None when there were none."""
        if self.lost:
            return (
                f"{counted(self.lost, 'page')} claimed in the store, not written, could not be kept in "
                f"{self.path} ({self.error}): lost to this crawl"
                + (f"; {counted(self.kept, 'more page')} are in {self.path}" if self.kept else "")
            )
        if self.kept:
            return f"{counted(self.kept, 'page')} claimed in the store, not written: their URLs are in {self.path}"
        return None


class Progress:
    """A one-line progress bar on stderr, redrawn at most every :data:`PROGRESS_INTERVAL` seconds."""

    WIDTH = 24

    def __init__(self, stream: IO[str], enabled: bool, total_bytes: Optional[int]) -> None:
        self.stream = stream
        self.enabled = enabled
        self.total_bytes = total_bytes
        self.started = time.monotonic()
        self.last_draw = 0.0
        self.drawn = False

    def update(self, lines: int, bytes_read: int) -> None:
        now = time.monotonic()
        if not self.enabled or now - self.last_draw < PROGRESS_INTERVAL:
            return
        self.last_draw = now
        rate = lines / max(now - self.started, 1e-9)
        text = f"{counted(lines, 'line')}  {rate:,.0f} lines/s"
        if self.total_bytes:
            done = min(bytes_read / self.total_bytes, 1.0)
            filled = int(done * self.WIDTH)
            text = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done:4.0%}  " + text
        self.stream.write("\r" + text + "\x1b[K")
        self.stream.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False


# --------------------------------------------------------------------------- signals


class Interruptions:
    """Turns SIGINT/SIGTERM into :class:`KeyboardInterrupt`, but not inside a claim-and-write step.

    Inside :meth:`deferred` a signal is remembered and raised when the step is over, so each
    batch is either claimed and written in full or not claimed at all: nothing claimed is left
    unprinted, and the filter file stays valid. A second signal during a step raises at once
    (for a step stuck on a blocked pipe). After :meth:`settle`, signals are only remembered.
    """

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self._deferring = False
        self._settled = False
        self._previous: Dict[int, object] = {}

    def _handle(self, signum: int, frame: object) -> None:
        repeated = self.signum is not None
        self.signum = signum
        if not self._settled and (not self._deferring or repeated):
            raise KeyboardInterrupt

    def __enter__(self) -> Interruptions:
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except (ValueError, OSError):  # pragma: no cover  (not the main thread)
                pass
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Run a step that a signal must not cut in half."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
        if self.signum is not None:
            raise KeyboardInterrupt

    def settle(self) -> None:
        """From now on only remember signals: the run is closing its files."""
        self._settled = True
