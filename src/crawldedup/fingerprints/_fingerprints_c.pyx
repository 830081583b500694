# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# cython: embedsignature=True, embedsignature.format=python, binding=True, auto_pickle=False
"""The compiled twin of ``_fingerprints_py``: MurmurHash3 x64-128 (seed 0) in C, same rows.

Batch calls collect pointers to the keys' bytes, then hash with the GIL released, fetching the
next keys' objects ahead of use. :class:`KeyChunk` and :func:`hash_key` are declared in
``_fingerprints_c.pxd`` for the Bloom filter's extension, which hashes its keys with them.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

import numpy as np

from .._checks import check_offsets
from ._fingerprints_py import key_bytes


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL
    bint PyUnicode_Check(object o)
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    object PySequence_Fast(object o, const char* message)
    Py_ssize_t PySequence_Fast_GET_SIZE(object o)
    PyObject** PySequence_Fast_ITEMS(object o)


cdef extern from "_murmur3.h" nogil:
    void cdd_murmur3_x64_128(const void* key, size_t length, uint32_t seed, uint64_t* out)


cdef extern from "_prefetch.h" nogil:
    void cdd_prefetch_read(const void* p)
    void cdd_prefetch_write(const void* p)


# The fingerprint's seed (mmh3's default): part of what a fingerprint is, never changed.
cdef uint32_t HASH_SEED = 0

# Fresh str objects come from L3 or DRAM, two cache lines each (header, characters). Hashing a
# chunk (GIL released) prefetches the next chunk's objects, whose addresses taking this one
# noted (a prefetch is only a hint: harmless if an object is gone by then); taking a key
# prefetches the object this many keys ahead (what a batch's first chunk needs). add_many,
# 1M, new str keys, ns a key: 39.8 with neither, 37.1 with this at 16 (38.5 at 32), 27 with
# both (with the plain ORs of a lone writer; 30 without the next-chunk prefetch).
cdef enum:
    LOAD_AHEAD = 16


cdef inline PyObject* take_key(object item, KeyBytes* out) except NULL:
    """Point ``out`` at ``item``'s bytes; return a new reference to the object that holds them.

    :raises TypeError: for a key that is neither ``str`` nor bytes-like.
    :raises UnicodeEncodeError: for a ``str`` without a UTF-8 form.
    """
    if PyUnicode_Check(item):
        if PyUnicode_IS_COMPACT_ASCII(item):  # canonical URLs: the characters are the UTF-8, no call
            out.data = <const char*>PyUnicode_DATA(item)
            out.size = PyUnicode_GET_LENGTH(item)
        else:
            out.data = PyUnicode_AsUTF8AndSize(item, &out.size)  # encoded once, cached in the str
        owner = item
    elif PyBytes_Check(item):
        out.data = PyBytes_AS_STRING(item)
        out.size = PyBytes_GET_SIZE(item)
        owner = item
    else:
        owner = key_bytes(item)  # other bytes-like: one copy; anything else: TypeError
        out.data = PyBytes_AS_STRING(owner)
        out.size = PyBytes_GET_SIZE(owner)
    Py_INCREF(owner)
    return <PyObject*>owner


cdef int hash_key(object item, uint64_t* out) except -1:
    """Write the ``(h1, h2)`` of one key to ``out``.

    :raises TypeError: for a key that is neither ``str`` nor bytes-like.
    :raises UnicodeEncodeError: for a ``str`` without a UTF-8 form.
    """
    cdef KeyBytes key
    cdef PyObject* owner = take_key(item, &key)
    cdd_murmur3_x64_128(key.data, <size_t>key.size, HASH_SEED, out)
    Py_XDECREF(owner)
    return 0


cdef class KeyChunk:

    def __cinit__(self):
        self.keys = <KeyBytes*>PyMem_Malloc(CHUNK_KEYS * sizeof(KeyBytes))
        self.owners = <PyObject**>PyMem_Malloc(CHUNK_KEYS * sizeof(PyObject*))
        self.hashes = <uint64_t*>PyMem_Malloc(CHUNK_KEYS * 2 * sizeof(uint64_t))
        self.upcoming = <const char**>PyMem_Malloc(CHUNK_KEYS * sizeof(char*))
        self.count = 0
        self.upcoming_count = 0
        if self.keys == NULL or self.owners == NULL or self.hashes == NULL or self.upcoming == NULL:
            raise MemoryError()

    def __dealloc__(self):
        self.release()
        PyMem_Free(self.keys)
        PyMem_Free(self.owners)
        PyMem_Free(self.hashes)
        PyMem_Free(self.upcoming)

    cdef int load(self, object sequence, Py_ssize_t start) except -1:
        """Take the keys from ``start`` on; each keeps a reference while the GIL is released.

        :raises TypeError: for a key that is neither ``str`` nor bytes-like.
        :raises UnicodeEncodeError: for a ``str`` without a UTF-8 form.
        """
        cdef PyObject** items = PySequence_Fast_ITEMS(sequence)
        cdef Py_ssize_t size = PySequence_Fast_GET_SIZE(sequence)
        cdef Py_ssize_t stop = min(start + CHUNK_KEYS, size)
        cdef Py_ssize_t i
        self.release()
        for i in range(start, stop):
            if i + LOAD_AHEAD < stop:
                cdd_prefetch_write(items[i + LOAD_AHEAD])  # the reference count is written
                cdd_prefetch_read(<const char*>items[i + LOAD_AHEAD] + 64)
            self.owners[self.count] = take_key(<object>items[i], &self.keys[self.count])
            self.count += 1
        # Where the next chunk's objects are, so that hashing this one can fetch them meanwhile.
        self.upcoming_count = min(CHUNK_KEYS, size - stop)
        for i in range(self.upcoming_count):
            self.upcoming[i] = <const char*>items[stop + i]
        return 0

    cdef void release(self) noexcept:
        cdef Py_ssize_t i
        for i in range(self.count):
            Py_XDECREF(self.owners[i])
        self.count = 0

    cdef void hash_keys(self, uint64_t* out) noexcept nogil:
        """Write the keys' ``(h1, h2)`` rows to ``out``."""
        cdef Py_ssize_t i
        for i in range(self.count):
            if i < self.upcoming_count:  # a hint only: harmless even if the object is gone
                cdd_prefetch_write(self.upcoming[i])
                cdd_prefetch_read(self.upcoming[i] + 64)
            cdd_murmur3_x64_128(self.keys[i].data, <size_t>self.keys[i].size, HASH_SEED, out + 2 * i)


