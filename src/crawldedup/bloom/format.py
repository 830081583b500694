"""File formats v1 (plain), v2 (windowed) and v3 (grown) of a Bloom filter: the header page,
its fields and the checks made on open.

The layout is documented in ``docs/format.md``; any change to it bumps ``FORMAT_VERSION``. A
plain filter is still written as v1, byte for byte as before v2 existed; a windowed filter
(generations in slots, see :mod:`.windowed`) as v2; and either kind, once it has grown past
its capacity into stage files (:mod:`.growing`), as v3, whose header counts the stages.
"""

from __future__ import annotations

import dataclasses
import math
import struct
import zlib
from typing import Any, Dict, List, Tuple

from .._checks import check_capacity, check_error_rate
from .._wording import counted
from ..windows import MAX_GENERATIONS

#: First 8 bytes of every filter file.
MAGIC = b"CDDBLOOM"
#: The newest version this crawldedup reads and writes: a grown filter (plain or windowed).
FORMAT_VERSION = 3
#: An ungrown plain filter is written as v1, an ungrown windowed one as v2.
PLAIN_FORMAT_VERSION = 1
WINDOWED_FORMAT_VERSION = 2
#: A grown filter has at most this many stage files besides its first (the base file).
MAX_STAGES = 64
#: The header is one 4 KiB page, so the blocks that follow are page- and cache-line-aligned.
HEADER_BYTES = 4096
#: One block is one 64-byte cache line: every key sets and tests bits in exactly one block.
BLOCK_BYTES = 64
BLOCK_BITS = BLOCK_BYTES * 8
#: Layout 1: block = (h1 * num_blocks) >> 64; probe i uses the top 9 bits of h2 * PROBE_MULTIPLIER**i.
LAYOUT_BLOCKED_512 = 1
#: Layout 2 (v2): super-block = (h1 * num_blocks) >> 64 holds one 64-byte block per slot,
#: side by side; slot s of super-block b is block b * slots + s. Probes as in layout 1.
LAYOUT_WINDOWED_512 = 2
#: Hash 1: MurmurHash3 x64-128 of the key's UTF-8 (str) or raw (bytes-like) bytes.
HASH_MURMUR3_X64_128 = 1
HASH_SEED = 0
#: Odd 64-bit constant (2**64 / golden ratio): multiplying by it re-mixes h2 for each probe.
PROBE_MULTIPLIER = 0x9E3779B97F4A7C15
#: 64 - log2(BLOCK_BITS): the top 9 bits of a 64-bit word index a bit in the block.
PROBE_SHIFT = 55
#: The multiply-shift block choice is exact with 32-bit halves up to this many blocks (256 GiB).
MAX_NUM_BLOCKS = 2**32 - 1
MAX_NUM_HASHES = 64
MAX_METADATA_BYTES = 1024
#: approx_items saturates here: the compiled filter counts in a signed 64-bit integer, and
#: opening at 2**62 leaves room for more adds than a process can make before it overflows.
MAX_APPROX_ITEMS = 2**62
#: flags bit 0: the last writer closed the file cleanly, so approx_items is up to date.
FLAG_CLEAN = 1

# magic, version, header_bytes, layout_id, hash_id, seed, block_bytes, capacity, error_rate,
# num_blocks, num_hashes, flags, approx_items, metadata_len, stages (reserved: 0 before v3), metadata.
_FIELDS = struct.Struct("<8sIIIIIIQdQIIQII1024s")
#: The stage count (v3; reserved before), at byte 76, read alone by :meth:`BloomFile.stored_stages`.
STAGES_FIELD = struct.Struct("<76xI")
#: The CRC-32 (zlib) of bytes [0, CHECKSUM_OFFSET) sits in the page's last 4 bytes.
CHECKSUM_OFFSET = HEADER_BYTES - 4
_KNOWN_FLAGS = FLAG_CLEAN
#: v2 only, right after the v1 fields: window seconds, generations, slots; then per slot the
#: generation it holds (NO_GENERATION when empty) and its approx_items.
_WINDOW_FIELDS = struct.Struct("<dII")
_SLOT_FIELDS = struct.Struct("<qQ")
NO_GENERATION = -1


class FilterFileError(ValueError):
    """A file that is not a readable crawldedup filter; the message names the path and the problem."""


class FilterKindError(FilterFileError):
    """A valid filter file of the other kind: windowed where a plain filter was opened, or plain
    where a windowed one was."""


