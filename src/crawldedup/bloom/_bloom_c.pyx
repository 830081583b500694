# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# cython: embedsignature=True, embedsignature.format=python, binding=True, auto_pickle=False
"""CBloomFilter: the compiled twin of crawldedup.bloom.PyBloomFilter (same layout, same bytes).

Keys are hashed in C by the fingerprints layer's compiled twin (its ``KeyChunk`` and
``hash_key``, declared in ``_fingerprints_c.pxd``); batch calls collect pointers to the keys'
bytes, then hash and probe with the GIL released, prefetching blocks ahead of use.
While other processes write the same file bits are set with atomic ORs, so none is ever lost;
a filter alone with its bits (``crawldedup._writers``) sets them with plain ORs, which cost
about half as much in the probe loop (docs/performance.md).
"""

import inspect
import types
from contextlib import nullcontext
from typing import Any, Iterable

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memset

from ..fingerprints._fingerprints_c cimport CHUNK_KEYS, KeyChunk, hash_key

import numpy as np

from . import format as _format
from ._base import FilterBase, as_hash_array, closed_error, read_only_error


cdef extern from "Python.h":
    object PySequence_Fast(object o, const char* message)
    Py_ssize_t PySequence_Fast_GET_SIZE(object o)
    # A slot's description, where its docstring lives (cpython/descrobject.h).
    struct wrapperbase:
        const char* doc
    ctypedef struct PyWrapperDescrObject:
        wrapperbase* d_base


cdef extern from "_bloom_portable.h" nogil:
    uint64_t cdd_atomic_or_u64(uint64_t* p, uint64_t mask)
    uint64_t cdd_le_bit(unsigned i)
    void cdd_prefetch_read(const void* p)
    void cdd_prefetch_write(const void* p)
    uint64_t cdd_mulhi_u64_u32(uint64_t h, uint64_t n)


# The layout's constants come from _format, the one place that defines them.
cdef uint64_t PROBE_MULTIPLIER = _format.PROBE_MULTIPLIER
cdef unsigned PROBE_SHIFT = _format.PROBE_SHIFT
cdef Py_ssize_t HEADER_BYTES = _format.HEADER_BYTES
cdef uint64_t BLOCK_BYTES = _format.BLOCK_BYTES

# Blocks are prefetched this many keys ahead: 16 keys of probing (~10-20 ns each when the line
# is in cache) cover one DRAM miss (~185-500 ns measured on the reference VM). At capacity
# 50,000,000, 16, 32 and 64 measured alike (add_many 50-57, contains_many 33-36 ns a key).
cdef enum:
    PREFETCH_AHEAD = 16
# A batch of at least this many keys into a file asks whether this is the file's only writer
# (two fcntl calls, ~2 us) to set bits with plain ORs instead of atomic ones (~8 ns a new key).
cdef enum:
    PLAIN_OR_MIN_KEYS = 1024
# add_many hashes the whole batch before setting any bit (a bad key then adds nothing) into a
# buffer the filter keeps between calls: a fresh one costs a page fault per 256 keys on first
# touch. Beyond this many keys (16 MiB) the buffer is given back after the call.
cdef enum:
    SCRATCH_KEEP_KEYS = 1 << 20


# A batch with many keys into a large filter sets its bits region by region (1 MiB of blocks
# each, in ascending order), each region's keys in batch order: the same bits and answers as
# in batch order (a key's bits are all in one block, and the keys of a block keep their order),
# but a region's pages stay in the TLB while its keys miss the cache. CPU ns a key, compiled
# add_many, 1M-key batches, warm filter, 2-vCPU VM (docs/performance.md): 95 -> 53 at capacity
# 1e9 (100,000-key batches 115 -> 83; 20,000: 130 -> 132), 77 -> 64 at 5e8, 54 -> 47 at 2e8,
# 42 -> 45 at 5e7 (61 MB, where the page walks stay in cache): hence the two floors below.
cdef enum:
    REGION_SHIFT = 14  # 16,384 blocks of 64 bytes
    REGION_MIN_KEYS = 32  # keys per region of the filter, on average, for the pass to repay itself
    REGION_MIN_COUNT = 256  # regions (MiB of blocks) below which the page walks stay cheap


