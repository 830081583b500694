# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True, embedsignature=True
"""SimHash of a text, the compiled twin of ``_simhash_py`` (same words, same shingles, same bits).

The text's words are case-folded and copied as UTF-8 into one buffer, each followed by a
space, so each shingle is one contiguous run of bytes: ASCII eight characters at a time
(``_split``), a run holding any other character by ``str.casefold`` and the Unicode
database (``_put_run``). The shingles are hashed (MurmurHash3 x64-128, ``_murmur3.h``, the
filter's C) and voted with the GIL released. Votes are counted eight bits at a time in byte lanes (``_SPREAD``), flushed before
a lane can overflow: eight additions per shingle instead of 64.
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc
from libc.string cimport memcpy

import numpy as np

from ._simhash_py import mark_ranges
from .policy import DEFAULT_CONTENT_POLICY


cdef extern from "Python.h":
    int PyUnicode_KIND(object o)
    bint PyUnicode_IS_ASCII(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    Py_UCS4 PyUnicode_READ(int kind, void* data, Py_ssize_t index)
    bint Py_UNICODE_ISALNUM(Py_UCS4 ch)
    bint Py_UNICODE_ISDECIMAL(Py_UCS4 ch)


cdef extern from "_murmur3.h" nogil:
    void cdd_murmur3_x64_128_padded(const void* key, size_t length, uint32_t seed, uint64_t* out)
    uint64_t cdd_load_le64(const uint8_t* p)


cdef extern from *:
    """
    #define CDD_ONES 0x0101010101010101ULL
    #define CDD_GATHER 0x0102040810204080ULL
    #if defined(_MSC_VER)
    #include <intrin.h>
    static __forceinline int cdd_ctz64(uint64_t x) { unsigned long i; _BitScanForward64(&i, x); return (int)i; }
    #else
    static inline int cdd_ctz64(uint64_t x) { return __builtin_ctzll(x); }
    #endif
    static inline void cdd_store_le64(uint8_t *p, uint64_t v) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        v = __builtin_bswap64(v);
    #endif
        memcpy(p, &v, 8);
    }
    """
    const uint64_t ONES "CDD_ONES"  # one in each byte
    const uint64_t GATHER "CDD_GATHER"  # (x * GATHER) >> 56: bit j is bit 8 j of x (x in ONES)
    int cdd_ctz64(uint64_t x) nogil  # x != 0
    void cdd_store_le64(uint8_t* p, uint64_t v) nogil


cdef enum:
    MAX_CODE_POINT = 0x10FFFF
    # _split folds the rest of a text in one call after more than DENSE_RUNS runs outside
    # ASCII, when they came more often than one per DENSE_SPACING characters.
    DENSE_RUNS = 4
    DENSE_SPACING = 32
    # A byte lane counts at most 255 votes: flush the lanes into 64 wide counters this often.
    LANE_LIMIT = 255

cdef uint64_t _SPREAD[256]  # byte j of _SPREAD[v] is bit j of v
cdef uint8_t _LATIN1_WORD[256]  # the word characters among the first 256 code points
cdef uint8_t* _marks = NULL  # one bit per code point of category M, built on first need


cdef void _init_tables():
    cdef int v, j
    for v in range(256):
        _SPREAD[v] = 0
        for j in range(8):
            _SPREAD[v] |= (<uint64_t>((v >> j) & 1)) << (8 * j)
    for v in range(256):  # no combining mark lies below U+0300
        _LATIN1_WORD[v] = Py_UNICODE_ISALNUM(<Py_UCS4>v)


_init_tables()


cdef int _build_marks() except -1:
    global _marks
    cdef uint8_t* bitmap = <uint8_t*>calloc(MAX_CODE_POINT // 8 + 1, 1)
    cdef uint32_t code
    if bitmap == NULL:
        raise MemoryError()
    for first, last in mark_ranges():
        for code in range(first, last + 1):
            bitmap[code >> 3] |= 1 << (code & 7)
    _marks = bitmap
    return 0


cdef inline bint _is_word_char(uint32_t c) except -1:
    if c < 256:
        return _LATIN1_WORD[c]
    if Py_UNICODE_ISALNUM(<Py_UCS4>c):
        return True
    if _marks == NULL:
        _build_marks()
    return (_marks[c >> 3] >> (c & 7)) & 1


cdef inline Py_ssize_t _put_utf8(uint8_t* out, uint32_t c) noexcept nogil:
    if c < 0x80:
        out[0] = <uint8_t>c
        return 1
    if c < 0x800:
        out[0] = <uint8_t>(0xC0 | (c >> 6))
        out[1] = <uint8_t>(0x80 | (c & 0x3F))
        return 2
    if c < 0x10000:  # never a surrogate: those are no word characters
        out[0] = <uint8_t>(0xE0 | (c >> 12))
        out[1] = <uint8_t>(0x80 | ((c >> 6) & 0x3F))
        out[2] = <uint8_t>(0x80 | (c & 0x3F))
        return 3
    out[0] = <uint8_t>(0xF0 | (c >> 18))
    out[1] = <uint8_t>(0x80 | ((c >> 12) & 0x3F))
    out[2] = <uint8_t>(0x80 | ((c >> 6) & 0x3F))
    out[3] = <uint8_t>(0x80 | (c & 0x3F))
    return 4


cdef uint64_t _vote(const uint8_t* joined, const Py_ssize_t* starts, const Py_ssize_t* ends,
                    Py_ssize_t num_words, Py_ssize_t size) noexcept nogil:
    """The SimHash of the shingles of ``num_words`` words at ``joined[starts[i]:ends[i]]``;
    ``joined`` has 16 readable bytes after the last word (the hash reads whole words)."""
    cdef Py_ssize_t count = num_words - size + 1 if num_words > size else 1
    cdef Py_ssize_t i, last
    cdef uint64_t lanes[8]
    cdef int64_t ones[64]
    cdef uint64_t digest[2]
    cdef uint64_t h, result = 0
    cdef int k, j, pending = 0
    for k in range(8):
        lanes[k] = 0
    for k in range(64):
        ones[k] = 0
    for i in range(count):
        last = i + size - 1 if i + size - 1 < num_words else num_words - 1
        cdd_murmur3_x64_128_padded(joined + starts[i], <size_t>(ends[last] - starts[i]), 0, digest)
        h = digest[0]
        for k in range(8):
            lanes[k] += _SPREAD[(h >> (8 * k)) & 0xFF]
        pending += 1
        if pending == LANE_LIMIT or i == count - 1:
            for k in range(8):
                for j in range(8):
                    ones[8 * k + j] += (lanes[k] >> (8 * j)) & 0xFF
                lanes[k] = 0
            pending = 0
    for k in range(64):
        if 2 * ones[k] > count:
            result |= (<uint64_t>1) << k
    return result


ctypedef fused unit:  # a character in a str's data: its kind 1, 2 or 4 (the C types of Py_UCS1, 2, 4)
    unsigned char
    unsigned short
    unsigned int


cdef struct Words:
    # The words found so far: joined[starts[i]:ends[i]] for i < count, each followed by a space.
    uint8_t* joined
    Py_ssize_t used  # bytes of joined written
    Py_ssize_t room  # bytes of joined allocated
    Py_ssize_t* starts
    Py_ssize_t* ends
    Py_ssize_t count
    Py_ssize_t word_room  # entries of starts and of ends allocated


cdef int _reserve(Words* words, Py_ssize_t room, Py_ssize_t word_room) except -1:
    cdef void* grown
    if room > words.room:
        grown = PyMem_Realloc(words.joined, room)
        if grown == NULL:
            raise MemoryError()
        words.joined = <uint8_t*>grown
        words.room = room
    if word_room > words.word_room:
        grown = PyMem_Realloc(words.starts, word_room * sizeof(Py_ssize_t))
        if grown == NULL:
            raise MemoryError()
        words.starts = <Py_ssize_t*>grown
        grown = PyMem_Realloc(words.ends, word_room * sizeof(Py_ssize_t))
        if grown == NULL:
            raise MemoryError()
        words.ends = <Py_ssize_t*>grown
        words.word_room = word_room
    return 0


cdef inline uint64_t _fold_ascii8(uint64_t x, uint64_t* word_bits) noexcept nogil:
    """Eight ASCII characters (byte j of ``x`` is character j) as ``_split`` copies them: a word
    character folded (A-Z to a-z), any other a space; bit j of ``word_bits`` is set when
    character j is a word character. SWAR: every byte is below 0x80, so no sum below carries
    into the next byte, and a byte's high bit says whether it passed a bound."""
    cdef uint64_t lower = x | (0x20 * ONES)  # A-Z become a-z; other bytes move, but not into a-z
    cdef uint64_t letters = (lower + 0x1F * ONES) & ~(lower + 0x05 * ONES) & (0x80 * ONES)  # a-z
    cdef uint64_t digits = (x + 0x50 * ONES) & ~(x + 0x46 * ONES) & (0x80 * ONES)  # 0-9
    cdef uint64_t flags = (letters | digits) >> 7  # 0x01 in the bytes of word characters
    word_bits[0] = (flags * GATHER) >> 56  # byte j's flag to bit j
    return ((x | (letters >> 2)) & (flags * 0xFF)) | ((0x20 * ONES) & ~(flags * 0xFF))


