"""File format v1 of a Bloom filter: the header page, its fields and the checks made on open.

The layout is documented in ``docs/format.md``; any change to it bumps ``FORMAT_VERSION``.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib

from .._checks import check_capacity, check_error_rate
from .._wording import counted

#: First 8 bytes of every filter file.
MAGIC = b"CDDBLOOM"
FORMAT_VERSION = 1
#: The header is one 4 KiB page, so the blocks that follow are page- and cache-line-aligned.
HEADER_BYTES = 4096
#: One block is one 64-byte cache line: every key sets and tests bits in exactly one block.
BLOCK_BYTES = 64
BLOCK_BITS = BLOCK_BYTES * 8
#: Layout 1: block = (h1 * num_blocks) >> 64; probe i uses the top 9 bits of h2 * PROBE_MULTIPLIER**i.
LAYOUT_BLOCKED_512 = 1
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
# num_blocks, num_hashes, flags, approx_items, metadata_len, reserved, metadata.
_FIELDS = struct.Struct("<8sIIIIIIQdQIIQII1024s")
#: The CRC-32 (zlib) of bytes [0, CHECKSUM_OFFSET) sits in the page's last 4 bytes.
CHECKSUM_OFFSET = HEADER_BYTES - 4
_KNOWN_FLAGS = FLAG_CLEAN

class FilterFileError(ValueError):
    """A file that is not a readable crawldedup filter; the message names the path and the problem."""


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

    @property
    def file_bytes(self) -> int:
        """Exact size of a file with this header: the header page plus the blocks."""
        return HEADER_BYTES + self.num_blocks * BLOCK_BYTES

    def pack(self) -> bytes:
        """Return the 4096-byte header page, checksum included."""
        fields = _FIELDS.pack(
            MAGIC, FORMAT_VERSION, HEADER_BYTES, LAYOUT_BLOCKED_512, HASH_MURMUR3_X64_128,
            HASH_SEED, BLOCK_BYTES, self.capacity, self.error_rate, self.num_blocks,
            self.num_hashes, FLAG_CLEAN if self.clean else 0, min(self.approx_items, MAX_APPROX_ITEMS),
            len(self.metadata), 0, self.metadata,
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
        (magic, version, header_bytes, layout_id, hash_id, seed, block_bytes, capacity, error_rate,
         num_blocks, num_hashes, flags, approx_items, metadata_len, reserved, metadata
         ) = _FIELDS.unpack_from(page)
        if magic != MAGIC:
            raise bad(f"not a crawldedup filter (bad magic {magic!r}, expected {MAGIC!r})")
        if version > FORMAT_VERSION:
            raise bad(f"format version {version} is newer than this crawldedup reads "
                      f"(up to {FORMAT_VERSION}); upgrade crawldedup")
        if version != FORMAT_VERSION:
            raise bad(f"unsupported format version {version}, expected {FORMAT_VERSION}")
        (stored_crc,) = struct.unpack_from("<I", page, CHECKSUM_OFFSET)
        actual_crc = zlib.crc32(page[:CHECKSUM_OFFSET])
        if stored_crc != actual_crc:
            raise bad(f"corrupted header: checksum {actual_crc:#010x} does not match the stored {stored_crc:#010x}")
        expected = {
            "header size": (header_bytes, HEADER_BYTES), "layout id": (layout_id, LAYOUT_BLOCKED_512),
            "hash id": (hash_id, HASH_MURMUR3_X64_128), "hash seed": (seed, HASH_SEED),
            "block size": (block_bytes, BLOCK_BYTES), "reserved field": (reserved, 0),
        }
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
            (metadata_len <= MAX_METADATA_BYTES, f"metadata length must be <= {MAX_METADATA_BYTES}, got {metadata_len}"),
            (not any(metadata[metadata_len:]) and not any(page[_FIELDS.size:CHECKSUM_OFFSET]),
             "reserved header bytes are not zero"),
        ]
        for ok, problem in checks:
            if not ok:
                raise bad(f"corrupted header: {problem}")
        header = cls(capacity, error_rate, num_blocks, num_hashes, metadata[:metadata_len],
                     approx_items, bool(flags & FLAG_CLEAN))
        if file_bytes != header.file_bytes:
            kind = "truncated bits" if file_bytes < header.file_bytes else "trailing bytes"
            raise bad(f"{kind}: file is {counted(file_bytes, 'byte')}, the header says {header.file_bytes:,}")
        return header


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
