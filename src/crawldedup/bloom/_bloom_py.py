"""The pure-Python twin of the local Bloom filter: the typed reference (mmh3 + numpy).

``_bloom_c.CBloomFilter`` implements the same layout in Cython and writes the same bytes; the
selector (:mod:`crawldedup.bloom`) chooses between them. The file format is described in
``docs/format.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional, cast

import numpy as np

from ..fingerprints import hash_one, multiply_shift
from ._base import FilterBase, as_hash_array, closed_error, read_only_error
from .format import BLOCK_BITS, BLOCK_BYTES, PROBE_MULTIPLIER, PROBE_SHIFT
from .storage import BloomFile

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["PyBloomFilter", "windowed_add", "windowed_contains"]

_MASK64 = (1 << 64) - 1
#: The Python batch paths work through 2,048 keys at a time, so that their scratch arrays stay
#: in cache and under glibc's 128 KiB mmap threshold: bigger ones are mapped and unmapped, a
#: page fault per 4 KiB, until the allocator adapts. Batches of 10,000 new keys, first rounds,
#: ns a key: add_many ~270 at 2,048 and ~430 at 4,096 (~205 once the allocator has adapted);
#: add_hashes measured 540 at 65,536.
_CHUNK = 1 << 11
#: Probe indices inside a chunk (< 2,048 x 64) packed under the bit number in one uint64;
#: bit numbers need at most 41 bits (MAX_NUM_BLOCKS x 512).
_INDEX_BITS = 22
_INDEX_MASK = (1 << _INDEX_BITS) - 1


def _set_bits(bits: np.ndarray, bit_numbers: np.ndarray) -> None:
    """Set the given (distinct) bit numbers of the byte array ``bits``.

    ``bits[i] |= m`` with repeated byte indices keeps only one of their writes, so the bits a
    lost write carried are set again in the next round (two or three rounds; a byte gets at
    most 8 bits). ``np.bitwise_or.at`` does it in one pass, but slower: 79 against 58 ns a key
    (median, all 7 probes of 4,096 keys, reference VM).
    """
    offsets = bit_numbers >> 3
    masks = np.left_shift(1, bit_numbers & 7).astype(np.uint8)
    while len(offsets):
        bits[offsets] |= masks
        lost = (bits[offsets] & masks) == 0
        offsets, masks = offsets[lost], masks[lost]


def _first_occurrences(values: np.ndarray) -> np.ndarray:
    """Return a mask of the elements whose value does not occur earlier in ``values``.

    Sorting all of them costs ~50 ns an element here, so only those sharing a hash slot
    (~12% with 4 to 8 slots per element) are sorted, by (value, index) packed into a uint64.
    """
    slot_count = 1 << max(10, (4 * len(values)).bit_length())
    slots = values & (slot_count - 1)
    crowded = np.flatnonzero(np.bincount(slots, minlength=slot_count)[slots] > 1)
    first = np.ones(len(values), dtype=bool)
    ordered = np.sort((values[crowded].astype(np.uint64) << np.uint64(_INDEX_BITS)) | crowded.astype(np.uint64))
    value_of = ordered >> np.uint64(_INDEX_BITS)
    repeated = (ordered[1:] & np.uint64(_INDEX_MASK)).astype(np.int64)[value_of[1:] == value_of[:-1]]
    first[repeated] = False
    return first


def probe_bits(hashes: np.ndarray, num_blocks: int, num_hashes: int, slots: int = 1, slot: int = 0) -> np.ndarray:
    """Return the ``(n, k)`` bit numbers (from the first block's first bit) probed by each key
    in ``slot`` of its super-block (a plain filter: ``slots = 1``, ``slot = 0``)."""
    blocks = multiply_shift(hashes[:, 0], num_blocks) * np.uint64(slots) + np.uint64(slot)
    first_bit = (blocks * np.uint64(BLOCK_BITS)).astype(np.int64)
    x = hashes[:, 1].copy()
    bit_numbers = np.empty((len(hashes), num_hashes), dtype=np.int64)
    for probe in range(num_hashes):
        x *= np.uint64(PROBE_MULTIPLIER)  # wraps modulo 2**64, like the C
        bit_numbers[:, probe] = first_bit + (x >> np.uint64(PROBE_SHIFT)).astype(np.int64)
    return bit_numbers


def _all_set(bits: np.ndarray, bit_numbers: np.ndarray) -> np.ndarray:
    """Per row of ``bit_numbers``, whether all its bits are set."""
    masks = np.left_shift(1, bit_numbers & 7).astype(np.uint8)
    all_set: np.ndarray = ((bits[bit_numbers >> 3] & masks) != 0).all(axis=1)
    return all_set


def _add_bits(bits: np.ndarray, bit_numbers: np.ndarray, num_hashes: int) -> np.ndarray:
    """Set the ``(n, k)`` bits of up to ``_CHUNK`` keys, in order; True where the key was new."""
    bit_numbers = bit_numbers.ravel()
    clear = np.flatnonzero((bits[bit_numbers >> 3] >> (bit_numbers & 7).astype(np.uint8) & 1) == 0)
    clear_bits = bit_numbers[clear]
    first = _first_occurrences(clear_bits)
    # One key after the other: a key is new when one of its probes is the first to set a bit.
    new = np.zeros(len(bit_numbers) // num_hashes, dtype=bool)
    new[clear[first] // num_hashes] = True
    _set_bits(bits, clear_bits[first])
    return new


def _slots_of(mask: int) -> list[int]:
    return [slot for slot in range(mask.bit_length()) if mask >> slot & 1]


def _contains_in_slots(
    bits: np.ndarray, num_blocks: int, num_hashes: int, slots: int, live: int, hashes: np.ndarray
) -> np.ndarray:
    found = np.zeros(len(hashes), dtype=bool)
    for slot in _slots_of(live):
        rest = np.flatnonzero(~found)
        found[rest] = _all_set(bits, probe_bits(hashes[rest], num_blocks, num_hashes, slots, slot))
    return found


def windowed_contains(
    bits: np.ndarray, num_blocks: int, num_hashes: int, slots: int, live: int, hashes: np.ndarray
) -> np.ndarray:
    """Per key of ``hashes`` (``(n, 2)`` uint64), whether one of the slots in the bit mask
    ``live`` holds it: the lookup of a windowed filter (:mod:`.windowed`)."""
    found = np.empty(len(hashes), dtype=bool)
    for start in range(0, len(hashes), _CHUNK):
        found[start : start + _CHUNK] = _contains_in_slots(
            bits, num_blocks, num_hashes, slots, live, hashes[start : start + _CHUNK]
        )
    return found


def windowed_add(
    bits: np.ndarray, num_blocks: int, num_hashes: int, slots: int, older: int, current: int, hashes: np.ndarray
) -> np.ndarray:
    """Add, in order, the keys of ``hashes`` that none of the slots in the mask ``older`` holds
    to slot ``current``; True where the key was new (in none of them before)."""
    new = np.zeros(len(hashes), dtype=bool)
    for start in range(0, len(hashes), _CHUNK):
        chunk = hashes[start : start + _CHUNK]
        rows = np.flatnonzero(~_contains_in_slots(bits, num_blocks, num_hashes, slots, older, chunk))
        if len(rows):
            bit_numbers = probe_bits(chunk[rows], num_blocks, num_hashes, slots, current)
            new[start + rows] = _add_bits(bits, bit_numbers, num_hashes)
    return new


class PyBloomFilter(FilterBase):
    """A Bloom filter of ``str`` or bytes-like keys, stored in a memory-mapped file.

    Each key is hashed once (MurmurHash3 x64-128); ``h1`` picks one 64-byte block and ``h2``
    the ``num_hashes`` bits inside it, so a key touches one cache line. The filter is sized
    from the exact false-positive rate of that layout (see ``docs/format.md``).

    :param capacity: number of keys the filter is sized for (>= 1).
    :param error_rate: false-positive rate wanted at ``capacity`` keys, in [1e-20, 1).
    :param path: file to create; anonymous memory when None.
    :param overwrite: replace an existing file at ``path`` instead of raising.
    :param metadata: up to 1024 bytes stored in the header for the layers above.
    :raises TypeError: for arguments of the wrong type.
    :raises ValueError: for values out of range.
    :raises FileExistsError: when ``path`` exists and ``overwrite`` is false.

    Methods raise ``ValueError`` once the filter is closed, ``io.UnsupportedOperation`` for
    writes to a filter opened read-only, and ``TypeError`` for keys of other types.
    Threads may share a filter: batch calls lock it while they probe.
    """

    _bytes: Optional[memoryview]
    _bits: Optional[np.ndarray]

    def _map_bits(self, file: BloomFile) -> None:
        self._bits = file.blocks()
        # numpy's stubs declare ndarray.__buffer__ only for Python >= 3.12.
        self._bytes = memoryview(cast("Buffer", self._bits))
        self._num_blocks = file.header.num_blocks
        self._num_hashes = file.header.num_hashes

    def _unmap_bits(self) -> None:
        if self._bytes is not None:
            self._bytes.release()
        self._bits = self._bytes = None

    def _probes(self, h1: int, h2: int) -> Iterable[tuple[int, int]]:
        """Yield ``(byte offset, bit mask)`` of each probe of one key, with Python ints."""
        base = ((h1 * self._num_blocks) >> 64) * BLOCK_BYTES
        x = h2
        for _ in range(self._num_hashes):
            x = (x * PROBE_MULTIPLIER) & _MASK64
            bit = x >> PROBE_SHIFT
            yield base + (bit >> 3), 1 << (bit & 7)

    def add(self, item: Any) -> bool:
        """Add one key; return True when it was new (not already, probably, in the filter).

        This is the polarity of RedisBloom's ``BF.ADD`` and of ``SET NX``, so a caller tests
        and sets in one call; pybloomfiltermmap3's ``add`` returns the opposite.

        :raises TypeError: when ``item`` is neither ``str`` nor bytes-like.
        :raises io.UnsupportedOperation: when the filter is read-only.
        :raises ValueError: when the filter is closed.
        """
        h1, h2 = hash_one(item)
        with self._lock:
            bits = self._writable_bytes()
            new = False
            for offset, mask in self._probes(h1, h2):
                if not bits[offset] & mask:
                    bits[offset] |= mask
                    new = True
            self._count += new
        return new

    def __contains__(self, item: Any) -> bool:
        """Return True when ``item`` is probably in the filter, False when it certainly is not.

        :raises TypeError: when ``item`` is neither ``str`` nor bytes-like.
        :raises ValueError: when the filter is closed.
        """
        h1, h2 = hash_one(item)
        bits = self._bytes
        if bits is None:
            raise closed_error()
        return all(bits[offset] & mask for offset, mask in self._probes(h1, h2))

    def add_hashes(self, hashes: Any) -> np.ndarray:
        """Like ``add_many`` for keys already hashed by ``hash_many`` (an ``(n, 2)`` uint64 array).

        :raises TypeError: for another dtype.
        :raises ValueError: for another shape, or when the filter is closed.
        :raises io.UnsupportedOperation: when the filter is read-only.
        """
        hashes = as_hash_array(hashes)
        with self._exclusive() as file, file.bulk(len(hashes)):
            bits = self._writable_array()
            new = np.concatenate(
                [self._add_chunk(bits, hashes[start : start + _CHUNK]) for start in range(0, len(hashes), _CHUNK)]
                or [np.zeros(0, bool)]
            )
            self._count += int(new.sum())
        return new

    def _add_chunk(self, bits: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """Set the bits of up to ``_CHUNK`` keys; True where the key was new when added."""
        return _add_bits(bits, probe_bits(hashes, self._num_blocks, self._num_hashes), self._num_hashes)

    def contains_hashes(self, hashes: Any) -> np.ndarray:
        """Like ``contains_many`` for keys already hashed by ``hash_many``.

        :raises TypeError: for another dtype.
        :raises ValueError: for another shape, or when the filter is closed.
        """
        hashes = as_hash_array(hashes)
        found = np.empty(len(hashes), dtype=bool)
        with self._exclusive():
            assert self._bits is not None
            for start in range(0, len(hashes), _CHUNK):
                bit_numbers = probe_bits(hashes[start : start + _CHUNK], self._num_blocks, self._num_hashes)
                found[start : start + _CHUNK] = _all_set(self._bits, bit_numbers)
        return found

    def _writable_bytes(self) -> memoryview:
        if self._bytes is None or self._file is None:
            raise closed_error()
        if self._bytes.readonly:
            raise read_only_error()
        if self._file.writers is not None:
            self._file.writers.check_writable()
        return self._bytes

    def _writable_array(self) -> np.ndarray:
        self._writable_bytes()
        assert self._bits is not None
        return self._bits