cdef inline uint64_t _load8(unit* text, Py_ssize_t offset, Py_ssize_t length, bint whole, bint ascii,
                            uint64_t* wide) noexcept nogil:
    """Characters ``offset`` to ``offset + 7`` as eight bytes, the low seven bits of each (NUL
    past the text's end; ``whole``: all eight lie in the text); bit j of ``wide`` is set when
    character j is not ASCII (``ascii``: none is)."""
    cdef uint64_t x = 0, high = 0
    cdef Py_ssize_t j
    if whole:
        if sizeof(unit) == 1:  # the whole word loaded at once
            x = cdd_load_le64(<const uint8_t*>(text + offset))
            if ascii:
                wide[0] = 0
                return x
            wide[0] = (((x >> 7) & ONES) * GATHER) >> 56
            return x & (0x7F * ONES)
        for j in range(8):
            x |= (<uint64_t>(text[offset + j] & 0x7F)) << (8 * j)
            high |= (<uint64_t>(text[offset + j] >= 0x80)) << j
    else:
        for j in range(min(8, length - offset)):
            x |= (<uint64_t>(text[offset + j] & 0x7F)) << (8 * j)
            high |= (<uint64_t>(text[offset + j] >= 0x80)) << j
    wide[0] = high
    return x


cdef inline uint64_t _fold_block(unit* text, Py_ssize_t base, Py_ssize_t length, bint whole, bint ascii,
                                 uint8_t* folded, uint64_t* wide_bits) noexcept nogil:
    """Fold characters ``base`` to ``base + 63`` into ``folded`` (``whole``: all lie in the
    text); return one bit per word character or character outside ASCII, and set
    ``wide_bits`` to one bit per character outside ASCII."""
    cdef uint64_t bits, wide, word_bits = 0
    cdef Py_ssize_t offset
    cdef int chunk
    wide_bits[0] = 0
    for chunk in range(8):
        offset = base + 8 * chunk
        cdd_store_le64(folded + offset, _fold_ascii8(
            _load8(text, offset, length, whole or offset + 8 <= length, ascii, &wide), &bits))
        word_bits |= (bits | wide) << (8 * chunk)
        wide_bits[0] |= wide << (8 * chunk)
    return word_bits