cdef struct Ordered:
    uint64_t h2
    uint32_t block
    uint32_t index


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


cdef inline bint block_add(uint8_t* block, uint64_t h2, int num_hashes, bint atomic) noexcept nogil:
    """Set the key's bits; True when one of them was clear (the key was new).

    A branch-free pass gathers the probe bits still clear, so a key already present costs no
    locked instruction and dirties no page; a new key then sets its bits with one OR each,
    atomic when other processes may be setting bits of the same words. Per-word branches (does
    this word need bits? has it got them?) mispredict several times a key. ns per new key, C
    loop, capacity 1,000,000, k = 7, reference VM: per-word branches and atomic fetch-or 39,
    per-bit atomic OR 18, per-bit plain OR 10 (13 when k is not known at compile time).
    """
    cdef uint64_t* words = <uint64_t*>block
    cdef uint64_t x = h2
    cdef uint64_t clear = 0
    cdef unsigned bit
    cdef int i
    for i in range(num_hashes):
        x *= PROBE_MULTIPLIER
        bit = <unsigned>(x >> PROBE_SHIFT)
        clear |= cdd_le_bit(bit) & ~words[bit >> 6]
    if clear == 0:
        return False
    x = h2
    for i in range(num_hashes):
        x *= PROBE_MULTIPLIER
        bit = <unsigned>(x >> PROBE_SHIFT)
        if atomic:
            cdd_atomic_or_u64(&words[bit >> 6], cdd_le_bit(bit))
        else:
            words[bit >> 6] |= cdd_le_bit(bit)
    return True


cdef int64_t add_hashed(uint8_t* bits, uint64_t num_blocks, int num_hashes,
                        const uint64_t* hashes, Py_ssize_t count, uint8_t* out, bint atomic,
                        const Ordered* order) noexcept nogil:
    # Each call below is inlined with its constants: k = 7 (every 1% filter) unrolls the probe
    # loops, and the choice of OR leaves the loop. ``order``, when not NULL, is the keys'
    # region order (order_by_region).
    if num_hashes == 7:
        if atomic:
            return add_hashed_as(bits, num_blocks, 7, hashes, count, out, True, order)
        return add_hashed_as(bits, num_blocks, 7, hashes, count, out, False, order)
    if atomic:
        return add_hashed_as(bits, num_blocks, num_hashes, hashes, count, out, True, order)
    return add_hashed_as(bits, num_blocks, num_hashes, hashes, count, out, False, order)


cdef inline int64_t add_hashed_as(uint8_t* bits, uint64_t num_blocks, int num_hashes, const uint64_t* hashes,
                                  Py_ssize_t count, uint8_t* out, bint atomic, const Ordered* order) noexcept nogil:
    cdef Py_ssize_t i
    cdef int64_t added = 0
    if order != NULL:
        for i in range(min(count, PREFETCH_AHEAD)):
            cdd_prefetch_write(bits + order[i].block * BLOCK_BYTES)
        for i in range(count):
            if i + PREFETCH_AHEAD < count:
                cdd_prefetch_write(bits + order[i + PREFETCH_AHEAD].block * BLOCK_BYTES)
            out[order[i].index] = block_add(bits + order[i].block * BLOCK_BYTES, order[i].h2, num_hashes, atomic)
            added += out[order[i].index]
        return added
    for i in range(min(count, PREFETCH_AHEAD)):
        cdd_prefetch_write(block_of(bits, hashes[2 * i], num_blocks))
    for i in range(count):
        if i + PREFETCH_AHEAD < count:
            cdd_prefetch_write(block_of(bits, hashes[2 * (i + PREFETCH_AHEAD)], num_blocks))
        out[i] = block_add(block_of(bits, hashes[2 * i], num_blocks), hashes[2 * i + 1], num_hashes, atomic)
        added += out[i]
    return added


