# The C surface of the compiled fingerprints, for other extensions (the Bloom filter's batch
# calls take and hash their keys with these, so that a key is hashed one way everywhere).
from cpython.ref cimport PyObject
from libc.stdint cimport uint64_t

# Keys are taken this many at a time through buffers reused for the whole call (64 KiB of
# pointers, 64 KiB of hashes, 32 KiB of next addresses, in L2), so that a key's bytes are
# hashed while still in cache.
cdef enum:
    CHUNK_KEYS = 4096


cdef struct KeyBytes:
    const char* data
    Py_ssize_t size


cdef int hash_key(object item, uint64_t* out) except -1


cdef class KeyChunk:
    """Up to CHUNK_KEYS keys: their bytes (kept alive by references) and their hashes."""

    cdef KeyBytes* keys
    cdef PyObject** owners
    cdef uint64_t* hashes
    cdef Py_ssize_t count
    cdef const char** upcoming
    cdef Py_ssize_t upcoming_count

    cdef int load(self, object sequence, Py_ssize_t start) except -1
    cdef void release(self) noexcept
    cdef void hash_keys(self, uint64_t* out) noexcept nogil