def hash_many(items):
    """Return the ``(n, 2)`` uint64 array of MurmurHash3 x64-128 ``(h1, h2)`` rows of ``items``.

    Equal to the reference's ``hash_many``; hashes with the GIL released.

    :raises TypeError: for an item that is neither ``str`` nor bytes-like.
    :raises UnicodeEncodeError: for a ``str`` without a UTF-8 form.
    """
    sequence = PySequence_Fast(items, "items must be iterable")
    cdef Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence)
    cdef Py_ssize_t start
    hashes = np.empty((count, 2), dtype=np.uint64)
    cdef uint64_t[:, ::1] out = hashes
    cdef KeyChunk chunk = KeyChunk()
    for start in range(0, count, CHUNK_KEYS):
        chunk.load(sequence, start)
        with nogil:
            chunk.hash_keys(&out[start, 0])
    return hashes


ctypedef fused Offset:
    int32_t
    int64_t


cdef bint _offsets_fit(const Offset[::1] offsets, Py_ssize_t size) noexcept nogil:
    """Whether the offsets ascend from 0 or more to at most ``size`` (``check_offsets``' rule)."""
    cdef Py_ssize_t i
    cdef int64_t previous = 0
    for i in range(offsets.shape[0]):
        if offsets[i] < previous or offsets[i] > size:
            return False
        previous = offsets[i]
    return offsets.shape[0] > 0


def hash_buffers(const Offset[::1] offsets, const unsigned char[::1] data):
    """Return the ``(n, 2)`` rows of the keys of a column in Arrow's layout (key ``i`` is
    ``data[offsets[i]:offsets[i + 1]]``), hashed without the GIL; equal to the reference's.

    :raises ValueError: for offsets that do not ascend within ``data``.
    """
    cdef Py_ssize_t count = offsets.shape[0] - 1, i, size = data.shape[0]
    cdef const unsigned char* text = &data[0] if size else <const unsigned char*>b""
    cdef bint fit
    with nogil:
        fit = _offsets_fit(offsets, size)
    if not fit:
        check_offsets(np.asarray(offsets).tolist(), size)  # raises, naming the offset
    hashes = np.empty((count, 2), dtype=np.uint64)
    if count == 0:
        return hashes
    cdef uint64_t[:, ::1] out = hashes
    with nogil:
        for i in range(count):
            cdd_murmur3_x64_128(text + offsets[i], <size_t>(offsets[i + 1] - offsets[i]), HASH_SEED, &out[i, 0])
    return hashes
