"""File format v1 of the exact tier: its runs, its log and its manifest, and the checks made on open.

The layout is documented in ``docs/format.md`` ("The exact tier"); any change to it bumps
``FORMAT_VERSION``. Every file is little-endian and carries CRC-32 (zlib) checksums, so a
truncated or damaged file is named, never read as a wrong answer:

- a **run** (``run-<sequence>.run``): one 4096-byte header page, then the prefix index
  (``2**t + 1`` u64 offsets) and the packed suffixes of its sorted keys (:mod:`.runs`);
- the **log** (``log``): two 128-byte header slots written in turn, then the keys added since
  the last spill, 8 bytes each, in the order they were added (:mod:`.log`);
- the **manifest** (``MANIFEST``): the runs that make up the set, and the log's sequence
  (:mod:`.store`).
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from typing import Tuple

from .._wording import counted

#: The newest version of the exact tier's files this crawldedup reads and writes.
FORMAT_VERSION = 1
#: Keys are the first 64 bits of a URL's fingerprint (``h1``).
KEY_BITS = 64
#: A run's (and the log's) keys start after one 4 KiB page: page- and cache-line-aligned.
HEADER_BYTES = 4096
#: The CRC-32 of a header page sits in its last 4 bytes.
CHECKSUM_OFFSET = HEADER_BYTES - 4
#: Prefix bits of a run: at least this many, so that a suffix is at most 56 bits wide (an
#: unaligned 8-byte load then holds any suffix whatever its first bit).
MIN_PREFIX_BITS = 8
#: Keys per bucket of the prefix index: ``2**t`` buckets for ``n`` keys with ``t`` chosen so
#: that a bucket holds 2**BUCKET_SHIFT to 2**(BUCKET_SHIFT + 1) keys on average (16 to 31).
BUCKET_SHIFT = 4
#: The stream of suffixes ends with this many zero bytes, so that reading 8 bytes at the
#: last suffix's first byte stays in the file.
STREAM_PADDING = 8
#: The generation of the keys of a set without a recrawl window.
TIMELESS = -1

RUN_MAGIC = b"CDDEXRUN"
LOG_MAGIC = b"CDDEXLOG"
MANIFEST_MAGIC = b"CDDEXMAN"

# magic, version, header bytes, key bits, prefix bits, keys, generation, sequence, index bytes,
# stream bytes, body crc, reserved.
_RUN_FIELDS = struct.Struct("<8sIIIIQqQQQII")
#: A log header slot: magic, version, reserved, sequence, generation, count, flushed, crc of the
#: keys, crc of the flushed keys, update counter; its own crc follows.
_LOG_FIELDS = struct.Struct("<8sIIQqQQIIQ")
LOG_SLOT_BYTES = 128
LOG_SLOTS = 2
# magic, version, key bits, window generations, reserved, window seconds, runs, reserved,
# next run sequence, log sequence.
_MANIFEST_FIELDS = struct.Struct("<8sIIIIdIIQQ")
# sequence, generation, keys, prefix bits, body crc, file bytes, flags, reserved.
_RECORD_FIELDS = struct.Struct("<QqQIIQII")
#: A run record's flags bit 0: the run file was made durable (fsync) before this manifest.
RECORD_DURABLE = 1


class ExactFileError(ValueError):
    """A file of the exact tier that cannot be read as one: the message names it and the problem."""


def prefix_bits(keys: int) -> int:
    """The prefix bits ``t`` of a run of ``keys`` keys: ``2**t`` buckets of 16 to 31 keys on
    average, and at least :data:`MIN_PREFIX_BITS`."""
    return max(MIN_PREFIX_BITS, keys.bit_length() - 1 - BUCKET_SHIFT)


def stream_bytes(keys: int, prefix: int) -> int:
    """Bytes of a run's suffix stream: ``keys`` suffixes of ``64 - prefix`` bits, and the padding."""
    return (keys * (KEY_BITS - prefix) + 7) // 8 + STREAM_PADDING


def index_bytes(prefix: int) -> int:
    """Bytes of a run's prefix index: ``2**prefix + 1`` u64 offsets."""
    return 8 * ((1 << prefix) + 1)


def run_file_bytes(keys: int, prefix: int) -> int:
    """The exact size of a run file."""
    return HEADER_BYTES + index_bytes(prefix) + stream_bytes(keys, prefix)


def run_name(sequence: int) -> str:
    """The file name of run ``sequence`` in the tier's directory."""
    return f"run-{sequence:016x}.run"


def _page(fields: bytes) -> bytes:
    page = fields + bytes(CHECKSUM_OFFSET - len(fields))
    return page + struct.pack("<I", zlib.crc32(page))