@dataclasses.dataclass(frozen=True)
class Header:
    """The parameters and state stored in a filter's header page."""

    capacity: int
    error_rate: float
    num_blocks: int
    num_hashes: int
    metadata: bytes = b""
    approx_items: int = 0
    clean: bool = True
    #: Windowed filters (v2) only: the window W in seconds and its generations G (0: plain).
    window_seconds: float = 0.0
    generations: int = 0
    #: Per slot (G + 1 of them), the generation it holds (NO_GENERATION: empty) and its count.
    slot_generations: Tuple[int, ...] = ()
    slot_items: Tuple[int, ...] = ()
    #: Grown filters (v3) only: how many stage files follow this one (0: not grown).
    stages: int = 0

    @property
    def windowed(self) -> bool:
        """True for a windowed filter (format v2)."""
        return self.generations > 0

    @property
    def slots(self) -> int:
        """Blocks per super-block: G + 1 for a windowed filter, 1 for a plain one."""
        return len(self.slot_generations) if self.windowed else 1

    @property
    def file_bytes(self) -> int:
        """Exact size of a file with this header: the header page plus the blocks."""
        return HEADER_BYTES + self.num_blocks * self.slots * BLOCK_BYTES

    @property
    def version(self) -> int:
        """The format version this header is written as."""
        if self.stages:
            return FORMAT_VERSION
        return WINDOWED_FORMAT_VERSION if self.windowed else PLAIN_FORMAT_VERSION

    def pack(self) -> bytes:
        """Return the 4096-byte header page, checksum included."""
        layout = LAYOUT_WINDOWED_512 if self.windowed else LAYOUT_BLOCKED_512
        fields = _FIELDS.pack(
            MAGIC,
            self.version,
            HEADER_BYTES,
            layout,
            HASH_MURMUR3_X64_128,
            HASH_SEED,
            BLOCK_BYTES,
            self.capacity,
            self.error_rate,
            self.num_blocks,
            self.num_hashes,
            FLAG_CLEAN if self.clean else 0,
            min(self.approx_items, MAX_APPROX_ITEMS),
            len(self.metadata),
            self.stages,
            self.metadata,
        )
        if self.windowed:
            fields += _WINDOW_FIELDS.pack(self.window_seconds, self.generations, self.slots)
            fields += b"".join(
                _SLOT_FIELDS.pack(generation, min(items, MAX_APPROX_ITEMS))
                for generation, items in zip(self.slot_generations, self.slot_items)
            )
        page = fields + bytes(CHECKSUM_OFFSET - len(fields))
        return page + struct.pack("<I", zlib.crc32(page))

    @classmethod
    def unpack(cls, page: bytes, path: str, file_bytes: int) -> Header:
        """Parse and check a header page read from ``path`` (a file of ``file_bytes`` bytes).

        :raises FilterFileError: for every check that fails, naming ``path`` and the problem.
        """

        def bad(problem: str) -> FilterFileError:
            return FilterFileError(f"{path}: {problem}")

        if file_bytes == 0:
            raise bad("empty file, not a crawldedup filter")
        if len(page) < HEADER_BYTES:
            if not page.startswith(MAGIC[: len(page)]):
                raise bad(f"not a crawldedup filter (bad magic {page[:8]!r})")
            raise bad(f"truncated header: {counted(len(page), 'byte')}, a header is {HEADER_BYTES}")
        (
            magic,
            version,
            header_bytes,
            layout_id,
            hash_id,
            seed,
            block_bytes,
            capacity,
            error_rate,
            num_blocks,
            num_hashes,
            flags,
            approx_items,
            metadata_len,
            stages,
            metadata,
        ) = _FIELDS.unpack_from(page)
        if magic != MAGIC:
            raise bad(f"not a crawldedup filter (bad magic {magic!r}, expected {MAGIC!r})")
        if version > FORMAT_VERSION:
            raise bad(
                f"format version {version} is newer than this crawldedup reads "
                f"(up to {FORMAT_VERSION}); upgrade crawldedup"
            )
        if version < PLAIN_FORMAT_VERSION:
            raise bad(f"unsupported format version {version}, expected {PLAIN_FORMAT_VERSION} to {FORMAT_VERSION}")
        (stored_crc,) = struct.unpack_from("<I", page, CHECKSUM_OFFSET)
        actual_crc = zlib.crc32(page[:CHECKSUM_OFFSET])
        if stored_crc != actual_crc:
            raise bad(f"corrupted header: checksum {actual_crc:#010x} does not match the stored {stored_crc:#010x}")
        # v3 keeps the layout id of the kind that grew: 1 plain, 2 windowed.
        windowed = version == WINDOWED_FORMAT_VERSION or (
            version == FORMAT_VERSION and layout_id == LAYOUT_WINDOWED_512
        )
        expected = {
            "header size": (header_bytes, HEADER_BYTES),
            "layout id": (layout_id, LAYOUT_WINDOWED_512 if windowed else LAYOUT_BLOCKED_512),
            "hash id": (hash_id, HASH_MURMUR3_X64_128),
            "hash seed": (seed, HASH_SEED),
            "block size": (block_bytes, BLOCK_BYTES),
        }
        if version < FORMAT_VERSION:
            expected["reserved field"] = (stages, 0)
        for name, (got, want) in expected.items():
            if got != want:
                raise bad(f"unsupported {name} {got}, expected {want}")
        checks = [
            (capacity >= 1, f"capacity must be >= 1, got {capacity}"),
            (0.0 < error_rate < 1.0, f"error_rate must be in (0, 1), got {error_rate!r}"),
            (1 <= num_blocks <= MAX_NUM_BLOCKS, f"num_blocks must be in [1, {MAX_NUM_BLOCKS}], got {num_blocks}"),
            (1 <= num_hashes <= MAX_NUM_HASHES, f"num_hashes must be in [1, {MAX_NUM_HASHES}], got {num_hashes}"),
            (flags & ~_KNOWN_FLAGS == 0, f"unknown flags {flags:#x}"),
            (approx_items <= MAX_APPROX_ITEMS, f"approx_items must be <= {MAX_APPROX_ITEMS}, got {approx_items}"),
            (
                metadata_len <= MAX_METADATA_BYTES,
                f"metadata length must be <= {MAX_METADATA_BYTES}, got {metadata_len}",
            ),
            (
                version < FORMAT_VERSION or 1 <= stages <= MAX_STAGES,
                f"stages must be in [1, {MAX_STAGES}], got {stages}",
            ),
        ]
        window: Dict[str, Any] = {}
        used = _FIELDS.size
        if windowed:
            window, used, window_checks = _unpack_window(page)
            checks += window_checks
        checks.append(
            (
                not any(metadata[metadata_len:]) and not any(page[used:CHECKSUM_OFFSET]),
                "reserved header bytes are not zero",
            )
        )
        for ok, problem in checks:
            if not ok:
                raise bad(f"corrupted header: {problem}")
        header = cls(
            capacity,
            error_rate,
            num_blocks,
            num_hashes,
            metadata[:metadata_len],
            approx_items,
            bool(flags & FLAG_CLEAN),
            stages=stages,
            **window,
        )
        if file_bytes != header.file_bytes:
            kind = "truncated bits" if file_bytes < header.file_bytes else "trailing bytes"
            raise bad(f"{kind}: file is {counted(file_bytes, 'byte')}, the header says {header.file_bytes:,}")
        return header


