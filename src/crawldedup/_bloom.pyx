# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True, embedsignature=True
"""CBloomFilter: the compiled twin of crawldedup.bloom.PyBloomFilter (same layout, same bytes).

Keys are hashed in C (MurmurHash3 x64-128, ``_murmur3.h``); batch calls collect pointers to
the keys' bytes, then hash and probe with the GIL released, prefetching blocks ahead of use.
Bits are set with an atomic OR, so processes sharing a file never lose one.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t

import numpy as np

from . import _format
from ._filterbase import FilterBase, as_hash_array, closed_error, read_only_error
from ._hash import key_bytes


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL
    bint PyUnicode_Check(object o)


cdef extern from "_murmur3.h" nogil:
    void cdd_murmur3_x64_128(const void* key, size_t length, uint32_t seed, uint64_t* out)


cdef extern from "_bloom_portable.h" nogil:
    uint8_t cdd_atomic_or_u8(uint8_t* p, uint8_t mask)
    void cdd_prefetch_read(const void* p)
    void cdd_prefetch_write(const void* p)
    uint64_t cdd_mulhi_u64_u32(uint64_t h, uint64_t n)


# The layout's constants come from _format, the one place that defines them.
cdef uint32_t HASH_SEED = _format.HASH_SEED
cdef uint64_t PROBE_MULTIPLIER = _format.PROBE_MULTIPLIER
cdef unsigned PROBE_SHIFT = _format.PROBE_SHIFT
cdef Py_ssize_t HEADER_BYTES = _format.HEADER_BYTES
cdef uint64_t BLOCK_BYTES = _format.BLOCK_BYTES

# Blocks are prefetched this many keys ahead: 16 keys of probing (~15 ns each when the line is
# in cache) cover one DRAM miss (~185-500 ns on the reference VM, PEERS.md).
cdef enum:
    PREFETCH_AHEAD = 16


cdef struct KeyBytes:
    const char* data
    Py_ssize_t size


cdef object key_view(object item, KeyBytes* out):
    """Point ``out`` at ``item``'s bytes; return the object that keeps them alive."""
    if PyUnicode_Check(item):
        out.data = PyUnicode_AsUTF8AndSize(item, &out.size)  # no copy for ASCII str
        return item
    if PyBytes_Check(item):
        out.data = PyBytes_AS_STRING(item)
        out.size = PyBytes_GET_SIZE(item)
        return item
    owner = key_bytes(item)  # other bytes-like: one copy; anything else: TypeError
    out.data = PyBytes_AS_STRING(owner)
    out.size = PyBytes_GET_SIZE(owner)
    return owner


cdef class _KeyBatch:
    """Pointers to the bytes of a batch of keys, valid while this object holds the keys."""

    cdef KeyBytes* keys
    cdef Py_ssize_t count
    cdef list owners

    def __cinit__(self, items):
        cdef Py_ssize_t i
        # A private list: another thread cannot free the keys while the GIL is released.
        self.owners = list(items)
        self.count = len(self.owners)
        self.keys = <KeyBytes*>PyMem_Malloc(max(self.count, 1) * sizeof(KeyBytes))
        if self.keys == NULL:
            raise MemoryError()
        for i in range(self.count):
            self.owners[i] = key_view(self.owners[i], &self.keys[i])

    def __dealloc__(self):
        PyMem_Free(self.keys)

    cdef void hash_into(self, uint64_t* hashes) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(self.count):
            cdd_murmur3_x64_128(self.keys[i].data, <size_t>self.keys[i].size, HASH_SEED, hashes + 2 * i)


cdef inline uint8_t* block_of(uint8_t* bits, uint64_t h1, uint64_t num_blocks) noexcept nogil:
    return bits + cdd_mulhi_u64_u32(h1, num_blocks) * BLOCK_BYTES


cdef inline bint block_contains(const uint8_t* block, uint64_t h2, int num_hashes) noexcept nogil:
    cdef uint64_t x = h2
    cdef unsigned bit
    cdef int i
    for i in range(num_hashes):
        x *= PROBE_MULTIPLIER
        bit = <unsigned>(x >> PROBE_SHIFT)
        if not (block[bit >> 3] & (1 << (bit & 7))):
            return False
    return True