def _check_magic_and_version(what: str, magic: bytes, expected: bytes, version: int, path: str) -> None:
    if magic != expected:
        raise ExactFileError(f"{path}: not a crawldedup exact {what} (bad magic {magic!r}, expected {expected!r})")
    if version > FORMAT_VERSION:
        raise ExactFileError(
            f"{path}: format version {version} is newer than this crawldedup reads (up to {FORMAT_VERSION}); "
            "upgrade crawldedup"
        )
    if version < 1:
        raise ExactFileError(f"{path}: unsupported format version {version}")


@dataclasses.dataclass(frozen=True)
class RunHeader:
    """The header page of a run file."""

    keys: int
    prefix: int
    generation: int
    sequence: int
    body_crc: int

    @property
    def file_bytes(self) -> int:
        return run_file_bytes(self.keys, self.prefix)

    def pack(self) -> bytes:
        fields = _RUN_FIELDS.pack(
            RUN_MAGIC,
            FORMAT_VERSION,
            HEADER_BYTES,
            KEY_BITS,
            self.prefix,
            self.keys,
            self.generation,
            self.sequence,
            index_bytes(self.prefix),
            stream_bytes(self.keys, self.prefix),
            self.body_crc,
            0,
        )
        return _page(fields)

    @classmethod
    def unpack(cls, page: bytes, path: str, file_bytes: int) -> RunHeader:
        """Parse and check a run's header page read from ``path`` (a file of ``file_bytes`` bytes).

        :raises ExactFileError: naming ``path`` and the problem.
        """
        if len(page) < HEADER_BYTES:
            raise ExactFileError(f"{path}: truncated run: {counted(len(page), 'byte')}, its header is {HEADER_BYTES}")
        (magic, version, header, key_bits, prefix, keys, generation, sequence, index, stream, crc, reserved) = (
            _RUN_FIELDS.unpack_from(page)
        )
        _check_magic_and_version("run", magic, RUN_MAGIC, version, path)
        _check_page_crc(page, path, "run header")
        checks = [
            (header == HEADER_BYTES, f"header size {header}, expected {HEADER_BYTES}"),
            (key_bits == KEY_BITS, f"key bits {key_bits}, expected {KEY_BITS}"),
            (MIN_PREFIX_BITS <= prefix < KEY_BITS, f"prefix bits {prefix} out of range"),
            (keys >= 1 and prefix == prefix_bits(keys), f"prefix bits {prefix} do not fit {keys} keys"),
            (generation >= TIMELESS, f"generation {generation} is below {TIMELESS}"),
            (index == index_bytes(prefix), f"index size {index} does not fit {prefix} prefix bits"),
            (stream == stream_bytes(keys, prefix), f"stream size {stream} does not fit {keys} keys"),
            (reserved == 0 and not any(page[_RUN_FIELDS.size : CHECKSUM_OFFSET]), "reserved bytes are not zero"),
        ]
        for ok, problem in checks:
            if not ok:
                raise ExactFileError(f"{path}: corrupted run header: {problem}")
        parsed = cls(keys, prefix, generation, sequence, crc)
        if file_bytes != parsed.file_bytes:
            kind = "truncated run" if file_bytes < parsed.file_bytes else "trailing bytes"
            raise ExactFileError(
                f"{path}: {kind}: file is {counted(file_bytes, 'byte')}, the header says {parsed.file_bytes:,}"
            )
        return parsed


def _check_page_crc(page: bytes, path: str, what: str) -> None:
    (stored,) = struct.unpack_from("<I", page, CHECKSUM_OFFSET)
    actual = zlib.crc32(page[:CHECKSUM_OFFSET])
    if stored != actual:
        raise ExactFileError(
            f"{path}: corrupted {what}: checksum {actual:#010x} does not match the stored {stored:#010x}"
        )