def _unpack_window(page: bytes) -> Tuple[Dict[str, Any], int, List[Tuple[bool, str]]]:
    """The window fields of a v2 header: the Header fields, the bytes used, and their checks."""
    window_seconds, generations, slots = _WINDOW_FIELDS.unpack_from(page, _FIELDS.size)
    checks = [
        (math.isfinite(window_seconds) and window_seconds > 0, f"window must be > 0 seconds, got {window_seconds!r}"),
        (1 <= generations <= MAX_GENERATIONS, f"generations must be in [1, {MAX_GENERATIONS}], got {generations}"),
        (slots == generations + 1, f"slots must be generations + 1 = {generations + 1}, got {slots}"),
    ]
    if not all(ok for ok, _ in checks):
        return {}, _FIELDS.size + _WINDOW_FIELDS.size, checks
    start = _FIELDS.size + _WINDOW_FIELDS.size
    rows = [_SLOT_FIELDS.unpack_from(page, start + i * _SLOT_FIELDS.size) for i in range(slots)]
    checks += [
        (all(generation >= NO_GENERATION for generation, _ in rows), "a slot's generation is below -1"),
        (all(items <= MAX_APPROX_ITEMS for _, items in rows), f"a slot's approx_items is above {MAX_APPROX_ITEMS}"),
    ]
    fields = {
        "window_seconds": window_seconds,
        "generations": generations,
        "slot_generations": tuple(g for g, _ in rows),
        "slot_items": tuple(n for _, n in rows),
    }
    return fields, start + slots * _SLOT_FIELDS.size, checks


def check_parameters(capacity: int, error_rate: float, metadata: bytes) -> None:
    """Validate the arguments of a new filter.

    :raises TypeError: for arguments of the wrong type.
    :raises ValueError: for values out of range.
    """
    check_capacity(capacity)
    check_error_rate(error_rate)
    if not isinstance(metadata, bytes):
        raise TypeError(f"metadata must be bytes, got {type(metadata).__name__}")
    if len(metadata) > MAX_METADATA_BYTES:
        raise ValueError(f"metadata must be at most {MAX_METADATA_BYTES} bytes, got {len(metadata)}")
