"""The ``crawldedup`` command: filter a crawl frontier, check canonical forms, inspect and merge filters.

Exit codes (docs/cli.md):

==== ==========================================================================
0    success
1    ``canonicalize``: at least one line was not an accepted URL
2    usage error (bad option or value)
3    state or filter file missing, corrupt, or incompatible
4    an input could not be read, or an output could not be written
5    the claim store (Redis, SQLite) is unavailable
130  interrupted (SIGINT; 143 for SIGTERM): the filter was flushed first
==== ==========================================================================
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import zlib
from contextlib import contextmanager
from typing import IO, Callable, Iterator, List, Optional, Sequence, Tuple

from . import __version__

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_STATE = 3
EXIT_IO = 4
EXIT_STORE = 5

GZIP_MAGIC = b"\x1f\x8b"
#: One read takes up to 1 MiB: about 13,000 frontier lines of 80 bytes, so one read feeds one batch.
READ_BYTES = 1 << 20
#: A "line" longer than this without a newline is cut here, so a binary file cannot grow memory
#: without bound; it is then rejected like any overlong URL (the policy's limit is 8,192 chars).
MAX_LINE_BYTES = 1 << 20
#: Lines per claim: 10,000 keeps the fixed cost of a call (canonicalize_many, one hash_many, one
#: store round trip) small against the per-line work, and a batch of output is one write.
BATCH_LINES = 10_000
#: Progress redraws at most this often (seconds): a terminal write per batch would cost more than the batch.
PROGRESS_INTERVAL = 0.2
#: A tab separates a base from a relative link on one line (``BASE<TAB>LINK``). A tab can never
#: be part of a URL (browsers and the canonical policy remove it), so the form is unambiguous.
BASE_SEPARATOR = "\t"


class CLIError(Exception):
    """An expected failure: one line on stderr and an exit code, never a traceback."""

    def __init__(self, exit_code: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# --------------------------------------------------------------------------- input


class InputReader:
    """Reads lines from files (``-`` is stdin), gunzipping any that starts with the gzip magic.

    :param names: paths, or ``-`` for stdin; none means stdin.
    :raises CLIError: (``EXIT_IO``) an input that cannot be opened or read, or a broken gzip stream.
    """

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names) or ["-"]
        #: Bytes taken from the inputs so far (compressed bytes for gzip), for the progress bar.
        self.bytes_read = 0
        self.total_bytes = self._total_size()

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

    def blocks(self) -> Iterator[Tuple[str, int, List[str]]]:
        """Yield ``(input name, number of its first line, lines)`` blocks, newlines removed."""
        for name in self.names:
            stream = self._open(name)
            try:
                line_number = 1
                for lines in self._lines(name, stream):
                    yield name, line_number, lines
                    line_number += len(lines)
            finally:
                if stream is not _stdin():
                    stream.close()

    def _open(self, name: str) -> IO[bytes]:
        if name == "-":
            return _stdin()
        try:
            return open(name, "rb")
        except OSError as exc:
            raise CLIError(EXIT_IO, f"cannot read input {name}: {exc.strerror or exc}") from None

    def _chunks(self, name: str, stream: IO[bytes]) -> Iterator[bytes]:
        read = getattr(stream, "read1", stream.read)
        while True:
            try:
                chunk = read(READ_BYTES)
            except OSError as exc:
                raise CLIError(EXIT_IO, f"cannot read input {name}: {exc.strerror or exc}") from None
            if not chunk:
                return
            self.bytes_read += len(chunk)
            yield chunk

    def _decoded(self, name: str, stream: IO[bytes]) -> Iterator[bytes]:
        chunks = self._chunks(name, stream)
        head = b""
        for chunk in chunks:
            head += chunk
            if len(head) >= len(GZIP_MAGIC):
                break
        if not head.startswith(GZIP_MAGIC):
            if head:
                yield head
            yield from chunks
            return
        yield from _gunzip(name, head, chunks)

    def _lines(self, name: str, stream: IO[bytes]) -> Iterator[List[str]]:
        rest = b""
        for chunk in self._decoded(name, stream):
            data = rest + chunk if rest else chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                if len(rest) > MAX_LINE_BYTES:
                    yield _split(rest)
                    rest = b""
                continue
            rest = data[cut + 1:]
            yield _split(data[:cut])
        if rest:
            yield _split(rest)


def _stdin() -> IO[bytes]:
    return sys.stdin.buffer


def _is_regular(mode: int) -> bool:
    import stat

    return stat.S_ISREG(mode)


def _gunzip(name: str, head: bytes, chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Decompress one or more concatenated gzip members (what ``cat a.gz b.gz`` makes)."""
    decoder = zlib.decompressobj(wbits=31)
    pending: Optional[bytes] = head
    in_member = False
    while pending is not None:
        if pending:
            in_member = True
            try:
                out = decoder.decompress(pending)
            except zlib.error as exc:
                raise CLIError(EXIT_IO, f"cannot read input {name}: broken gzip data ({exc})") from None
            if out:
                yield out
            if decoder.eof:
                pending, in_member = decoder.unused_data, False
                decoder = zlib.decompressobj(wbits=31)
                continue
        pending = next(chunks, None)
    if in_member:
        raise CLIError(EXIT_IO, f"cannot read input {name}: gzip data ends before the end of its stream (truncated file?)")