@dataclasses.dataclass(frozen=True)
class LogState:
    """One header slot of the log: which keys it holds and how many of them were flushed."""

    sequence: int
    generation: int
    count: int
    crc: int
    flushed: int
    flushed_crc: int
    counter: int

    def pack(self) -> bytes:
        fields = _LOG_FIELDS.pack(
            LOG_MAGIC,
            FORMAT_VERSION,
            0,
            self.sequence,
            self.generation,
            self.count,
            self.flushed,
            self.crc,
            self.flushed_crc,
            self.counter,
        )
        slot = fields + struct.pack("<I", zlib.crc32(fields))
        return slot + bytes(LOG_SLOT_BYTES - len(slot))

    @classmethod
    def unpack(cls, slot: bytes, path: str) -> LogState:
        """Parse one slot; an unwritten or torn slot is an ExactFileError (the caller tries the other)."""
        magic, version, reserved, sequence, generation, count, flushed, crc, flushed_crc, counter = (
            _LOG_FIELDS.unpack_from(slot)
        )
        if magic != LOG_MAGIC and not any(slot):
            raise ExactFileError(f"{path}: empty log header slot")
        _check_magic_and_version("log", magic, LOG_MAGIC, version, path)
        (stored,) = struct.unpack_from("<I", slot, _LOG_FIELDS.size)
        if stored != zlib.crc32(slot[: _LOG_FIELDS.size]):
            raise ExactFileError(f"{path}: corrupted log header slot (checksum)")
        if reserved or flushed > count or generation < TIMELESS:
            raise ExactFileError(f"{path}: corrupted log header slot (fields out of range)")
        return cls(sequence, generation, count, crc, flushed, flushed_crc, counter)


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """A run as the manifest lists it."""

    sequence: int
    generation: int
    keys: int
    prefix: int
    body_crc: int
    durable: bool

    @property
    def name(self) -> str:
        return run_name(self.sequence)


@dataclasses.dataclass(frozen=True)
class Manifest:
    """The runs that make up the set, the log's sequence, and the window it was made for."""

    window_seconds: float
    generations: int
    next_sequence: int
    log_sequence: int
    runs: Tuple[RunRecord, ...]

    def pack(self) -> bytes:
        parts = [
            _MANIFEST_FIELDS.pack(
                MANIFEST_MAGIC,
                FORMAT_VERSION,
                KEY_BITS,
                self.generations,
                0,
                self.window_seconds,
                len(self.runs),
                0,
                self.next_sequence,
                self.log_sequence,
            )
        ]
        for run in self.runs:
            parts.append(
                _RECORD_FIELDS.pack(
                    run.sequence,
                    run.generation,
                    run.keys,
                    run.prefix,
                    run.body_crc,
                    run_file_bytes(run.keys, run.prefix),
                    RECORD_DURABLE if run.durable else 0,
                    0,
                )
            )
        body = b"".join(parts)
        return body + struct.pack("<I", zlib.crc32(body))

    @classmethod
    def unpack(cls, data: bytes, path: str) -> Manifest:
        """Parse and check a manifest read from ``path``.

        :raises ExactFileError: naming ``path`` and the problem.
        """
        if len(data) < 8:
            raise ExactFileError(f"{path}: truncated manifest: {counted(len(data), 'byte')}")
        magic = data[:8]
        if len(data) < _MANIFEST_FIELDS.size + 4:
            if magic != MANIFEST_MAGIC:
                raise ExactFileError(f"{path}: not a crawldedup exact manifest (bad magic {magic!r})")
            raise ExactFileError(f"{path}: truncated manifest: {counted(len(data), 'byte')}")
        (magic, version, key_bits, generations, reserved, window, runs, reserved2, next_sequence, log_sequence) = (
            _MANIFEST_FIELDS.unpack_from(data)
        )
        _check_magic_and_version("manifest", magic, MANIFEST_MAGIC, version, path)
        size = _MANIFEST_FIELDS.size + runs * _RECORD_FIELDS.size + 4
        if len(data) != size:
            raise ExactFileError(
                f"{path}: truncated manifest: {counted(len(data), 'byte')}, it lists {counted(runs, 'run')} in {size:,}"
            )
        (stored,) = struct.unpack_from("<I", data, size - 4)
        actual = zlib.crc32(data[: size - 4])
        if stored != actual:
            raise ExactFileError(
                f"{path}: corrupted manifest: checksum {actual:#010x} does not match the stored {stored:#010x}"
            )
        if key_bits != KEY_BITS or reserved or reserved2 or window < 0 or (window > 0) != (generations > 0):
            raise ExactFileError(f"{path}: corrupted manifest: fields out of range")
        records = []
        for i in range(runs):
            sequence, generation, keys, prefix, crc, file_bytes, flags, spare = _RECORD_FIELDS.unpack_from(
                data, _MANIFEST_FIELDS.size + i * _RECORD_FIELDS.size
            )
            if (
                keys < 1
                or prefix != prefix_bits(keys)
                or file_bytes != run_file_bytes(keys, prefix)
                or sequence >= next_sequence
                or flags & ~RECORD_DURABLE
                or spare
            ):
                raise ExactFileError(f"{path}: corrupted manifest: run record {i} is out of range")
            records.append(RunRecord(sequence, generation, keys, prefix, crc, bool(flags & RECORD_DURABLE)))
        return cls(window, generations, next_sequence, log_sequence, tuple(records))