cdef void order_by_region(uint64_t num_blocks, const uint64_t* hashes, Py_ssize_t count, Ordered* order,
                          Py_ssize_t* starts, Py_ssize_t regions) noexcept nogil:
    """Write the keys to ``order`` by region of their block, ascending, in batch order within a
    region (a stable counting sort: one pass to count, one to place)."""
    cdef Py_ssize_t i, r, total = 0, n
    cdef uint64_t block
    cdef Ordered* entry
    memset(starts, 0, regions * sizeof(Py_ssize_t))
    for i in range(count):
        starts[cdd_mulhi_u64_u32(hashes[2 * i], num_blocks) >> REGION_SHIFT] += 1
    for r in range(regions):
        n = starts[r]
        starts[r] = total
        total += n
    for i in range(count):
        block = cdd_mulhi_u64_u32(hashes[2 * i], num_blocks)
        r = <Py_ssize_t>(block >> REGION_SHIFT)
        entry = &order[starts[r]]
        starts[r] += 1
        entry.h2 = hashes[2 * i + 1]
        entry.block = <uint32_t>block
        entry.index = <uint32_t>i


cdef void contains_hashed(const uint8_t* bits, uint64_t num_blocks, int num_hashes,
                          const uint64_t* hashes, Py_ssize_t count, uint8_t* out) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(min(count, PREFETCH_AHEAD)):
        cdd_prefetch_read(block_of(<uint8_t*>bits, hashes[2 * i], num_blocks))
    for i in range(count):
        if i + PREFETCH_AHEAD < count:
            cdd_prefetch_read(block_of(<uint8_t*>bits, hashes[2 * (i + PREFETCH_AHEAD)], num_blocks))
        out[i] = block_contains(block_of(<uint8_t*>bits, hashes[2 * i], num_blocks), hashes[2 * i + 1], num_hashes)


cdef inline const uint8_t* super_block(const uint8_t* bits, uint64_t h1, uint64_t num_blocks,
                                       uint64_t slots) noexcept nogil:
    return bits + cdd_mulhi_u64_u32(h1, num_blocks) * slots * BLOCK_BYTES


cdef inline bint in_slots(const uint8_t* base, uint64_t h2, int num_hashes, uint64_t slots,
                          uint64_t mask) noexcept nogil:
    cdef uint64_t slot
    for slot in range(slots):
        if mask >> slot & 1 and block_contains(base + slot * BLOCK_BYTES, h2, num_hashes):
            return True
    return False


cdef inline void prefetch_slots(const uint8_t* base, uint64_t slots, uint64_t mask, bint write) noexcept nogil:
    cdef uint64_t slot
    for slot in range(slots):
        if mask >> slot & 1:
            if write:
                cdd_prefetch_write(base + slot * BLOCK_BYTES)
            else:
                cdd_prefetch_read(base + slot * BLOCK_BYTES)


cdef void windowed_hashed(uint8_t* bits, uint64_t num_blocks, int num_hashes, uint64_t slots, uint64_t mask,
                          Py_ssize_t current, const uint64_t* hashes, Py_ssize_t count, uint8_t* out) noexcept nogil:
    """Look up (``current`` < 0) or add to slot ``current`` the keys that none of the slots in
    ``mask`` holds. A key's slots are side by side (one super-block), so its lookup reads
    adjacent cache lines, prefetched PREFETCH_AHEAD keys ahead like the plain filter's one line."""
    cdef Py_ssize_t i
    cdef uint8_t* base
    cdef bint adding = current >= 0
    cdef uint64_t touched = mask | ((<uint64_t>1 << current) if adding else 0)
    for i in range(min(count, PREFETCH_AHEAD)):
        prefetch_slots(super_block(bits, hashes[2 * i], num_blocks, slots), slots, touched, adding)
    for i in range(count):
        if i + PREFETCH_AHEAD < count:
            prefetch_slots(super_block(bits, hashes[2 * (i + PREFETCH_AHEAD)], num_blocks, slots), slots, touched,
                           adding)
        base = <uint8_t*>super_block(bits, hashes[2 * i], num_blocks, slots)
        if in_slots(base, hashes[2 * i + 1], num_hashes, slots, mask):
            out[i] = not adding
        elif adding:
            out[i] = block_add(base + current * BLOCK_BYTES, hashes[2 * i + 1], num_hashes, False)