def _split(block: bytes) -> List[str]:
    # surrogateescape keeps bytes that are not UTF-8: the canonicalizer rejects them with a
    # reason, and --output raw / --rejects write them back unchanged.
    text = block.decode("utf-8", "surrogateescape")
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    return text.split("\n")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


# --------------------------------------------------------------------------- output


class Output:
    """Writes whole batches to a binary stream in one call each.

    :raises CLIError: (``EXIT_IO``) the stream cannot be written (disk full, closed pipe...).
    """

    def __init__(self, stream: IO[bytes], name: str) -> None:
        self.stream = stream
        self.name = name

    def write_lines(self, lines: List[str]) -> None:
        if not lines:
            return
        try:
            self.stream.write(_encode("\n".join(lines) + "\n"))
            self.stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise CLIError(EXIT_IO, f"cannot write {self.name}: {exc.strerror or exc}") from None


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
        text = f"{lines:,} lines  {rate:,.0f} lines/s"
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
    """Turns SIGINT/SIGTERM into :class:`KeyboardInterrupt`, but never inside a claim-and-write step.

    Inside :meth:`deferred` a signal is remembered and raised when the step is over, so each
    batch is either claimed and written in full or not claimed at all: nothing claimed is
    left unprinted, and the filter file stays valid.
    """

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self._deferring = False
        self._previous: dict = {}

    def _handle(self, signum: int, frame: object) -> None:
        self.signum = signum
        if not self._deferring:
            raise KeyboardInterrupt

    def __enter__(self) -> "Interruptions":
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except (ValueError, OSError):  # pragma: no cover  (not the main thread)
                pass
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
        if self.signum is not None:
            raise KeyboardInterrupt

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or signal.SIGINT)


# --------------------------------------------------------------------------- filter


class FilterCounts:
    """What ``filter`` did so far; the summary prints it."""

    def __init__(self) -> None:
        self.lines = 0
        self.invalid = 0
        self.new = 0
        self.started = time.monotonic()

    @property
    def duplicates(self) -> int:
        return self.lines - self.invalid - self.new

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started


def _canonicalize_lines(lines: List[str], base: Optional[str]):
    """Canonicalize a block of lines; ``BASE<TAB>LINK`` lines resolve against their own base.

    :returns: a :class:`~crawldedup.Canonicalized` (``None`` and a reason for each invalid line).
    """
    from .canonical import Canonicalized, InvalidURL, canonicalize, canonicalize_many

    if not any(BASE_SEPARATOR in line for line in lines):
        return canonicalize_many(lines, base=base)
    urls: List[Optional[str]] = []
    errors = {}
    for index, line in enumerate(lines):
        line_base, sep, link = line.partition(BASE_SEPARATOR)
        try:
            urls.append(canonicalize(link, base=line_base) if sep else canonicalize(line, base=base))
        except InvalidURL as exc:
            urls.append(None)
            errors[index] = exc
    return Canonicalized(urls, errors)