cdef inline bint block_add(uint8_t* block, uint64_t h2, int num_hashes) noexcept nogil:
    """Set the key's bits; True when one of them was clear (the key was new)."""
    cdef uint64_t x = h2
    cdef unsigned bit
    cdef uint8_t mask
    cdef bint new = False
    cdef int i
    for i in range(num_hashes):
        x *= PROBE_MULTIPLIER
        bit = <unsigned>(x >> PROBE_SHIFT)
        mask = <uint8_t>(1 << (bit & 7))
        # Read first: a set bit costs no locked instruction and leaves the page clean.
        if not (block[bit >> 3] & mask):
            if not (cdd_atomic_or_u8(&block[bit >> 3], mask) & mask):
                new = True
    return new


cdef int64_t add_hashed(uint8_t* bits, uint64_t num_blocks, int num_hashes,
                        const uint64_t* hashes, Py_ssize_t count, uint8_t* out) noexcept nogil:
    cdef Py_ssize_t i
    cdef int64_t added = 0
    for i in range(min(count, PREFETCH_AHEAD)):
        cdd_prefetch_write(block_of(bits, hashes[2 * i], num_blocks))
    for i in range(count):
        if i + PREFETCH_AHEAD < count:
            cdd_prefetch_write(block_of(bits, hashes[2 * (i + PREFETCH_AHEAD)], num_blocks))
        out[i] = block_add(block_of(bits, hashes[2 * i], num_blocks), hashes[2 * i + 1], num_hashes)
        added += out[i]
    return added


cdef void contains_hashed(const uint8_t* bits, uint64_t num_blocks, int num_hashes,
                          const uint64_t* hashes, Py_ssize_t count, uint8_t* out) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(min(count, PREFETCH_AHEAD)):
        cdd_prefetch_read(block_of(<uint8_t*>bits, hashes[2 * i], num_blocks))
    for i in range(count):
        if i + PREFETCH_AHEAD < count:
            cdd_prefetch_read(block_of(<uint8_t*>bits, hashes[2 * (i + PREFETCH_AHEAD)], num_blocks))
        out[i] = block_contains(block_of(<uint8_t*>bits, hashes[2 * i], num_blocks), hashes[2 * i + 1], num_hashes)


def hash_many(items):
    """Return the ``(n, 2)`` uint64 array of MurmurHash3 x64-128 ``(h1, h2)`` rows of ``items``.

    Equal to ``crawldedup._hash.hash_many``; hashes with the GIL released.

    :raises TypeError: for an item that is neither ``str`` nor bytes-like.
    """
    cdef _KeyBatch batch = _KeyBatch(items)
    hashes = np.empty((batch.count, 2), dtype=np.uint64)
    cdef uint64_t[:, ::1] view = hashes
    if batch.count:
        with nogil:
            batch.hash_into(&view[0, 0])
    return hashes