cdef object run_windowed(blocks, uint64_t num_blocks, int num_hashes, uint64_t slots, uint64_t mask,
                         Py_ssize_t current, hashes):
    cdef const uint64_t[:, ::1] rows = as_hash_array(hashes)
    cdef Py_ssize_t count = rows.shape[0]
    result = np.zeros(count, dtype=bool)
    cdef uint8_t[::1] out = result.view(np.uint8)
    cdef const uint8_t[::1] view = blocks  # written only when adding, to a writable mapping
    if count:
        with nogil:
            windowed_hashed(<uint8_t*>&view[0], num_blocks, num_hashes, slots, mask, current, &rows[0, 0], count,
                            &out[0])
    return result


def windowed_contains(blocks, uint64_t num_blocks, int num_hashes, uint64_t slots, uint64_t live, hashes):
    """Per key of ``hashes`` (``(n, 2)`` uint64), whether one of the slots in the bit mask
    ``live`` holds it; equal to ``_bloom_py.windowed_contains``, with the GIL released."""
    return run_windowed(blocks, num_blocks, num_hashes, slots, live, -1, hashes)


def windowed_add(blocks, uint64_t num_blocks, int num_hashes, uint64_t slots, uint64_t older, uint64_t current,
                 hashes):
    """Add, in order, the keys that none of the slots in the mask ``older`` holds to slot
    ``current``; True where the key was new. Equal to ``_bloom_py.windowed_add``; plain ORs
    (a windowed file has one writer), the GIL released."""
    if not blocks.flags.writeable:
        raise read_only_error()
    return run_windowed(blocks, num_blocks, num_hashes, slots, older, current, hashes)


# The public methods carry no docstrings here: the selector (crawldedup.bloom) gives them the
# reference twin's at import (document_like), so help() shows one documented API.
cdef class _CBloomCore:
    """The compiled hot paths of CBloomFilter: pointer into the mapping, hashing, probing."""

    cdef Py_buffer _view
    cdef uint8_t* _bits
    cdef uint64_t _num_blocks
    cdef int _num_hashes
    cdef bint _read_only
    cdef bint _private
    cdef public object _file
    cdef public object _lock
    cdef public int64_t _count
    cdef public int _busy
    cdef uint64_t* _scratch
    cdef Py_ssize_t _scratch_keys
    cdef Ordered* _order
    cdef Py_ssize_t _order_keys

    def __cinit__(self, *args, **kwargs):
        self._bits = NULL
        self._scratch = NULL
        self._scratch_keys = 0
        self._order = NULL
        self._order_keys = 0

    def __dealloc__(self):
        if self._bits != NULL:
            PyBuffer_Release(&self._view)
        PyMem_Free(self._scratch)
        PyMem_Free(self._order)

    def _map_bits(self, file):
        PyObject_GetBuffer(file.mm, &self._view, PyBUF_SIMPLE if file.read_only else PyBUF_WRITABLE)
        self._bits = <uint8_t*>self._view.buf + HEADER_BYTES
        self._num_blocks = file.header.num_blocks
        self._num_hashes = file.header.num_hashes
        self._read_only = file.read_only
        self._private = file.path is None  # anonymous memory belongs to this process alone

    def _unmap_bits(self):
        if self._bits != NULL:
            self._bits = NULL
            PyBuffer_Release(&self._view)

    def add(self, item: Any) -> bool:
        cdef uint64_t hashes[2]
        cdef bint new = False
        hash_key(item, hashes)
        check_writable(self)
        # One key does not repay asking for the file to itself: atomic ORs unless in memory.
        if self._busy:  # a batch runs without the GIL: wait for it
            with self._exclusive():
                check_writable(self)
                new = block_add(block_of(self._bits, hashes[0], self._num_blocks), hashes[1], self._num_hashes,
                                not self._private)
        else:  # the GIL alone keeps this atomic against other threads
            new = block_add(block_of(self._bits, hashes[0], self._num_blocks), hashes[1], self._num_hashes,
                            not self._private)
        self._count += new
        return new

    def __contains__(self, item: Any) -> bool:
        cdef uint64_t hashes[2]
        hash_key(item, hashes)
        if self._bits == NULL:
            raise closed_error()
        if self._busy:
            with self._exclusive():
                return block_contains(block_of(self._bits, hashes[0], self._num_blocks), hashes[1], self._num_hashes)
        return block_contains(block_of(self._bits, hashes[0], self._num_blocks), hashes[1], self._num_hashes)

    def add_many(self, items: Iterable[Any]) -> np.ndarray:
        check_writable(self)
        return run_keys(self, items, True)

    def contains_many(self, items: Iterable[Any]) -> np.ndarray:
        if self._bits == NULL:
            raise closed_error()
        return run_keys(self, items, False)

    def _or_blocks_atomically(self, blocks):
        """OR ``blocks`` (another filter's, same shape) into this one's with atomic ORs."""
        cdef const uint64_t[::1] theirs = blocks.view(np.uint64)
        cdef uint64_t* mine = <uint64_t*>self._bits
        cdef Py_ssize_t i
        with nogil:
            for i in range(theirs.shape[0]):
                if theirs[i] & ~mine[i]:  # a word with nothing new is not written
                    cdd_atomic_or_u64(&mine[i], theirs[i])

    def add_hashes(self, hashes: Any) -> np.ndarray:
        cdef const uint64_t[:, ::1] rows = as_hash_array(hashes)
        cdef Py_ssize_t count = rows.shape[0]
        new = np.zeros(count, dtype=bool)
        cdef uint8_t[::1] out = new.view(np.uint8)
        with self._exclusive() as file:
            check_writable(self)
            if count:
                set_bits(self, file, &rows[0, 0], count, &out[0])
        return new

    def contains_hashes(self, hashes: Any) -> np.ndarray:
        cdef const uint64_t[:, ::1] rows = as_hash_array(hashes)
        cdef Py_ssize_t count = rows.shape[0]
        found = np.zeros(count, dtype=bool)
        cdef uint8_t[::1] out = found.view(np.uint8)
        with self._exclusive():
            if count:
                with nogil:
                    contains_hashed(self._bits, self._num_blocks, self._num_hashes, &rows[0, 0], count, &out[0])
        return found


