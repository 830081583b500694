# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# cython: embedsignature=True, embedsignature.format=python, binding=True
"""The compiled twin of the exact tier's kernels (``_runs_py``): the same runs, byte for byte.

C loops without the GIL: a radix sort of a batch's keys, the encoding and k-way merge of runs
in one pass, and a probe that looks a key's bucket up in the prefix index and its suffix in
the stream, prefetching both some keys ahead (dependent reads cost 185-500 ns on the
reference VM: independent, prefetched ones are what a batch can afford).
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memcpy

import numpy as np

from . import format as _format


cdef extern from "_runs_portable.h" nogil:
    uint64_t cdx_load_le64(const uint8_t* p)
    void cdx_store_le64(uint8_t* p, uint64_t v)
    void cdx_prefetch(const void* p)


cdef unsigned KEY_BITS = _format.KEY_BITS

# A probe reads two cache lines that depend on each other (the bucket's index entry, then its
# suffixes): the first is prefetched AHEAD keys before the second, which is prefetched AHEAD
# keys before the key is searched. RING holds the buckets found in between (a power of two).
cdef enum:
    AHEAD = 16
    RING = 32
# Below SMALL_SORT keys a sort is insertion, below BUCKET_SORT radix (8 passes of 8 bits), above
# it one counting pass on the top bits (at most MAX_BUCKET_BITS) into buckets of 4 to 8 keys on
# average, each then sorted by insertion (keys are hashes: uniform), or by radix when one holds
# over SMALL_SORT. CPU ns a key, best of 5, 2-vCPU VM: 1M keys radix 16-23, buckets 16.5;
# 100,000 keys 13.5 and 10.2 (12 bits at most: 23.6 at 1M).
cdef enum:
    SMALL_SORT = 64
    BUCKET_SORT = 4096
    MAX_BUCKET_BITS = 16


cdef inline uint64_t suffix_at(const uint8_t* stream, uint64_t i, unsigned width, uint64_t mask) noexcept nogil:
    cdef uint64_t bit = i * width
    return (cdx_load_le64(stream + (bit >> 3)) >> (bit & 7)) & mask


cdef inline uint64_t low_mask(unsigned width) noexcept nogil:
    return ((<uint64_t>1) << width) - 1


# -- sort ------------------------------------------------------------------------------------

cdef void insertion_sort(uint64_t* keys, Py_ssize_t count) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef uint64_t key
    for i in range(1, count):
        key = keys[i]
        j = i - 1
        while j >= 0 and keys[j] > key:
            keys[j + 1] = keys[j]
            j -= 1
        keys[j + 1] = key


cdef void radix_sort(uint64_t* keys, uint64_t* scratch, Py_ssize_t count) noexcept nogil:
    """Sort ``keys`` in place (LSD, 8 passes of 8 bits, one counting pass for all); a digit
    that every key shares is skipped."""
    cdef Py_ssize_t counts[8][256]
    cdef Py_ssize_t i, total, n
    cdef int digit, value
    cdef uint64_t* source = keys
    cdef uint64_t* target = scratch
    cdef uint64_t* swap
    cdef unsigned shift
    for digit in range(8):
        for value in range(256):
            counts[digit][value] = 0
    for i in range(count):
        for digit in range(8):
            counts[digit][(keys[i] >> (8 * digit)) & 0xFF] += 1
    for digit in range(8):
        shift = 8 * digit
        if counts[digit][(keys[0] >> shift) & 0xFF] == count:
            continue
        total = 0
        for value in range(256):
            n = counts[digit][value]
            counts[digit][value] = total
            total += n
        for i in range(count):
            value = (source[i] >> shift) & 0xFF
            target[counts[digit][value]] = source[i]
            counts[digit][value] += 1
        swap = source
        source = target
        target = swap
    if source != keys:
        memcpy(keys, source, count * sizeof(uint64_t))


cdef void bucket_sort(uint64_t* keys, uint64_t* scratch, Py_ssize_t count, Py_ssize_t* ends,
                      unsigned bits) noexcept nogil:
    """Sort ``keys`` in place through ``scratch``: a counting pass on the top ``bits`` bits,
    then each bucket on its own. ``ends`` has room for ``2**bits`` counts."""
    cdef Py_ssize_t buckets = (<Py_ssize_t>1) << bits, i, start, n, total = 0
    cdef unsigned shift = KEY_BITS - bits
    for i in range(buckets):
        ends[i] = 0
    for i in range(count):
        ends[keys[i] >> shift] += 1
    for i in range(buckets):
        n = ends[i]
        ends[i] = total
        total += n
    for i in range(count):
        scratch[ends[keys[i] >> shift]] = keys[i]
        ends[keys[i] >> shift] += 1  # ends[b] is now where bucket b ends
    start = 0
    for i in range(buckets):
        n = ends[i] - start
        if n > SMALL_SORT:
            radix_sort(scratch + start, keys + start, n)
        elif n > 1:
            insertion_sort(scratch + start, n)
        start = ends[i]
    memcpy(keys, scratch, count * sizeof(uint64_t))


def sort_keys(keys):
    """A sorted copy of the uint64 ``keys`` (equal to ``_runs_py.sort_keys``), sorted without the GIL."""
    result = np.array(keys, dtype=np.uint64, copy=True, order="C")
    cdef uint64_t[::1] view = result
    cdef Py_ssize_t count = view.shape[0]
    cdef uint64_t* scratch
    if count <= 1:
        return result
    if count < SMALL_SORT:
        insertion_sort(&view[0], count)
        return result
    cdef unsigned bits = min(MAX_BUCKET_BITS, (<uint64_t>count).bit_length() - 3)
    cdef Py_ssize_t* ends = NULL
    scratch = <uint64_t*>PyMem_Malloc(count * sizeof(uint64_t))
    if count >= BUCKET_SORT:
        ends = <Py_ssize_t*>PyMem_Malloc(((<Py_ssize_t>1) << bits) * sizeof(Py_ssize_t))
    if scratch == NULL or (count >= BUCKET_SORT and ends == NULL):
        PyMem_Free(scratch)
        PyMem_Free(ends)
        raise MemoryError()
    try:
        with nogil:
            if count >= BUCKET_SORT:
                bucket_sort(&view[0], scratch, count, ends, bits)
            else:
                radix_sort(&view[0], scratch, count)
    finally:
        PyMem_Free(scratch)
        PyMem_Free(ends)
    return result


# -- encode, decode, merge ---------------------------------------------------------------------

# Suffixes are gathered in a 64-bit word and stored a whole word at a time: ORing each one into
# the stream at its own byte made every store overlap the one before, and a load that overlaps
# a store not yet written back cannot be forwarded from it (the merge spent half its time
# there: 1.5 against 5.8 ns a key to encode 1M).
cdef struct Writer:
    uint64_t* index
    uint8_t* stream
    unsigned width
    uint64_t mask
    uint64_t next_bucket
    uint64_t written
    uint64_t word
    unsigned filled
    Py_ssize_t stored


cdef inline void write_key(Writer* out, uint64_t key) noexcept nogil:
    cdef uint64_t bucket = key >> out.width
    cdef uint64_t suffix = key & out.mask
    cdef unsigned filled = out.filled + out.width
    while out.next_bucket <= bucket:
        out.index[out.next_bucket] = out.written
        out.next_bucket += 1
    out.word |= suffix << out.filled
    if filled >= 64:  # the word is full (out.filled > 0 here: a suffix is at most 56 bits)
        cdx_store_le64(out.stream + out.stored, out.word)
        out.stored += 8
        out.word = suffix >> (64 - out.filled)
        filled -= 64
    out.filled = filled
    out.written += 1


cdef inline void finish(Writer* out, unsigned prefix) noexcept nogil:
    cdef uint64_t buckets = (<uint64_t>1) << prefix
    while out.next_bucket <= buckets:
        out.index[out.next_bucket] = out.written
        out.next_bucket += 1
    if out.filled:  # the last, partial word: its high bytes fall in the stream's zero padding
        cdx_store_le64(out.stream + out.stored, out.word)


cdef inline void start_writer(Writer* out, uint64_t* index, uint8_t* stream, unsigned prefix) noexcept nogil:
    out.index = index
    out.stream = stream
    out.width = KEY_BITS - prefix
    out.mask = low_mask(out.width)
    out.next_bucket = 0
    out.written = 0
    out.word = 0
    out.filled = 0
    out.stored = 0


def encode_run(keys, unsigned prefix, index, stream):
    """Write the run of the sorted ``keys`` into ``index`` and ``stream`` (zeros); equal to
    ``_runs_py.encode_run``."""
    cdef const uint64_t[::1] source = np.ascontiguousarray(keys, dtype=np.uint64)
    cdef uint64_t[::1] index_view = index
    cdef uint8_t[::1] stream_view = stream
    cdef Py_ssize_t count = source.shape[0], i
    cdef Writer out
    start_writer(&out, &index_view[0], &stream_view[0], prefix)
    with nogil:
        for i in range(count):
            write_key(&out, source[i])
        finish(&out, prefix)


cdef struct Cursor:
    const uint64_t* index
    const uint8_t* stream
    unsigned width
    uint64_t mask
    uint64_t count
    uint64_t at
    uint64_t bucket
    uint64_t key


cdef inline bint load_key(Cursor* cursor) noexcept nogil:
    """Decode the key at ``cursor.at``; False past the run's last key."""
    if cursor.at >= cursor.count:
        return False
    while cursor.index[cursor.bucket + 1] <= cursor.at:
        cursor.bucket += 1
    cursor.key = (cursor.bucket << cursor.width) | suffix_at(cursor.stream, cursor.at, cursor.width, cursor.mask)
    return True


