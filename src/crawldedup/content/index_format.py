"""File format v1 of a near-duplicate index: the header page, its fields and the checks made on open.

The layout is documented in ``docs/content.md`` ("The index file"); any change to it bumps
``INDEX_FORMAT_VERSION``.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib

#: First 8 bytes of every index file.
INDEX_MAGIC = b"CDDSIMIX"
INDEX_FORMAT_VERSION = 1
#: One 4 KiB page, so the tables that follow are page-aligned.
INDEX_HEADER_BYTES = 4096
#: Each table holds one uint64 (the rotated fingerprint) and one uint32 (its id) per entry.
ENTRY_BYTES = 12
#: Ids are uint32 positions: an index holds at most this many fingerprints.
MAX_FINGERPRINTS = 2**32 - 1
#: Blocks of 64 / (k + 1) bits: past k = 7 a block is 8 bits and every query reads 1/256 of
#: each table, little better than a scan.
MAX_DISTANCE = 7

# magic, version, header_bytes, fingerprint_bits, max_distance, num_tables, reserved, count,
# policy digest (16 ASCII hex characters), CRC-32 of the data.
_FIELDS = struct.Struct("<8sIIIIIIQ16sI")
_CHECKSUM_OFFSET = INDEX_HEADER_BYTES - 4


class IndexFileError(ValueError):
    """A file that is not a readable near-duplicate index; the message names the path and the problem."""


@dataclasses.dataclass(frozen=True)
class IndexHeader:
    """The parameters stored in an index file's header page."""

    max_distance: int
    count: int
    policy_digest: str
    data_crc: int = 0

    @property
    def num_tables(self) -> int:
        return self.max_distance + 1

    @property
    def file_bytes(self) -> int:
        """Exact size of a file with this header: the header page plus the tables."""
        return INDEX_HEADER_BYTES + self.num_tables * self.count * ENTRY_BYTES

    def pack(self) -> bytes:
        """Return the 4096-byte header page, checksum included."""
        fields = _FIELDS.pack(
            INDEX_MAGIC,
            INDEX_FORMAT_VERSION,
            INDEX_HEADER_BYTES,
            64,
            self.max_distance,
            self.num_tables,
            0,
            self.count,
            self.policy_digest.encode("ascii"),
            self.data_crc,
        )
        page = fields + bytes(_CHECKSUM_OFFSET - len(fields))
        return page + struct.pack("<I", zlib.crc32(page))

    @classmethod
    def unpack(cls, page: bytes, path: str, file_bytes: int) -> IndexHeader:
        """Parse and check a header page read from ``path`` (a file of ``file_bytes`` bytes).

        :raises IndexFileError: for every check that fails, naming ``path`` and the problem.
        """

        def bad(problem: str) -> IndexFileError:
            return IndexFileError(f"{path}: {problem}")

        if file_bytes == 0:
            raise bad("empty file, not a crawldedup near-duplicate index")
        if len(page) < INDEX_HEADER_BYTES:
            if not page.startswith(INDEX_MAGIC[: len(page)]):
                raise bad(f"not a crawldedup near-duplicate index (bad magic {page[:8]!r})")
            raise bad(f"truncated header: {len(page)} bytes, a header is {INDEX_HEADER_BYTES}")
        (magic, version, header_bytes, bits, max_distance, num_tables, reserved, count, digest, data_crc) = (
            _FIELDS.unpack_from(page)
        )
        if magic != INDEX_MAGIC:
            raise bad(f"not a crawldedup near-duplicate index (bad magic {magic!r}, expected {INDEX_MAGIC!r})")
        if version > INDEX_FORMAT_VERSION:
            raise bad(
                f"format version {version} is newer than this crawldedup reads "
                f"(up to {INDEX_FORMAT_VERSION}); upgrade crawldedup"
            )
        if version != INDEX_FORMAT_VERSION:
            raise bad(f"unsupported format version {version}, expected {INDEX_FORMAT_VERSION}")
        (stored_crc,) = struct.unpack_from("<I", page, _CHECKSUM_OFFSET)
        actual_crc = zlib.crc32(page[:_CHECKSUM_OFFSET])
        if stored_crc != actual_crc:
            raise bad(f"corrupted header: checksum {actual_crc:#010x} does not match the stored {stored_crc:#010x}")
        checks = [
            (header_bytes == INDEX_HEADER_BYTES, f"header size {header_bytes}, expected {INDEX_HEADER_BYTES}"),
            (bits == 64, f"fingerprint bits {bits}, expected 64"),
            (0 <= max_distance <= MAX_DISTANCE, f"max_distance must be in [0, {MAX_DISTANCE}], got {max_distance}"),
            (
                num_tables == max_distance + 1,
                f"{num_tables} tables, max_distance {max_distance} needs {max_distance + 1}",
            ),
            (count <= MAX_FINGERPRINTS, f"count must be <= {MAX_FINGERPRINTS}, got {count}"),
            (reserved == 0 and not any(page[_FIELDS.size : _CHECKSUM_OFFSET]), "reserved header bytes are not zero"),
            (all(48 <= c <= 57 or 97 <= c <= 102 for c in digest), f"policy digest {digest!r} is not 16 hex digits"),
        ]
        for ok, problem in checks:
            if not ok:
                raise bad(f"corrupted header: {problem}")
        header = cls(max_distance, count, digest.decode("ascii"), data_crc)
        if file_bytes != header.file_bytes:
            kind = "truncated tables" if file_bytes < header.file_bytes else "trailing bytes"
            raise bad(f"{kind}: file is {file_bytes} bytes, the header says {header.file_bytes}")
        return header