# The core's helpers are functions rather than cdef methods: a cdef class with cdef methods
# carries a __pyx_vtable__ that help() lists among the filter's attributes.

cdef inline int check_writable(_CBloomCore core) except -1:
    if core._bits == NULL:
        raise closed_error()
    if core._read_only:
        raise read_only_error()
    return 0


cdef object run_keys(_CBloomCore core, items, bint adding):
    """Hash and probe ``items`` with the GIL released, holding the filter's lock."""
    sequence = PySequence_Fast(items, "items must be iterable")
    cdef Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence)
    result = np.zeros(count, dtype=bool)
    if count == 0:
        return result
    cdef uint8_t[::1] out = result.view(np.uint8)
    cdef KeyChunk chunk = KeyChunk()
    with core._exclusive() as file:
        if adding:
            check_writable(core)
            add_keys(core, file, chunk, sequence, count, &out[0])
        else:
            contains_keys(core, chunk, sequence, count, &out[0])
    return result


cdef int add_keys(_CBloomCore core, file, KeyChunk chunk, object sequence, Py_ssize_t count,
                  uint8_t* out) except -1:
    """Hash every key first, so that a bad one raises before any bit is set; then probe."""
    cdef Py_ssize_t start
    cdef uint64_t* hashes = scratch_for(core, count)
    try:
        for start in range(0, count, CHUNK_KEYS):
            chunk.load(sequence, start)
            with nogil:
                chunk.hash_keys(hashes + 2 * start)
        chunk.release()
        set_bits(core, file, hashes, count, out)
    finally:
        if core._scratch_keys > SCRATCH_KEEP_KEYS:
            PyMem_Free(core._scratch)
            core._scratch = NULL
            core._scratch_keys = 0
    return 0


cdef int contains_keys(_CBloomCore core, KeyChunk chunk, object sequence, Py_ssize_t count,
                       uint8_t* out) except -1:
    """Hash and probe a chunk at a time, while the chunk's keys are still in cache."""
    cdef Py_ssize_t start
    for start in range(0, count, CHUNK_KEYS):
        chunk.load(sequence, start)
        with nogil:
            chunk.hash_keys(chunk.hashes)
            contains_hashed(core._bits, core._num_blocks, core._num_hashes, chunk.hashes, chunk.count,
                            out + start)
    return 0