cdef void start_cursor(Cursor* cursor, const uint64_t* index, const uint8_t* stream, unsigned prefix) noexcept nogil:
    cursor.index = index
    cursor.stream = stream
    cursor.width = KEY_BITS - prefix
    cursor.mask = low_mask(cursor.width)
    cursor.count = index[(<uint64_t>1) << prefix]
    cursor.at = 0
    cursor.bucket = 0


def decode_run(index, stream, unsigned prefix):
    """The sorted keys of a run; equal to ``_runs_py.decode_run``."""
    cdef const uint64_t[::1] index_view = index
    cdef const uint8_t[::1] stream_view = stream
    cdef Cursor cursor
    start_cursor(&cursor, &index_view[0], &stream_view[0], prefix)
    keys = np.empty(cursor.count, dtype=np.uint64)
    cdef uint64_t[::1] out = keys
    with nogil:
        while load_key(&cursor):
            out[cursor.at] = cursor.key
            cursor.at += 1
    return keys


def merge_runs(sources, unsigned prefix, index, stream):
    """Write the run of every key of ``sources`` (``(index, stream, prefix)`` of disjoint runs)
    into ``index`` and ``stream`` (zeros): one pass, the smallest key of the runs' next ones
    written each step. Equal to ``_runs_py.merge_runs``."""
    # Which run holds the smallest key is a coin toss for the branch predictor: 8.7 ns a key to
    # merge two runs of random keys, 12.7 for five. Neither a branch-free tournament of the
    # runs' next keys (10.1 and 24.9) nor decoding 64 keys of each run ahead (9.9 and 14.4)
    # did better here: fewer merges do (store.FANOUT, the buffer).
    cdef Py_ssize_t count = len(sources), i, best, active
    cdef uint64_t[::1] index_view = index
    cdef uint8_t[::1] stream_view = stream
    cdef const uint64_t[::1] source_index
    cdef const uint8_t[::1] source_stream
    cdef Writer out
    held = []  # the sources' buffers, kept while the loop reads them without the GIL
    cdef Cursor* cursors = <Cursor*>PyMem_Malloc(max(count, 1) * sizeof(Cursor))
    if cursors == NULL:
        raise MemoryError()
    try:
        active = 0
        for i in range(count):
            source_index = sources[i][0]
            source_stream = sources[i][1]
            held.append((source_index, source_stream))
            start_cursor(&cursors[active], &source_index[0], &source_stream[0], sources[i][2])
            if load_key(&cursors[active]):
                active += 1
        start_writer(&out, &index_view[0], &stream_view[0], prefix)
        with nogil:
            while active:
                best = 0
                for i in range(1, active):
                    if cursors[i].key < cursors[best].key:
                        best = i
                write_key(&out, cursors[best].key)
                cursors[best].at += 1
                if not load_key(&cursors[best]):
                    active -= 1
                    cursors[best] = cursors[active]
            finish(&out, prefix)
    finally:
        PyMem_Free(cursors)