cdef class _CBloomCore:
    """The compiled hot paths of CBloomFilter: pointer into the mapping, hashing, probing."""

    cdef Py_buffer _view
    cdef uint8_t* _bits
    cdef uint64_t _num_blocks
    cdef int _num_hashes
    cdef bint _read_only
    cdef public object _file
    cdef public object _lock
    cdef public int64_t _count
    cdef public int _busy

    def __cinit__(self, *args, **kwargs):
        self._bits = NULL

    def __dealloc__(self):
        if self._bits != NULL:
            PyBuffer_Release(&self._view)

    def _map_bits(self, file):
        PyObject_GetBuffer(file.mm, &self._view, PyBUF_SIMPLE if file.read_only else PyBUF_WRITABLE)
        self._bits = <uint8_t*>self._view.buf + HEADER_BYTES
        self._num_blocks = file.header.num_blocks
        self._num_hashes = file.header.num_hashes
        self._read_only = file.read_only

    def _unmap_bits(self):
        if self._bits != NULL:
            self._bits = NULL
            PyBuffer_Release(&self._view)

    cdef inline int _check_writable(self) except -1:
        if self._bits == NULL:
            raise closed_error()
        if self._read_only:
            raise read_only_error()
        return 0

    def add(self, item):
        """Add one key; return True when it was new (pybloomfiltermmap3's ``add`` returns the opposite).

        :raises TypeError: when ``item`` is neither ``str`` nor bytes-like.
        :raises io.UnsupportedOperation: when the filter is read-only.
        :raises ValueError: when the filter is closed.
        """
        cdef KeyBytes key
        cdef uint64_t hashes[2]
        cdef bint new = False
        owner = key_view(item, &key)
        cdd_murmur3_x64_128(key.data, <size_t>key.size, HASH_SEED, hashes)
        self._check_writable()
        if self._busy:  # a batch runs without the GIL: wait for it
            with self._exclusive():
                self._check_writable()
                new = block_add(block_of(self._bits, hashes[0], self._num_blocks), hashes[1], self._num_hashes)
        else:  # the GIL alone keeps this atomic against other threads
            new = block_add(block_of(self._bits, hashes[0], self._num_blocks), hashes[1], self._num_hashes)
        self._count += new
        return new

    def __contains__(self, item):
        cdef KeyBytes key
        cdef uint64_t hashes[2]
        owner = key_view(item, &key)
        cdd_murmur3_x64_128(key.data, <size_t>key.size, HASH_SEED, hashes)
        if self._bits == NULL:
            raise closed_error()
        if self._busy:
            with self._exclusive():
                return block_contains(block_of(self._bits, hashes[0], self._num_blocks), hashes[1], self._num_hashes)
        return block_contains(block_of(self._bits, hashes[0], self._num_blocks), hashes[1], self._num_hashes)

    def add_many(self, items):
        """Add keys in order; return a bool array, True where the key was new when added.

        :raises TypeError: for a key that is neither ``str`` nor bytes-like (nothing is added).
        :raises io.UnsupportedOperation: when the filter is read-only.
        :raises ValueError: when the filter is closed.
        """
        self._check_writable()
        return self.add_hashes(hash_many(items))

    def contains_many(self, items):
        """Return a bool array, True where the key is probably in the filter.

        :raises TypeError: for a key that is neither ``str`` nor bytes-like.
        :raises ValueError: when the filter is closed.
        """
        if self._bits == NULL:
            raise closed_error()
        return self.contains_hashes(hash_many(items))

    def add_hashes(self, hashes):
        """Like ``add_many`` for keys hashed by ``hash_many`` (an ``(n, 2)`` uint64 array).

        :raises TypeError: for another dtype.
        :raises ValueError: for another shape, or when the filter is closed.
        :raises io.UnsupportedOperation: when the filter is read-only.
        """
        cdef const uint64_t[:, ::1] rows = as_hash_array(hashes)
        cdef Py_ssize_t count = rows.shape[0]
        new = np.zeros(count, dtype=bool)
        cdef uint8_t[::1] out = new.view(np.uint8)
        cdef int64_t added
        with self._exclusive():
            self._check_writable()
            if count:
                with nogil:
                    added = add_hashed(self._bits, self._num_blocks, self._num_hashes, &rows[0, 0], count, &out[0])
                self._count += added
        return new

    def contains_hashes(self, hashes):
        """Like ``contains_many`` for keys hashed by ``hash_many``.

        :raises TypeError: for another dtype.
        :raises ValueError: for another shape, or when the filter is closed.
        """
        cdef const uint64_t[:, ::1] rows = as_hash_array(hashes)
        cdef Py_ssize_t count = rows.shape[0]
        found = np.zeros(count, dtype=bool)
        cdef uint8_t[::1] out = found.view(np.uint8)
        with self._exclusive():
            if count:
                with nogil:
                    contains_hashed(self._bits, self._num_blocks, self._num_hashes, &rows[0, 0], count, &out[0])
        return found


class CBloomFilter(_CBloomCore, FilterBase):
    """A Bloom filter of ``str`` or bytes-like keys in a memory-mapped file (compiled twin).

    Same constructor, methods, exceptions and file bytes as ``crawldedup.bloom.PyBloomFilter``,
    the documented reference. Batch calls hash and probe with the GIL released.
    """