cdef int set_bits(_CBloomCore core, file, const uint64_t* hashes, Py_ssize_t count, uint8_t* out) except -1:
    """Set the bits of ``count`` hashed keys: with plain ORs when this is the file's only
    writer (asked of a batch big enough to repay the asking) or the bits are in memory; region
    by region when the batch and the filter are large (order_by_region)."""
    cdef int64_t added
    cdef bint plain
    cdef Py_ssize_t regions = <Py_ssize_t>(core._num_blocks >> REGION_SHIFT) + 1
    cdef Ordered* order = NULL
    if regions >= REGION_MIN_COUNT and count >= regions * REGION_MIN_KEYS and count <= 0xFFFFFFFF:
        order = order_for(core, count, regions)
    ask = not core._private and count >= PLAIN_OR_MIN_KEYS
    try:
        with (file.plain_or() if ask else nullcontext(core._private)) as plain, file.bulk(count):
            with nogil:
                if order != NULL:
                    order_by_region(core._num_blocks, hashes, count, order, <Py_ssize_t*>(order + count), regions)
                added = add_hashed(core._bits, core._num_blocks, core._num_hashes, hashes, count, out, not plain,
                                   order)
    finally:
        if core._order_keys > SCRATCH_KEEP_KEYS:
            PyMem_Free(core._order)
            core._order = NULL
            core._order_keys = 0
    core._count += added
    return 0


cdef Ordered* order_for(_CBloomCore core, Py_ssize_t count, Py_ssize_t regions) except NULL:
    """Return the kept buffer for ``count`` keys in region order and ``regions`` counters
    (the counters after the keys)."""
    cdef Ordered* grown
    cdef Py_ssize_t keys = count + (regions * sizeof(Py_ssize_t) + sizeof(Ordered) - 1) // sizeof(Ordered)
    if keys > core._order_keys:
        grown = <Ordered*>PyMem_Realloc(core._order, keys * sizeof(Ordered))
        if grown == NULL:
            raise MemoryError()
        core._order = grown
        core._order_keys = keys
    return core._order


cdef uint64_t* scratch_for(_CBloomCore core, Py_ssize_t count) except NULL:
    """Return the kept buffer of ``(h1, h2)`` rows, grown to at least ``count`` keys."""
    cdef uint64_t* grown
    if count > core._scratch_keys:
        grown = <uint64_t*>PyMem_Realloc(core._scratch, count * 2 * sizeof(uint64_t))
        if grown == NULL:
            raise MemoryError()
        core._scratch = grown
        core._scratch_keys = count
    return core._scratch


class CBloomFilter(_CBloomCore, FilterBase):
    # Its docstring, like its methods', is the reference twin's (document_like).
    _ATOMIC_OR = True



cdef wrapperbase contains_slot  # __contains__'s slot description, with the reference's text
cdef bytes contains_doc  # that text, kept alive while the module is


def document_like(reference):
    """Give CBloomFilter the docstrings of ``reference``, the typed twin it follows.

    The reference is the one source of the text: the methods of the core are the same
    functions with the same signatures, so help() and IDEs show one API whichever twin serves.
    A slot such as ``__contains__`` keeps its text in a C struct; it gets a copy of that struct
    whose text also carries the signature (``$self``, for ``inspect.signature``).
    """
    global contains_slot, contains_doc
    CBloomFilter.__doc__ = reference.__doc__
    for name, method in vars(_CBloomCore).items():
        if name.startswith("_") or not callable(method):
            continue
        method.__doc__ = getattr(reference, name).__doc__
    parameters = list(inspect.signature(reference.__contains__).parameters)
    contains_doc = (f"__contains__(${', '.join(parameters)}, /)\n--\n\n"
                    f"{reference.__contains__.__doc__}").encode()
    descriptor = vars(_CBloomCore)["__contains__"]
    if type(descriptor) is types.WrapperDescriptorType:
        contains_slot = (<PyWrapperDescrObject*>descriptor).d_base[0]
        contains_slot.doc = PyBytes_AS_STRING(contains_doc)
        (<PyWrapperDescrObject*>descriptor).d_base = &contains_slot