# -- probe -------------------------------------------------------------------------------------

cdef void probe(const uint64_t* index, const uint8_t* stream, unsigned prefix, const uint64_t* queries,
                Py_ssize_t count, uint8_t* out) noexcept nogil:
    cdef unsigned width = KEY_BITS - prefix
    cdef uint64_t mask = low_mask(width)
    cdef uint64_t lows[RING]
    cdef uint64_t highs[RING]
    cdef Py_ssize_t i, j, k
    cdef uint64_t bucket, low, high, target, suffix
    for i in range(count + 2 * AHEAD):
        if i < count:
            cdx_prefetch(index + (queries[i] >> width))
        j = i - AHEAD
        if 0 <= j < count:
            bucket = queries[j] >> width
            low = index[bucket]
            high = index[bucket + 1]
            lows[j & (RING - 1)] = low
            highs[j & (RING - 1)] = high
            if low < high:
                cdx_prefetch(stream + ((low * width) >> 3))
                cdx_prefetch(stream + (((high - 1) * width) >> 3))
        k = i - 2 * AHEAD
        if 0 <= k < count:
            low = lows[k & (RING - 1)]
            high = highs[k & (RING - 1)]
            target = queries[k] & mask
            out[k] = 0
            while low < high:
                suffix = suffix_at(stream, low, width, mask)
                if suffix >= target:
                    out[k] = suffix == target
                    break
                low += 1


def probe_run(index, stream, unsigned prefix, queries):
    """Per query (uint64, any order), True when the run holds it; equal to ``_runs_py.probe_run``."""
    cdef const uint64_t[::1] index_view = index
    cdef const uint8_t[::1] stream_view = stream
    cdef const uint64_t[::1] query_view = np.ascontiguousarray(queries, dtype=np.uint64)
    cdef Py_ssize_t count = query_view.shape[0]
    result = np.zeros(count, dtype=bool)
    cdef uint8_t[::1] out = result.view(np.uint8)
    if count:
        with nogil:
            probe(&index_view[0], &stream_view[0], prefix, &query_view[0], count, &out[0])
    return result