cdef inline Words _put_word(const uint8_t* folded, Py_ssize_t start, Py_ssize_t end, Words words) noexcept nogil:
    """``words`` with ``folded[start:end]``, a run of ASCII word characters, appended unless it
    is digits only. By value: a copy whose address is never taken stays in registers, where
    the bytes stored through ``words.joined`` cannot alias it."""
    cdef Py_ssize_t j
    if folded[start] <= 57:  # a digit (the only word characters below "a"): maybe digits only
        j = start + 1
        while j < end and folded[j] <= 57:
            j += 1
        if j == end:
            return words
    words.starts[words.count] = words.used
    for j in range(0, end - start, 16):
        memcpy(words.joined + words.used + j, folded + start + j, 16)
    words.used += end - start
    words.ends[words.count] = words.used
    words.count += 1
    words.joined[words.used] = 32
    words.used += 1
    return words


cdef int _split_unicode(int kind, void* data, Py_ssize_t length, Words* words) except -1:
    """Append the words of a case-folded text by the Unicode rules; ``words`` has room for them."""
    cdef Py_ssize_t i, used = words.used, start = 0
    cdef uint32_t c  # a code point as a number (Cython treats Py_UCS4 arithmetic as str)
    cdef bint in_word = False, digits = False
    for i in range(length + 1):
        c = <uint32_t>PyUnicode_READ(kind, data, i) if i < length else 0
        if i < length and _is_word_char(c):
            if not in_word:
                start = used
                in_word = True
                digits = True
            digits = digits and Py_UNICODE_ISDECIMAL(<Py_UCS4>c)
            used += _put_utf8(words.joined + used, c)
        elif in_word:
            in_word = False
            if digits:  # a run of digits only is no word: take it back
                used = start
            else:
                words.starts[words.count] = start
                words.ends[words.count] = used
                words.count += 1
                words.joined[used] = 32
                used += 1
    words.used = used
    return 0


