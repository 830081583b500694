"""The page file of the ``local`` strategy: an append-only journal of each page's latest fingerprint.

Format version 1, little-endian (docs/content.md, "Stored pages"). A 64-byte header::

    0   8   magic b"CDDPAGES"
    8   4   format version (1)
    12  4   max_distance k
    16  16  content policy digest (ASCII hex)
    32  16  canonical policy digest (ASCII hex)
    48  12  zero
    60  4   CRC-32 of bytes 0 to 59

then batches, one per write: ``count`` (uint32), ``url_bytes`` (uint32), the CRC-32 of the
body (uint32), and the body: ``count`` entries of page id (int64), SimHash (uint64) and URL
length (uint32), followed by the URLs (UTF-8, concatenated). A page's latest entry wins.

A batch is one ``write`` of the whole record, so a process that dies mid-write leaves at most
a torn last batch: opening drops it (the file is cut back to the last whole batch). A damaged
batch before the last one is refused. When the journal holds more than twice as many entries
as pages, closing rewrites it with one entry per page (a temporary file renamed over it).
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .._files import replace_file
from ..canonical.policy import policy_conflict

try:
    import fcntl
except ImportError:  # pragma: no cover  (Windows: no advisory locks, one writer by convention)
    fcntl = None  # type: ignore[assignment]

__all__ = ["PAGES_FORMAT_VERSION", "PageFileError", "PageJournal"]

PAGES_MAGIC = b"CDDPAGES"
PAGES_FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sII16s16s12x")
_HEADER_BYTES = _HEADER.size + 4
_BATCH = struct.Struct("<III")
ENTRY = np.dtype([("id", "<i8"), ("simhash", "<u8"), ("url_bytes", "<u4")])
#: A journal is compacted on close once it holds more than this many entries per page.
COMPACT_RATIO = 2

Entries = Tuple[np.ndarray, np.ndarray, List[str]]
Ints = Union[np.ndarray, Sequence[int]]


class PageFileError(ValueError):
    """A file that is not a readable page journal, or one of another k or policy; the message
    names the path and the problem."""


def _header(max_distance: int, content_digest: str, canonical_digest: str) -> bytes:
    fields = _HEADER.pack(
        PAGES_MAGIC,
        PAGES_FORMAT_VERSION,
        max_distance,
        content_digest.encode("ascii"),
        canonical_digest.encode("ascii"),
    )
    return fields + struct.pack("<I", zlib.crc32(fields))


def _batch(ids: Ints, simhashes: Ints, urls: Sequence[str]) -> bytes:
    encoded = [url.encode("utf-8") for url in urls]
    entries = np.zeros(len(ids), dtype=ENTRY)
    entries["id"], entries["simhash"] = ids, np.asarray(simhashes, dtype=np.uint64)
    entries["url_bytes"] = [len(url) for url in encoded]
    body = entries.tobytes() + b"".join(encoded)
    return _BATCH.pack(len(ids), len(body) - entries.nbytes, zlib.crc32(body)) + body


class PageJournal:
    """The journal at ``path``: created when missing, else checked and read.

    :param max_distance: k of the pages' near-duplicate lookups, recorded in the header.
    :param content_digest: digest of the content policy of the SimHashes.
    :param canonical_digest: digest of the canonical policy of the page ids.
    :raises PageFileError: for a file that is not a journal, of another k or policy, already
        written by another process, or damaged before its last batch.
    """

    def __init__(self, path: Path, max_distance: int, content_digest: str, canonical_digest: str) -> None:
        self.path = path
        self._header = _header(max_distance, content_digest, canonical_digest)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o666)
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise PageFileError(f"{path}: written by another process (one writer at a time)") from None
            if os.fstat(self._fd).st_size == 0:
                os.write(self._fd, self._header)
            self._check_header()
        except BaseException:
            os.close(self._fd)
            raise
        #: Entries in the file (every batch's), against pages (the latest of each) on compaction.
        self.entries = 0

    def _bad(self, problem: str) -> PageFileError:
        return PageFileError(f"{self.path}: {problem}")

    def _check_header(self) -> None:
        stored = os.pread(self._fd, _HEADER_BYTES, 0)
        if not stored.startswith(PAGES_MAGIC[: len(stored)]):
            raise self._bad(f"not a crawldedup page file (bad magic {stored[:8]!r})")
        if len(stored) < _HEADER_BYTES:
            raise self._bad(f"truncated header: {len(stored)} bytes, a header is {_HEADER_BYTES}")
        if zlib.crc32(stored[:-4]) != struct.unpack("<I", stored[-4:])[0]:
            raise self._bad("corrupted header: its checksum does not match")
        _, version, k, content, canonical = _HEADER.unpack(stored[:-4])
        if version != PAGES_FORMAT_VERSION:
            raise self._bad(f"format version {version}, this crawldedup reads version {PAGES_FORMAT_VERSION}")
        _, _, want_k, want_content, want_canonical = _HEADER.unpack(self._header[:-4])
        if canonical != want_canonical:
            stamped, ours = canonical.decode("ascii", "replace"), want_canonical.decode("ascii")
            raise self._bad(f"holds pages made with {policy_conflict(stamped, ours)}")
        for name, theirs, ours in (("max_distance", k, want_k), ("content policy", content, want_content)):
            if theirs != ours:
                show = (lambda v: v.decode("ascii", "replace")) if isinstance(theirs, bytes) else str
                raise self._bad(f"holds pages of {name} {show(theirs)}, this crawl uses {name} {show(ours)}")

    def read(self) -> Iterator[Entries]:
        """Yield each whole batch as ``(ids, simhashes, urls)``; cut a torn last batch off the file.

        :raises PageFileError: for a damaged batch followed by more data.
        """
        size = os.fstat(self._fd).st_size
        offset = _HEADER_BYTES
        while offset < size:
            head = os.pread(self._fd, _BATCH.size, offset)
            torn = len(head) < _BATCH.size
            if not torn:
                count, url_bytes, crc = _BATCH.unpack(head)
                length = count * ENTRY.itemsize + url_bytes
                body = os.pread(self._fd, length, offset + _BATCH.size)
                torn = len(body) < length
                if not torn and zlib.crc32(body) != crc:
                    if offset + _BATCH.size + length < size:
                        raise self._bad(f"corrupted batch at byte {offset}: its checksum does not match")
                    torn = True
            if torn:  # the last write of a process that died: it never answered anyone
                os.ftruncate(self._fd, offset)
                return
            entries = np.frombuffer(body, dtype=ENTRY, count=count)
            blob, urls, start = body[entries.nbytes :], [], 0
            for length in entries["url_bytes"].tolist():
                urls.append(blob[start : start + length].decode("utf-8"))
                start += length
            self.entries += count
            yield entries["id"].copy(), entries["simhash"].copy(), urls
            offset += _BATCH.size + count * ENTRY.itemsize + url_bytes

    def append(self, ids: Ints, simhashes: Ints, urls: Sequence[str]) -> None:
        """Add one batch of pages' latest fingerprints, in one write (reaching the OS, not the disk).

        :raises OSError: when the write fails (the file is cut back: no torn batch stays).
        """
        if not len(ids):
            return
        record = _batch(ids, simhashes, urls)
        end = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            written = os.write(self._fd, record)
            if written != len(record):
                raise OSError(f"{self.path}: short write ({written} of {len(record)} bytes)")
        except BaseException:
            os.ftruncate(self._fd, end)
            raise
        self.entries += len(ids)

    def compact(self, ids: Ints, simhashes: Ints, urls: Sequence[str]) -> None:
        """Replace the file with one batch holding these pages (a synced temporary file renamed over it)."""
        replace_file(self.path, [self._header, _batch(ids, simhashes, urls) if len(ids) else b""])
        os.close(self._fd)  # the lock went with the old file; take it on the new one
        self._fd = os.open(self.path, os.O_RDWR | getattr(os, "O_BINARY", 0))
        if fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.entries = len(ids)

    def close(self, pages: Optional[Entries] = None) -> None:
        """Sync and close the file; with ``pages`` (every page's latest entry), compact it first
        when it holds more than :data:`COMPACT_RATIO` entries per page."""
        try:
            if pages is not None and self.entries > COMPACT_RATIO * max(1, len(pages[0])):
                self.compact(*pages)
            os.fsync(self._fd)
        finally:
            os.close(self._fd)