def _display(name: str) -> str:
    return "<stdin>" if name == "-" else name


# --------------------------------------------------------------------------- canonicalize


def run_canonicalize(args: argparse.Namespace) -> int:
    """Print the canonical form of each line; an invalid line prints an empty line.

    The output stays line-aligned with the input (``paste`` them side by side); each invalid
    line's reason goes to stderr as ``NAME:LINE: reason`` and the exit code is 1.
    """
    reader = InputReader(args.inputs)
    out = Output(_stdout(), "stdout")
    invalid = 0
    for name, first_line, lines in reader.blocks():
        result = _canonicalize_lines(lines, args.base)
        out.write_lines([url or "" for url in result.urls])
        for index in sorted(result.errors):
            print(f"{_display(name)}:{first_line + index}: {result.errors[index]}", file=sys.stderr)
        invalid += len(result.errors)
    return EXIT_INVALID if invalid else EXIT_OK


def _stdout() -> IO[bytes]:
    return sys.stdout.buffer


# --------------------------------------------------------------------------- arguments


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}")
    return value


def _base_url(text: str) -> str:
    from .canonical import InvalidURL, canonicalize

    try:
        canonicalize(text)
    except InvalidURL as exc:
        raise argparse.ArgumentTypeError(f"must be an absolute http(s) URL ({exc})") from None
    return text


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``crawldedup`` command and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="crawldedup",
        description="Has this page already been claimed? Deduplicate crawl frontiers by canonical URL.",
        epilog="Exit codes: 0 ok, 1 invalid lines (canonicalize), 2 usage, 3 state file, 4 input/output, "
               "5 claim store unavailable, 130 interrupted. See docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"crawldedup {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    inputs_help = "files of URLs, one per line, gzip or plain (detected); '-' or none reads stdin"
    base_help = ("resolve relative links against this URL (a line 'BASE<TAB>LINK' carries its own base)")

    canon = commands.add_parser(
        "canonicalize", help="print the canonical form of each URL",
        description="Print the canonical form of each line (an empty line for an invalid one, "
                    "with the reason on stderr and exit code 1).")
    canon.add_argument("inputs", nargs="*", metavar="FILE", help=inputs_help)
    canon.add_argument("--base", type=_base_url, help=base_help)
    canon.set_defaults(run=run_canonicalize)

    info = commands.add_parser("info", help="describe a filter file",
                               description="Print a filter file's header, size, fill, estimated items and error rate.")
    info.add_argument("file", metavar="FILE")
    info.set_defaults(run=run_info)

    merge = commands.add_parser(
        "merge", help="union compatible filter files",
        description="Write the union of filters built with the same capacity, error rate and canonical policy.")
    merge.add_argument("files", nargs="+", metavar="FILE")
    merge.add_argument("-o", "--output", required=True, metavar="OUT", help="filter file to create")
    merge.add_argument("--force", action="store_true", help="replace OUT if it exists")
    merge.set_defaults(run=run_merge)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``crawldedup`` command.

    :param argv: the arguments (``sys.argv[1:]`` when None).
    :returns: the exit code (see the module docstring).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return args.run(args)
    except CLIError as exc:
        return _fail(exc.exit_code, str(exc))
    except BrokenPipeError:
        # The reader went away (`crawldedup filter | head`): stop quietly, as `cat` would.
        _silence_stdout()
        return 128 + signal.SIGPIPE if hasattr(signal, "SIGPIPE") else EXIT_IO
    except KeyboardInterrupt:
        return 128 + signal.SIGINT


def _fail(code: int, message: str) -> int:
    print(f"crawldedup: error: {message}", file=sys.stderr)
    return code


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover  (no real stdout)
        pass


def run_info(args: argparse.Namespace) -> int:
    raise NotImplementedError


def run_merge(args: argparse.Namespace) -> int:
    raise NotImplementedError