cdef int _put_run(str text, Py_ssize_t start, Py_ssize_t end, Words* words) except -1:
    """Append the words of ``text[start:end]``, a run between ASCII separators that holds a
    character outside ASCII. ``str.casefold`` maps each character alone, so the run folded is
    the run's part of the whole text folded, and ASCII separators fold to themselves: the
    run's words are the text's words there."""
    cdef str folded = text[start:end].casefold()
    cdef Py_ssize_t length = PyUnicode_GET_LENGTH(folded), rest = PyUnicode_GET_LENGTH(text) - end
    # Room for the run's words (4 UTF-8 bytes per character, a word per two) and the rest's
    # (one byte per character), then the 16-byte overshoots of _put_word and the hash.
    _reserve(words, words.used + 4 * length + rest + 64, words.count + (length + rest) // 2 + 4)
    return _split_unicode(PyUnicode_KIND(folded), PyUnicode_DATA(folded), length, words)


cdef inline uint64_t _below(int bit) noexcept nogil:
    return ((<uint64_t>1) << bit) - 1


cdef int _split(unit* text, Py_ssize_t length, bint ascii, PyObject* source, uint8_t* folded,
                Words* words) except -1 nogil:
    """Append the words of ``text`` (the data of ``source``, not folded; ``ascii``: all of it ASCII).

    Per-character work is the SWAR fold of eight ASCII characters at a time into ``folded``
    (the text rounded up to 64 characters, plus 16 bytes), which also gives one bit per
    word character; runs are then found 64 characters at a time from the bits where one starts
    or ends, and copied 16 bytes at a time (``folded`` and ``words.joined`` have room for the
    overshoot). Branching on each character instead mispredicted at each word's end and cost
    twice as much. A character outside ASCII joins the run around it, and a run holding one
    is folded and split by ``_put_run`` with the GIL: ASCII text never takes it, and
    ``str.casefold`` of a whole text outside ASCII cost more than everything else.
    """
    cdef Py_ssize_t base, start = 0
    cdef uint64_t word_bits, wide_bits, edges, before = 0
    cdef bint in_word = False, run_wide = False
    cdef int bit, first = 0  # first: where the run began in this block (0: before it)
    cdef Py_ssize_t slow = 0  # runs given to _put_run
    cdef Words found = words[0]  # in registers; words[0] is kept for _put_run
    for base in range(0, length, 64):
        if base + 64 <= length:  # the same function twice: inlined, each is its own loop
            word_bits = _fold_block(text, base, length, True, ascii, folded, &wide_bits)
        else:
            word_bits = _fold_block(text, base, length, False, ascii, folded, &wide_bits)
        edges = word_bits ^ ((word_bits << 1) | before)  # bit j: character j starts or ends a run
        before = word_bits >> 63
        while edges:
            bit = cdd_ctz64(edges)
            edges &= edges - 1
            in_word = not in_word
            if in_word:
                start = base + bit
                first = bit
                run_wide = False
            elif ascii:
                found = _put_word(folded, start, base + bit, found)
            else:
                run_wide = run_wide or (wide_bits & _below(bit) & ~_below(first)) != 0
                if run_wide:
                    words[0] = found
                    slow += 1
                    if slow > DENSE_RUNS and slow * DENSE_SPACING > start:
                        # Most runs hold characters outside ASCII (Cyrillic, Greek): folding
                        # the rest in one call costs less than folding each run.
                        with gil:
                            _put_run(<str>source, start, length, words)
                        return 0
                    with gil:
                        _put_run(<str>source, start, base + bit, words)
                    found = words[0]
                else:
                    found = _put_word(folded, start, base + bit, found)
        if in_word:
            run_wide = run_wide or (wide_bits & ~_below(first)) != 0
            first = 0
    words[0] = found
    if in_word:
        if run_wide:
            with gil:
                _put_run(<str>source, start, length, words)
        else:
            words[0] = _put_word(folded, start, length, found)
    return 0


cdef uint64_t _simhash(object text, Py_ssize_t size) except? 0:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    cdef Py_ssize_t length = PyUnicode_GET_LENGTH(text)
    if length == 0:
        return 0
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef PyObject* source = <PyObject*>text
    cdef uint64_t result
    cdef Words words
    # An ASCII text's words take at most one byte per character; _put_run makes room for more.
    # Then 16 bytes of overshoot for _put_word's copies and as many the hash may read past the
    # last word; at most one word per two characters, plus one, and _put_word's slot past it.
    words.used = words.count = 0
    words.room = length + 64
    words.word_room = length // 2 + 2
    words.joined = <uint8_t*>PyMem_Malloc(words.room)
    words.starts = <Py_ssize_t*>PyMem_Malloc(words.word_room * sizeof(Py_ssize_t))
    words.ends = <Py_ssize_t*>PyMem_Malloc(words.word_room * sizeof(Py_ssize_t))
    cdef uint8_t* folded = <uint8_t*>PyMem_Malloc((length + 63) // 64 * 64 + 16)
    try:
        if words.joined == NULL or words.starts == NULL or words.ends == NULL or folded == NULL:
            raise MemoryError()
        if PyUnicode_IS_ASCII(text):
            with nogil:
                _split(<unsigned char*>data, length, True, source, folded, &words)
        elif kind == 1:
            _split(<unsigned char*>data, length, False, source, folded, &words)
        elif kind == 2:
            _split(<unsigned short*>data, length, False, source, folded, &words)
        else:
            _split(<unsigned int*>data, length, False, source, folded, &words)
        with nogil:
            result = _vote(words.joined, words.starts, words.ends, words.count, size) if words.count else 0
        return result
    finally:
        PyMem_Free(words.joined)
        PyMem_Free(words.starts)
        PyMem_Free(words.ends)
        PyMem_Free(folded)


cdef Py_ssize_t _shingle_words(object policy) except -1:
    return (DEFAULT_CONTENT_POLICY if policy is None else policy).shingle_words


def simhash(text, policy=None):
    """Return the 64-bit SimHash of ``text`` as an unsigned int; 0 for a text without words.

    :raises TypeError: when ``text`` is not a ``str``.
    """
    return _simhash(text, _shingle_words(policy))


def simhash_many(texts, policy=None):
    """Return the uint64 array of :func:`simhash` of each text.

    :raises TypeError: when ``texts`` is a single string or holds something other than ``str``.
    """
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a sequence of str, got a single " + type(texts).__name__)
    cdef Py_ssize_t size = _shingle_words(policy)
    items = list(texts)
    out = np.empty(len(items), dtype=np.uint64)
    cdef uint64_t[::1] view = out
    cdef Py_ssize_t i
    for i in range(len(items)):
        view[i] = _simhash(items[i], size)
    return out
