# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True, embedsignature=True
"""The compiled fast path of URL canonicalization (docs/canonical-policy.md), for the common URL.

It works on the input's UTF-8 bytes in one buffer: an ``http``/``https`` URL with a host, given
absolute or resolved against a base, is split, its host lowercased and checked, its port
normalized, its path percent-normalized with dot segments and trailing slashes removed, its
query form-decoded, filtered by the policy's tracking keys, re-encoded and sorted, and its
fragment dropped, all in C; a wrapped share link is unwrapped first. An authority that is not a plain ASCII host name (IDNA, IPv6,
``strip_www``, kept user info) goes through the reference's own cached function.

Everything else it declines, and :mod:`crawldedup._canonical` (the typed reference) does the
work: control characters, other schemes, a missing host, an invalid host or port,
non-ASCII ``bytes``, ``str`` subclasses, and the policies ``merge_schemes``,
``lowercase_path``, ``keep_fragment`` (with a fragment) and ``semicolon_separator`` (with a
``;`` in the query), and the same options of a host rule on its hosts. It never raises ``InvalidURL`` itself: an input it cannot prove valid goes
to the reference, which names the problem. tests/test_canonical_differential.py holds the two
to the same answers.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyTypeObject
from cpython.ref cimport PyObject, Py_INCREF
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport free, malloc, qsort, realloc
from libc.string cimport memchr, memcmp, memcpy, memmove, memset

from . import _canonical_py as reference
from .policy import DEFAULT_POLICY, CanonicalPolicy, Canonicalized, InvalidURL

__all__ = ["canonicalize", "canonicalize_many", "fast_canonicalize"]


cdef extern from "Python.h":
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    object PyUnicode_DecodeLatin1(const char* s, Py_ssize_t size, const char* errors)
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    object PyUnicode_AsUTF8String(object o)
    # The same reads on a borrowed pointer, for a batch read without the GIL (its references held).
    PyTypeObject* _type_of "Py_TYPE"(PyObject* o) nogil
    bint _is_compact_ascii "PyUnicode_IS_COMPACT_ASCII"(PyObject* o) nogil
    void* _text_data "PyUnicode_DATA"(PyObject* o) nogil
    Py_ssize_t _text_length "PyUnicode_GET_LENGTH"(PyObject* o) nogil
    char* _bytes_data "PyBytes_AS_STRING"(PyObject* o) nogil
    Py_ssize_t _bytes_length "PyBytes_GET_SIZE"(PyObject* o) nogil
    int _text_kind "PyUnicode_KIND"(PyObject* o) nogil
    uint32_t _read_char "PyUnicode_READ"(int kind, const void* data, Py_ssize_t index) nogil
    object PyList_New(Py_ssize_t size)
    void PyList_SET_ITEM(object o, Py_ssize_t index, PyObject* item)
    PyObject** PySequence_Fast_ITEMS(object o)


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define cdd_prefetch_object(p) __builtin_prefetch((const void*)(p), 1)
    #else
    #define cdd_prefetch_object(p) ((void)(p))
    #endif
    """
    void cdd_prefetch_object(const void* p) nogil


cdef extern from *:
    """
    /* A table entry's version (a seqlock): written with the GIL, read with or without it. */
    #if defined(_MSC_VER)
    #include <intrin.h>
    #define cdd_version_load(p) ((uint64_t)_InterlockedCompareExchange64((volatile __int64 *)(p), 0, 0))
    #define cdd_version_store(p, v) ((void)_InterlockedExchange64((volatile __int64 *)(p), (__int64)(v)))
    #define cdd_fence() MemoryBarrier()
    #else
    #define cdd_version_load(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
    #define cdd_version_store(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
    #define cdd_fence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
    #endif
    """
    uint64_t cdd_version_load(const uint64_t* p) nogil
    void cdd_version_store(uint64_t* p, uint64_t v) nogil
    void cdd_fence() nogil


# Character classes of one byte (docs/canonical-policy.md rules 4, 5, 7, 8).
cdef enum:
    UNRESERVED = 1   # A-Z a-z 0-9 - . _ ~ : raw in paths and queries, decoded from escapes
    PATH_RAW = 2     # pchar and "/" (RFC 3986 §3.3): may stay raw in a path
    SCHEME_CHAR = 4  # letters, digits, "+", "-", "."
    HOST_CHAR = 8    # letters, digits, "-", "_", "."
    ALPHA = 16

cdef unsigned char CHAR_CLASS[256]
cdef signed char HEX_VALUE[256]
cdef const char* HEX_UPPER = b"0123456789ABCDEF"

cdef int _byte
for _byte in range(256):
    CHAR_CLASS[_byte] = 0
    HEX_VALUE[_byte] = -1
for _byte in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz":
    CHAR_CLASS[_byte] |= ALPHA
for _byte in reference.UNRESERVED.encode("ascii"):
    CHAR_CLASS[_byte] |= UNRESERVED | PATH_RAW
for _byte in b"!$&'()*+,;=:@/":
    CHAR_CLASS[_byte] |= PATH_RAW
for _byte in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-.":
    CHAR_CLASS[_byte] |= SCHEME_CHAR
for _byte in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.":
    CHAR_CLASS[_byte] |= HOST_CHAR
# Bytes the fast path leaves to the reference, by [policy 2][bytes input]: any control
# character (rule 1), non-ASCII bytes (to be checked as UTF-8; a str's UTF-8 is valid), and
# under policy 2 a backslash (read as "/" in the authority and path).
cdef unsigned char DECLINED[4][256]
for _table in range(4):
    for _byte in range(256):
        DECLINED[_table][_byte] = _byte < 0x20 or _byte == 0x7F or (_byte >= 0x80 and _table % 2 == 1) \
            or (_byte == 92 and _table >= 2)
for _byte in range(10):
    HEX_VALUE[48 + _byte] = _byte
for _byte in range(6):
    HEX_VALUE[65 + _byte] = 10 + _byte
    HEX_VALUE[97 + _byte] = 10 + _byte

# Inputs up to ~1,000 bytes (nearly every URL) work in a stack buffer; longer ones allocate.
cdef enum:
    STACK_BYTES = 8192
    STACK_PAIRS = 64
    MAX_LABEL = 63
    # A non-ASCII str of up to this many characters is encoded to UTF-8 on the stack.
    ENCODED_CHARS = 512
    # Plans are cached per policy object; a process rarely holds more than a few policies.
    MAX_PLANS = 64
    # Each plan keeps the authorities the reference wrote for it (IDNA, IPv6...) in a
    # direct-mapped table, those of up to CACHED_AUTHORITY bytes: a crawl sees few hosts often.
    AUTHORITY_SLOTS = 256
    CACHED_AUTHORITY = 64


ctypedef struct Pair:
    const unsigned char* key
    Py_ssize_t key_len
    const unsigned char* value
    Py_ssize_t value_len


ctypedef struct Parts:
    bint https
    bint fragment              # a non-empty one, dropped (a host rule may keep it)
    const unsigned char* authority
    Py_ssize_t authority_len
    const unsigned char* path
    Py_ssize_t path_len
    const unsigned char* query
    Py_ssize_t query_len       # -1: no "?" at all


ctypedef struct KeyTable:
    # Open addressing on FNV-1a: (offset in blob, length) per slot, length 0 for an empty slot
    # (names are never empty); at least one slot stays empty, so a probe always ends.
    const unsigned char* blob
    Py_ssize_t* slots
    size_t mask


ctypedef struct AuthorityEntry:
    uint64_t version              # odd while it is written
    Py_ssize_t key_len            # 0: an empty slot
    bint https
    Py_ssize_t value_len          # DECLINE: the reference refuses the authority
    unsigned char key[CACHED_AUTHORITY]
    unsigned char value[3 * CACHED_AUTHORITY + 16]


ctypedef struct CPlan:
    # A policy as the fast path reads it, in C only: what runs without the GIL.
    bint accept_http, accept_https, strip_trailing_slash, semicolon_separator
    bint keep_fragment, keep_userinfo, strip_www, filters, has_keep
    # Policy 2: http and https read as browsers do; every input where that reading could differ
    # from RFC 3986's (a backslash, a host ending in a number) is declined.
    bint whatwg
    # Policy 2 checks an ASCII host's A-labels ("xn--") by UTS #46; policy 3 (``domains``)
    # lowercases them as the URL Standard does.
    bint a_labels, domains
    # Hosts with a rule of their own (host_rules), by pattern, and the plan of each pattern's
    # hosts by its slot in rule_hosts (NULL: declined). rule_suffixes holds the patterns' ends
    # at a label ("example" and "shop.example" of "shop.example"), with their lengths (a bit
    # per length, bit 63: 63 or longer): a host is read from its last label on, and no
    # further than an end no pattern has.
    bint has_rules
    KeyTable rule_hosts, rule_suffixes
    uint64_t suffix_lengths
    const CPlan** rule_plans
    Py_ssize_t max_length, prefix_count
    const unsigned char* prefix_blob
    Py_ssize_t* prefix_bounds  # (start in prefix_blob, length) per prefix
    # By first byte, the lengths of the drop keys starting with it (bit 63: 63 or longer), so
    # that a key reaches the table only when it could be in it.
    uint64_t drop_lengths[256]
    KeyTable drop_keys, keep_keys
    # Written with the GIL held, read with or without it (see _cached_authority).
    AuthorityEntry* authorities


ctypedef struct CBase:
    # A usable base's raw parts, as UTF-8 bytes.
    bint https, has_query
    const unsigned char* authority
    Py_ssize_t authority_len
    const unsigned char* path
    Py_ssize_t path_len
    const unsigned char* query
    Py_ssize_t query_len


# What the fast path returns instead of a length: the reference decides (DECLINE); the host
# needs the reference's cached rules, which take the GIL (NEEDS_PYTHON, only when called
# without leave to take it); the URL is a wrapped share link, to be unwrapped (WRAPPED).
cdef enum:
    DECLINE = -1
    NEEDS_PYTHON = -2
    WRAPPED = -3


cdef inline size_t _fnv(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    cdef uint64_t h = 14695981039346656037ULL
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ s[i]) * 1099511628211ULL
    return <size_t>h


cdef bytes _fill_table(KeyTable* table, object names):
    """Builds ``table`` from latin-1 text names; returns the blob it points into (to be held)."""
    cdef list encoded = sorted(name.encode("latin-1") for name in names)
    cdef bytes blob = b"".join(encoded)
    cdef size_t size = 1, slot
    cdef Py_ssize_t offset = 0
    cdef bytes name
    while size < <size_t>(2 * len(encoded) + 1):
        size *= 2
    table.slots = <Py_ssize_t*>PyMem_Malloc(2 * size * sizeof(Py_ssize_t))
    if table.slots == NULL:
        raise MemoryError()
    memset(table.slots, 0, 2 * size * sizeof(Py_ssize_t))
    table.mask = size - 1
    table.blob = <const unsigned char*>PyBytes_AS_STRING(blob)
    for name in encoded:
        slot = _fnv(<const unsigned char*>PyBytes_AS_STRING(name), len(name)) & table.mask
        while table.slots[2 * slot + 1] != 0:
            slot = (slot + 1) & table.mask
        table.slots[2 * slot] = offset
        table.slots[2 * slot + 1] = len(name)
        offset += len(name)
    return blob


cdef inline Py_ssize_t _table_slot(const KeyTable* table, const unsigned char* key, Py_ssize_t n) noexcept nogil:
    """The slot of ``key`` in ``table``, or -1."""
    cdef size_t slot = _fnv(key, n) & table.mask
    while table.slots[2 * slot + 1] != 0:
        if table.slots[2 * slot + 1] == n and memcmp(table.blob + table.slots[2 * slot], key, n) == 0:
            return <Py_ssize_t>slot
        slot = (slot + 1) & table.mask
    return -1


cdef inline bint _in_table(const KeyTable* table, const unsigned char* key, Py_ssize_t n) noexcept nogil:
    return _table_slot(table, key, n) >= 0


cdef class _Plan:
    """A policy turned into what the fast path reads, or ``usable = False`` to decline it."""

    cdef object policy
    cdef bint usable
    cdef CPlan c
    cdef bytes prefix_blob, drop_blob, keep_blob, rule_blob, suffix_blob  # what c points into
    cdef list rule_plan_objects  # the plans c.rule_plans points into

    def __cinit__(self):
        self.c.prefix_bounds = NULL
        self.c.drop_keys.slots = NULL
        self.c.keep_keys.slots = NULL
        self.c.rule_hosts.slots = NULL
        self.c.rule_suffixes.slots = NULL
        self.c.rule_plans = NULL
        self.c.authorities = NULL

    def __dealloc__(self):
        PyMem_Free(self.c.authorities)
        PyMem_Free(self.c.prefix_bounds)
        PyMem_Free(self.c.drop_keys.slots)
        PyMem_Free(self.c.keep_keys.slots)
        PyMem_Free(self.c.rule_hosts.slots)
        PyMem_Free(self.c.rule_suffixes.slots)
        PyMem_Free(self.c.rule_plans)

    def __init__(self, policy, bint of_rule=False):
        """``of_rule``: the plan of a host rule's policy, read after the authority is written by
        its policy's plan (so it keeps no authorities of its own)."""
        self.policy = policy
        self.usable = not (policy.merge_schemes or policy.lowercase_path)
        self.c.accept_http = "http" in policy.schemes
        self.c.accept_https = "https" in policy.schemes
        self.c.strip_trailing_slash = policy.strip_trailing_slash
        self.c.semicolon_separator = policy.semicolon_separator
        self.c.keep_fragment = policy.keep_fragment
        self.c.keep_userinfo = policy.keep_userinfo
        self.c.strip_www = policy.strip_www
        self.c.max_length = policy.max_length
        self.c.whatwg = policy.version >= 2
        self.c.a_labels = policy.version == 2
        self.c.domains = policy.version >= 3
        self.c.has_rules = bool(policy.host_rules)
        self._plan_rules(policy)
        # The reference's own derived lookups (latin-1 text of each name's UTF-8 bytes).
        self.c.filters = policy.filters_query
        self.c.has_keep = bool(policy.query_keep_keys)
        self.drop_blob = _fill_table(&self.c.drop_keys, policy.query_drop_keys)
        self.keep_blob = _fill_table(&self.c.keep_keys, policy.query_keep_keys)
        for first in range(256):
            self.c.drop_lengths[first] = 0
        for key in policy.query_drop_keys:
            self.c.drop_lengths[ord(key[0])] |= _length_bit(len(key))
        prefixes = policy.query_drop_starts
        self.prefix_blob = "".join(prefixes).encode("latin-1")
        self.c.prefix_blob = <const unsigned char*>PyBytes_AS_STRING(self.prefix_blob)
        self.c.prefix_count = len(prefixes)
        self.c.prefix_bounds = <Py_ssize_t*>PyMem_Malloc((2 * len(prefixes) + 1) * sizeof(Py_ssize_t))
        if not of_rule:
            self.c.authorities = <AuthorityEntry*>PyMem_Malloc(AUTHORITY_SLOTS * sizeof(AuthorityEntry))
            if self.c.authorities == NULL:
                raise MemoryError()
            memset(self.c.authorities, 0, AUTHORITY_SLOTS * sizeof(AuthorityEntry))
        if self.c.prefix_bounds == NULL:
            raise MemoryError()
        start = 0
        for index, prefix in enumerate(prefixes):
            self.c.prefix_bounds[2 * index] = start
            self.c.prefix_bounds[2 * index + 1] = len(prefix)
            start += len(prefix)


    cdef _plan_rules(self, object policy):
        """A plan per host rule (``policy.for_host`` of its pattern), by the pattern's slot. A
        rule the fast path cannot follow (``lowercase_path``) gets NULL: its hosts are declined."""
        cdef Py_ssize_t slot
        cdef _Plan ruled
        cdef bytes match
        matches = [rule.match for rule in policy.host_rules]
        suffixes = set()
        for pattern in matches:  # its ends at a label, as for_host walks a host
            suffixes.add(pattern)
            while "." in pattern:
                pattern = pattern[pattern.find(".") + 1 :]
                suffixes.add(pattern)
        self.rule_blob = _fill_table(&self.c.rule_hosts, matches)
        self.suffix_blob = _fill_table(&self.c.rule_suffixes, suffixes)
        self.c.suffix_lengths = 0
        for suffix in suffixes:
            self.c.suffix_lengths |= _length_bit(len(suffix))
        self.rule_plan_objects = []
        if not matches:
            return
        self.c.rule_plans = <const CPlan**>PyMem_Malloc((self.c.rule_hosts.mask + 1) * sizeof(CPlan*))
        if self.c.rule_plans == NULL:
            raise MemoryError()
        memset(self.c.rule_plans, 0, (self.c.rule_hosts.mask + 1) * sizeof(CPlan*))
        for rule in policy.host_rules:
            match = rule.match.encode("ascii")
            ruled = _Plan(policy.for_host(rule.match), True)
            self.rule_plan_objects.append(ruled)
            slot = _table_slot(&self.c.rule_hosts, <const unsigned char*>PyBytes_AS_STRING(match), len(match))
            if ruled.usable:
                self.c.rule_plans[slot] = &ruled.c


cdef class _BaseView:
    """A validated base's raw parts (from the reference's cache), as UTF-8 bytes."""

    cdef bint usable
    cdef CBase c
    cdef bytes authority, path, query  # what c points into

    def __init__(self, parts):
        scheme, authority, path, query = parts
        scheme = scheme.lower()
        self.usable = scheme in ("http", "https") and authority is not None
        self.c.https = scheme == "https"
        try:
            self.authority = (authority or "").encode("utf-8")
            self.path = path.encode("utf-8")
            self.c.has_query = query is not None
            self.query = (query or "").encode("utf-8")
        except UnicodeEncodeError:  # accepted bases are valid text; decline rather than guess
            self.usable = False
            return
        self.c.authority = <const unsigned char*>PyBytes_AS_STRING(self.authority)
        self.c.authority_len = len(self.authority)
        self.c.path = <const unsigned char*>PyBytes_AS_STRING(self.path)
        self.c.path_len = len(self.path)
        self.c.query = <const unsigned char*>PyBytes_AS_STRING(self.query)
        self.c.query_len = len(self.query)


cdef dict _plans = {}
# The last (policy, plan) and (base parts, view): one tuple each, replaced in one assignment,
# so that another thread never sees a policy paired with another policy's plan.
cdef tuple _last_plan = (None, None)
cdef tuple _last_base = (None, None)
cdef tuple _last_checked = (None, None, None)


cdef _Plan _plan_for(object policy):
    """The plan of ``policy`` (None for the default), or None when the fast path declines it."""
    global _last_plan
    cdef _Plan plan
    cdef tuple last = _last_plan
    if policy is None:
        policy = DEFAULT_POLICY
    if policy is last[0]:
        plan = last[1]
    else:
        if type(policy) is not CanonicalPolicy:
            return None
        entry = _plans.get(id(policy))
        if entry is not None and entry[0] is policy:
            plan = entry[1]
        else:
            plan = _Plan(policy)
            if len(_plans) >= MAX_PLANS:
                _plans.clear()
            _plans[id(policy)] = (policy, plan)  # holds the policy, so its id stays its own
        _last_plan = (policy, plan)
    return plan if plan.usable else None


cdef object _checked_base(object base, object policy):
    """``reference.check_base(base, policy)``, the last answer kept: a page's links share a base."""
    global _last_checked
    cdef tuple last = _last_checked
    if base is None:
        return None
    if base is last[0] and policy is last[1]:
        return last[2]
    parts = reference.check_base(base, policy)
    _last_checked = (base, policy, parts)  # holds base and policy, so neither id is reused
    return parts


cdef _BaseView _base_view_for(object parts):
    global _last_base
    cdef tuple last = _last_base
    if parts is last[0]:
        return last[1]
    view = _BaseView(parts)
    _last_base = (parts, view)
    return view


cdef inline bint _is_strip(unsigned char c) noexcept nogil:
    # " \t\n\r\f\v" (rule 1): 0x20 and 0x09-0x0D.
    return c == 0x20 or (0x09 <= c <= 0x0D)


cdef inline Py_ssize_t _put_escape(unsigned char* out, Py_ssize_t o, unsigned char byte) noexcept nogil:
    out[o] = 37  # "%"
    out[o + 1] = HEX_UPPER[byte >> 4]
    out[o + 2] = HEX_UPPER[byte & 15]
    return o + 3


cdef Py_ssize_t _write_path(const unsigned char* s, Py_ssize_t n, unsigned char* out, Py_ssize_t o) noexcept nogil:
    """Rule 7's encoding: escapes normalized (a stray "%" is %25), unsafe bytes escaped."""
    cdef Py_ssize_t i = 0
    cdef unsigned char c
    cdef int value
    while i < n:
        c = s[i]
        if c == 37:
            if i + 2 < n and HEX_VALUE[s[i + 1]] >= 0 and HEX_VALUE[s[i + 2]] >= 0:
                value = HEX_VALUE[s[i + 1]] * 16 + HEX_VALUE[s[i + 2]]
                if CHAR_CLASS[value] & UNRESERVED:
                    out[o] = <unsigned char>value
                    o += 1
                else:
                    o = _put_escape(out, o, <unsigned char>value)
                i += 3
                continue
            out[o] = 37
            out[o + 1] = 50
            out[o + 2] = 53
            o += 3
        elif CHAR_CLASS[c] & PATH_RAW:
            out[o] = c
            o += 1
        else:
            o = _put_escape(out, o, c)
        i += 1
    return o


cdef Py_ssize_t _remove_dot_segments(unsigned char* out, Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    """RFC 3986 §5.2.4 in place on an absolute path; returns its new end.

    ``out[start:w]`` always holds "/" + segment for each segment kept so far, so popping one is
    moving ``w`` back to the last "/" (the same segments as the reference's list).
    """
    cdef Py_ssize_t r = start + 1, w = start, segment, length
    cdef bint last
    while True:
        segment = r
        while r < end and out[r] != 47:
            r += 1
        length = r - segment
        last = r == end
        if length == 2 and out[segment] == 46 and out[segment + 1] == 46:
            if w > start:
                w -= 1
                while out[w] != 47:
                    w -= 1
            if last:
                out[w] = 47
                w += 1
        elif length == 1 and out[segment] == 46:
            if last:
                out[w] = 47
                w += 1
        else:
            out[w] = 47
            w += 1
            memmove(out + w, out + segment, length)
            w += length
        if last:
            break
        r += 1
    if w == start:
        out[w] = 47
        w += 1
    return w


cdef Py_ssize_t _form_decode(const unsigned char* s, Py_ssize_t n, unsigned char* out) noexcept nogil:
    """Form data to bytes: "+" is a space, "%XX" a byte, a stray "%" itself (unquote_to_bytes)."""
    cdef Py_ssize_t i = 0, o = 0
    cdef unsigned char c
    while i < n:
        c = s[i]
        if c == 43:
            out[o] = 32
        elif c == 37 and i + 2 < n and HEX_VALUE[s[i + 1]] >= 0 and HEX_VALUE[s[i + 2]] >= 0:
            out[o] = <unsigned char>(HEX_VALUE[s[i + 1]] * 16 + HEX_VALUE[s[i + 2]])
            i += 2
        else:
            out[o] = c
        o += 1
        i += 1
    return o


cdef Py_ssize_t _form_encode(const unsigned char* s, Py_ssize_t n, unsigned char* out) noexcept nogil:
    """Bytes to form data, one way: unreserved raw, space "+", every other byte "%XX"."""
    cdef Py_ssize_t i, o = 0
    cdef unsigned char c
    for i in range(n):
        c = s[i]
        if CHAR_CLASS[c] & UNRESERVED:
            out[o] = c
            o += 1
        elif c == 32:
            out[o] = 43
            o += 1
        else:
            o = _put_escape(out, o, c)
    return o


cdef inline int _compare_bytes(const unsigned char* a, Py_ssize_t a_len,
                               const unsigned char* b, Py_ssize_t b_len) noexcept nogil:
    cdef int order = memcmp(a, b, a_len if a_len < b_len else b_len)
    if order != 0:
        return order
    return (a_len > b_len) - (a_len < b_len)


cdef int _compare_pairs(const void* left, const void* right) noexcept nogil:
    cdef const Pair* a = <const Pair*>left
    cdef const Pair* b = <const Pair*>right
    cdef int order = _compare_bytes(a.key, a.key_len, b.key, b.key_len)
    if order != 0:
        return order
    return _compare_bytes(a.value, a.value_len, b.value, b.value_len)


cdef void _sort_pairs(Pair* pairs, Py_ssize_t count) noexcept nogil:
    """By (key, value) as ASCII; insertion sort for the usual handful, qsort beyond."""
    cdef Py_ssize_t i, j
    cdef Pair item
    if count > 16:
        qsort(pairs, count, sizeof(Pair), _compare_pairs)
        return
    for i in range(1, count):
        item = pairs[i]
        j = i
        while j > 0 and _compare_pairs(&pairs[j - 1], &item) > 0:
            pairs[j] = pairs[j - 1]
            j -= 1
        pairs[j] = item


cdef inline uint64_t _length_bit(Py_ssize_t length) noexcept nogil:
    return (<uint64_t>1) << (length if length < 63 else 63)


cdef bint _is_tracking_key(const CPlan* plan, const unsigned char* folded, Py_ssize_t length) noexcept nogil:
    """Rule 8's filter on a decoded key folded to ASCII lowercase: drop lists, then keep_params."""
    cdef Py_ssize_t index, prefix_len
    cdef bint dropped = False
    for index in range(plan.prefix_count):
        prefix_len = plan.prefix_bounds[2 * index + 1]
        if length >= prefix_len and memcmp(folded, plan.prefix_blob + plan.prefix_bounds[2 * index], prefix_len) == 0:
            dropped = True
            break
    if not dropped and length > 0 and plan.drop_lengths[folded[0]] & _length_bit(length):
        dropped = _in_table(&plan.drop_keys, folded, length)
    if dropped and plan.has_keep:
        dropped = not _in_table(&plan.keep_keys, folded, length)
    return dropped


cdef inline bint _is_unreserved(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if not (CHAR_CLASS[s[i]] & UNRESERVED):
            return False
    return True


cdef Py_ssize_t _write_query(const CPlan* plan, const unsigned char* s, Py_ssize_t n, unsigned char* out,
                             Py_ssize_t o, unsigned char* scratch, unsigned char* decoded, Pair* pairs) noexcept nogil:
    """Rule 8 into ``out`` (with its "?"), or -1 to decline; ``pairs`` holds n // 2 + 2 entries."""
    cdef Py_ssize_t i = 0, part, part_end, key_end, equals, decoded_len, count = 0, k, sc = 0
    cdef const unsigned char* key
    cdef const unsigned char* found
    cdef Py_ssize_t key_len
    if plan.semicolon_separator:
        for k in range(n):
            if s[k] == 59:
                return -1
    while i <= n:
        part = i
        found = <const unsigned char*>memchr(s + i, 38, n - i)
        part_end = n if found == NULL else found - s
        i = part_end + 1
        if part_end == part or (part_end - part == 1 and s[part] == 61):
            continue
        found = <const unsigned char*>memchr(s + part, 61, part_end - part)
        equals = -1 if found == NULL else found - s
        key_end = equals if equals >= 0 else part_end
        # A key or value of unreserved bytes only is its own form encoding: used in place.
        if _is_unreserved(s + part, key_end - part):
            key = s + part
            key_len = decoded_len = key_end - part
            if plan.filters:
                for k in range(decoded_len):
                    decoded[k] = key[k] + 32 if 65 <= key[k] <= 90 else key[k]
        else:
            decoded_len = _form_decode(s + part, key_end - part, decoded)
            key = scratch + sc
            key_len = _form_encode(decoded, decoded_len, scratch + sc)
            sc += key_len
            if plan.filters:
                for k in range(decoded_len):
                    if 65 <= decoded[k] <= 90:
                        decoded[k] += 32
        if plan.filters and _is_tracking_key(plan, decoded, decoded_len):
            continue
        pairs[count].key = key
        pairs[count].key_len = key_len
        if equals < 0:
            pairs[count].value = key
            pairs[count].value_len = 0
        elif _is_unreserved(s + equals + 1, part_end - equals - 1):
            pairs[count].value = s + equals + 1
            pairs[count].value_len = part_end - equals - 1
        else:
            decoded_len = _form_decode(s + equals + 1, part_end - equals - 1, decoded)
            pairs[count].value = scratch + sc
            pairs[count].value_len = _form_encode(decoded, decoded_len, scratch + sc)
            sc += pairs[count].value_len
        count += 1
    if count == 0:
        return o
    _sort_pairs(pairs, count)
    out[o] = 63  # "?"
    o += 1
    for k in range(count):
        if k:
            out[o] = 38
            o += 1
        memcpy(out + o, pairs[k].key, pairs[k].key_len)
        o += pairs[k].key_len
        out[o] = 61
        o += 1
        memcpy(out + o, pairs[k].value, pairs[k].value_len)
        o += pairs[k].value_len
    return o


cdef bint _is_dotted_quad(const unsigned char* h, Py_ssize_t n) noexcept nogil:
    """Whether ``h`` is an IPv4 address as WHATWG writes one: four decimal parts in 0-255 without
    leading zeros (policy 2 keeps it as it is)."""
    cdef Py_ssize_t i, parts = 1, digits = 0
    cdef int value = 0
    for i in range(n):
        if h[i] == 46:
            if digits == 0:
                return False
            parts += 1
            digits = 0
            value = 0
        elif 48 <= h[i] <= 57:
            if digits == 1 and value == 0:
                return False  # a leading zero: octal, for the reference
            value = value * 10 + (h[i] - 48)
            digits += 1
            if value > 255:
                return False
        else:
            return False
    return parts == 4 and digits > 0


cdef Py_ssize_t _write_authority(const CPlan* plan, const Parts* parts, unsigned char* out, Py_ssize_t o,
                                 bint python) noexcept nogil:
    """Rules 5 and 6 into ``out``, or DECLINE (an authority the reference would refuse), or
    NEEDS_PYTHON (one for the reference's rules, when ``python`` is False)."""
    cdef const unsigned char* a = parts.authority
    cdef Py_ssize_t n = parts.authority_len, i, host = 0, colon = -1, end, label = 0, port, digits, start
    cdef bint simple = True
    cdef unsigned char c
    cdef long number
    for i in range(n):
        c = a[i]
        if c == 64:  # "@": user info ends at the last one
            host = i + 1
            colon = -1
        elif c == 58:
            colon = i
        elif c >= 0x80:
            simple = False
    if host == n:
        return -1
    if a[host] == 91 or (plan.keep_userinfo and host > 0):
        simple = False
    if plan.strip_www and n - host >= 4 and (a[host] | 32) == 119 and (a[host + 1] | 32) == 119 \
            and (a[host + 2] | 32) == 119 and a[host + 3] == 46:
        simple = False
    if not simple:
        return _write_reference_authority(plan, parts, out, o, python)
    end = colon if colon >= 0 else n
    if end > host and a[end - 1] == 46:  # one trailing dot goes
        end -= 1
    if end == host:
        return -1
    start = o
    for i in range(host, end):
        c = a[i]
        if c == 46:
            if label == 0:
                return -1
            label = 0
        else:
            if label == 0 and (c | 32) == 120 and plan.a_labels and end - i >= 4 and (a[i + 1] | 32) == 110 \
                    and a[i + 2] == 45 and a[i + 3] == 45:
                # Policy 2: an A-label ("xn--") is checked by UTS #46, in the reference.
                return _write_reference_authority(plan, parts, out, start, python)
            if not (CHAR_CLASS[c] & HOST_CHAR):
                return -1
            label += 1
            if label > MAX_LABEL:
                return -1
            if 65 <= c <= 90:
                c += 32
        out[o] = c
        o += 1
    if label == 0:
        return -1
    # Policy 2, rule 5: a last label that starts with a digit makes an IPv4 address. One in its
    # canonical form (four decimal parts below 256, no leading zero) is written as it is; the
    # reference reads the others (0x7f.1, 3279880203, 1.2.3.4.5).
    if plan.whatwg and 48 <= a[end - label] <= 57 and not _is_dotted_quad(a + host, end - host):
        return -1
    if colon >= 0 and colon + 1 < n:
        port = colon + 1
        for i in range(port, n):
            if not (48 <= a[i] <= 57):
                return -1
        while port < n - 1 and a[port] == 48:
            port += 1
        digits = n - port
        if digits > 5:
            return -1
        number = 0
        for i in range(port, n):
            number = number * 10 + (a[i] - 48)
        if number > 65535:
            return -1
        if number != (443 if parts.https else 80):
            out[o] = 58
            o += 1
            memcpy(out + o, a + port, digits)
            o += digits
    return o


cdef inline AuthorityEntry* _authority_slot(const CPlan* plan, const Parts* parts) noexcept nogil:
    return &plan.authorities[(_fnv(parts.authority, parts.authority_len) + parts.https) % AUTHORITY_SLOTS]


cdef Py_ssize_t _cached_authority(const CPlan* plan, const Parts* parts, unsigned char* out,
                                  Py_ssize_t o) noexcept nogil:
    """The authority the reference wrote before, from the plan's table: its end in ``out``, or
    DECLINE (the reference refused it), or NEEDS_PYTHON (not there, or being written)."""
    cdef AuthorityEntry* entry = _authority_slot(plan, parts)
    cdef uint64_t version = cdd_version_load(&entry.version)
    cdef Py_ssize_t length = entry.value_len
    if version & 1 or entry.key_len != parts.authority_len or entry.https != parts.https \
            or length > 3 * parts.authority_len + 16 \
            or memcmp(entry.key, parts.authority, parts.authority_len) != 0:
        return NEEDS_PYTHON
    if length > 0:
        memcpy(out + o, entry.value, length)
    cdd_fence()
    if cdd_version_load(&entry.version) != version:  # rewritten meanwhile: what was read may be torn
        return NEEDS_PYTHON
    return DECLINE if length < 0 else o + length


cdef Py_ssize_t _write_reference_authority(const CPlan* plan, const Parts* parts, unsigned char* out, Py_ssize_t o,
                                           bint python) noexcept nogil:
    """IDNA, IPv6, strip_www and kept user info: the reference's own (cached) rules 5 and 6,
    from the plan's table, else with the GIL taken for them when ``python`` says that the
    caller holds it (else NEEDS_PYTHON)."""
    cdef Py_ssize_t end = _cached_authority(plan, parts, out, o)
    if end != NEEDS_PYTHON or not python:
        return end
    with gil:
        try:
            return _reference_authority(plan, parts, out, o, _authority_slot(plan, parts))
        except Exception:  # MemoryError and the like: the reference meets it again and raises it
            return DECLINE


cdef Py_ssize_t _reference_authority(const CPlan* plan, const Parts* parts, unsigned char* out, Py_ssize_t o,
                                     AuthorityEntry* entry) except -2:
    """The reference's authority into ``out`` and ``entry`` (a short one), or DECLINE."""
    cdef Py_ssize_t length = DECLINE
    cdef uint64_t version
    scheme = "https" if parts.https else "http"
    try:
        authority = PyUnicode_DecodeUTF8(<const char*>parts.authority, parts.authority_len, NULL)
    except UnicodeDecodeError:
        return DECLINE
    try:
        text = reference.canonical_authority(authority, scheme, scheme, plan.strip_www, plan.keep_userinfo,
                                             plan.whatwg, plan.domains)
    except InvalidURL:
        text = None
    # IDNA and RFC 5952 may write more than they read: keep within the room _canonical_parts reserves.
    if text is not None and PyUnicode_IS_COMPACT_ASCII(text) \
            and PyUnicode_GET_LENGTH(text) <= 3 * parts.authority_len + 16:
        length = PyUnicode_GET_LENGTH(text)
        memcpy(out + o, PyUnicode_DATA(text), length)
    if 0 < parts.authority_len <= CACHED_AUTHORITY:
        # Written with the GIL held throughout (one writer at a time); a reader without it
        # sees the version change and reads again or asks the reference.
        version = entry.version
        cdd_version_store(&entry.version, version + 1)
        cdd_fence()
        entry.key_len = parts.authority_len
        entry.https = parts.https
        memcpy(entry.key, parts.authority, parts.authority_len)
        entry.value_len = length
        if length > 0:
            memcpy(entry.value, out + o, length)
        cdd_version_store(&entry.version, version + 2)
    return DECLINE if length < 0 else o + length


cdef const CPlan* _host_plan(const CPlan* plan, const unsigned char* a, Py_ssize_t n) noexcept nogil:
    """The plan for the host of a written authority: that of the most specific rule matching
    it (the host, else the hosts above it; NULL: a rule the fast path declines), else ``plan``."""
    cdef const CPlan* found = plan
    cdef Py_ssize_t i, start = 0, end = n, slot
    if plan.keep_userinfo:  # the host is after the last "@" (one in user info is escaped)
        for i in range(n - 1, -1, -1):
            if a[i] == 64:
                start = i + 1
                break
    i = end - 1
    while i > start and 48 <= a[i] <= 57:  # a port: digits after a ":" (a host ends otherwise)
        i -= 1
    if i > start and a[i] == 58 and i < end - 1:
        end = i
    # The host's ends at a label, shortest first ("com", "example.com"), as far as some pattern
    # ends so: the last pattern met is the most specific.
    i = end
    while i > start:
        i -= 1  # into the last label, or onto the dot before the end read last
        while i > start and a[i - 1] != 46:
            i -= 1
        if not plan.suffix_lengths & _length_bit(end - i) or not _in_table(&plan.rule_suffixes, a + i, end - i):
            break
        slot = _table_slot(&plan.rule_hosts, a + i, end - i)
        if slot >= 0:
            found = plan.rule_plans[slot]
    return found


cdef Py_ssize_t _canonical_parts(const CPlan* plan, const Parts* parts, unsigned char* work, Py_ssize_t room,
                                 bint python) noexcept nogil:
    """Rules 4-10 for split parts: the canonical string's length in ``work``, or a code."""
    cdef unsigned char* out = work
    cdef unsigned char* scratch = work + 3 * room + 32
    cdef unsigned char* decoded = scratch + 3 * room + 32
    cdef Py_ssize_t o, path_start, query_len = parts.query_len
    cdef unsigned char* dot
    cdef Pair stack_pairs[STACK_PAIRS]
    cdef Pair* pairs = stack_pairs
    if parts.https:
        memcpy(out, b"https://", 8)
        o = 8
    else:
        memcpy(out, b"http://", 7)
        o = 7
    path_start = o
    o = _write_authority(plan, parts, out, o, python)
    if o < 0:
        return o
    if plan.has_rules:  # the rest by the host's rule (which may keep the fragment dropped)
        plan = _host_plan(plan, out + path_start, o - path_start)
        if plan == NULL or (plan.keep_fragment and parts.fragment):
            return DECLINE
    path_start = o
    if parts.path_len == 0:
        out[o] = 47
        o += 1
    else:
        o = _write_path(parts.path, parts.path_len, out, o)
        dot = <unsigned char*>memchr(out + path_start + 1, 46, o - path_start - 1)
        while dot != NULL:
            if (dot - 1)[0] == 47:
                o = _remove_dot_segments(out, path_start, o)
                break
            dot = <unsigned char*>memchr(dot + 1, 46, out + o - dot - 1)
        if plan.strip_trailing_slash and o - path_start > 1 and out[o - 1] == 47:
            while o > path_start and out[o - 1] == 47:
                o -= 1
            if o == path_start:
                o += 1
    if query_len > 0:
        if query_len // 2 + 2 > STACK_PAIRS:
            pairs = <Pair*>malloc((query_len // 2 + 2) * sizeof(Pair))
            if pairs == NULL:
                return DECLINE  # the reference meets the shortage again and raises MemoryError
        o = _write_query(plan, parts.query, query_len, out, o, scratch, decoded, pairs)
        if pairs != stack_pairs:
            free(pairs)
    return o


cdef inline bint _is_wrapped(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    """Rule 2: whether the scheme is followed by "%3A%2F%2F" (hex in either case)."""
    return (n >= 9 and s[0] == 37 and s[1] == 51 and (s[2] | 32) == 97 and s[3] == 37 and s[4] == 50
            and (s[5] | 32) == 102 and s[6] == 37 and s[7] == 50 and (s[8] | 32) == 102)


cdef object _unwrap(const unsigned char* s, Py_ssize_t n):
    """Rule 2: every escape decoded once ("+" stays "+"), as text; None when that is not UTF-8."""
    cdef unsigned char* decoded = <unsigned char*>PyMem_Malloc(n + 1)
    cdef Py_ssize_t i = 0, o = 0
    if decoded == NULL:
        raise MemoryError()
    try:
        while i < n:
            if s[i] == 37 and i + 2 < n and HEX_VALUE[s[i + 1]] >= 0 and HEX_VALUE[s[i + 2]] >= 0:
                decoded[o] = <unsigned char>(HEX_VALUE[s[i + 1]] * 16 + HEX_VALUE[s[i + 2]])
                i += 3
            else:
                decoded[o] = s[i]
                i += 1
            o += 1
        try:
            return PyUnicode_DecodeUTF8(<const char*>decoded, o, NULL)
        except UnicodeDecodeError:
            return None
    finally:
        PyMem_Free(decoded)


cdef inline Py_ssize_t _work_bytes(Py_ssize_t n, const CBase* base) noexcept nogil:
    """The work room that _canonical_bytes needs for an input of ``n`` bytes."""
    if base != NULL:
        n += base.authority_len + base.path_len + base.query_len + 1
    return 8 * n + 128


cdef inline uint64_t _bytes_below(uint64_t word, uint64_t n) noexcept nogil:
    """Nonzero when a byte of ``word`` (each below 0x80) is below ``n`` (at most 0x80)."""
    return (word - 0x0101010101010101ULL * n) & ~word & 0x8080808080808080ULL


cdef bint _has_declined_byte(const unsigned char* s, Py_ssize_t n, bint whatwg, bint is_str) noexcept nogil:
    """Whether ``s`` holds a byte of DECLINED: a control character, a backslash under policy 2,
    a non-ASCII byte of ``bytes`` input. Eight bytes a step: each test below is exact about
    whether such a byte exists (a word with a non-ASCII byte is looked at byte by byte)."""
    cdef const unsigned char* declined = DECLINED[(2 if whatwg else 0) + (0 if is_str else 1)]
    cdef Py_ssize_t i = 0, k
    cdef uint64_t word
    while i + 8 <= n:
        memcpy(&word, s + i, 8)
        if word & 0x8080808080808080ULL:
            for k in range(i, i + 8):
                if declined[s[k]]:
                    return True
        elif _bytes_below(word, 0x20) or _bytes_below(word ^ 0x7F7F7F7F7F7F7F7FULL, 1) \
                or (whatwg and _bytes_below(word ^ 0x5C5C5C5C5C5C5C5CULL, 1)):
            return True
        i += 8
    for k in range(i, n):
        if declined[s[k]]:
            return True
    return False


cdef inline bint _too_long(const CPlan* plan, const unsigned char* s, Py_ssize_t n,
                           Py_ssize_t chars) noexcept nogil:
    """Whether the input, its ends stripped (rule 1), has more characters than max_length:
    asked before any work room is allocated, so a refused input costs no copy of itself."""
    cdef Py_ssize_t start = 0, end = n
    while start < end and _is_strip(s[start]):
        start += 1
    while end > start and _is_strip(s[end - 1]):
        end -= 1
    return chars - (n - (end - start)) > plan.max_length


cdef Py_ssize_t _canonical_bytes(const CPlan* plan, const unsigned char* s, Py_ssize_t n, Py_ssize_t chars,
                                 bint is_str, const CBase* base, bint python, unsigned char* work) noexcept nogil:
    """The fast path for one URL's UTF-8 bytes: the canonical string's length, written at the
    start of ``work`` (``_work_bytes(n, base)`` bytes), or DECLINE, NEEDS_PYTHON or WRAPPED.

    ``chars`` is the input's length in characters; ``base`` is NULL without a usable base.
    """
    cdef Py_ssize_t start = 0, end, i, scheme_end, authority_start, path_start, content_end
    cdef Py_ssize_t room, base_dir
    cdef bint is_relative = False
    cdef const unsigned char* found
    cdef Parts parts
    cdef unsigned char* merged
    # Rule 1: strip the ends (ASCII, so characters and bytes alike), then refuse nothing: any
    # control character, or non-ASCII bytes (to be checked as UTF-8), is the reference's.
    end = n
    while start < end and _is_strip(s[start]):
        start += 1
    while end > start and _is_strip(s[end - 1]):
        end -= 1
    chars -= n - (end - start)
    if end == start or chars > plan.max_length:
        return DECLINE
    if _has_declined_byte(s + start, end - start, plan.whatwg, is_str):
        return DECLINE
    # Rules 2-4: a scheme ends the longest run of scheme characters and must be followed by
    # ":" (so a wrapped "scheme%3A%2F%2F" is never taken for a URL here).
    i = start
    if CHAR_CLASS[s[i]] & ALPHA:
        i += 1
        while i < end and CHAR_CLASS[s[i]] & SCHEME_CHAR:
            i += 1
        if i == end or s[i] != 58:
            if i < end and s[i] == 37:
                # A first segment with an escape: a wrapped link, or left to the reference.
                return WRAPPED if _is_wrapped(s + i, end - i) else DECLINE
            i = start
    if i > start:
        scheme_end = i
        if scheme_end - start == 4 and (s[start] | 32) == 104 and (s[start + 1] | 32) == 116 \
                and (s[start + 2] | 32) == 116 and (s[start + 3] | 32) == 112:
            parts.https = False
        elif scheme_end - start == 5 and (s[start] | 32) == 104 and (s[start + 1] | 32) == 116 \
                and (s[start + 2] | 32) == 116 and (s[start + 3] | 32) == 112 and (s[start + 4] | 32) == 115:
            parts.https = True
        else:
            return DECLINE
        if not (plan.accept_https if parts.https else plan.accept_http):
            return DECLINE
        i = scheme_end + 1
        if end - i < 2 or s[i] != 47 or s[i + 1] != 47:
            return DECLINE
        i += 2
    else:
        if base == NULL:
            return DECLINE
        is_relative = True
        parts.https = base.https
    # The authority (after "//"), the path, the query; the fragment is dropped.
    found = <const unsigned char*>memchr(s + i, 35, end - i)
    content_end = end if found == NULL else found - s  # the fragment from here on
    parts.fragment = end - content_end > 1
    if plan.keep_fragment and parts.fragment:
        return DECLINE
    parts.authority = NULL
    parts.authority_len = 0
    parts.query = NULL
    if not is_relative or (content_end - i >= 2 and s[i] == 47 and s[i + 1] == 47):
        if is_relative:
            i += 2
        authority_start = i
        while i < content_end and s[i] != 47 and s[i] != 63:
            i += 1
        parts.authority = s + authority_start
        parts.authority_len = i - authority_start
    path_start = i
    found = <const unsigned char*>memchr(s + i, 63, content_end - i)
    i = content_end if found == NULL else found - s
    parts.path = s + path_start
    parts.path_len = i - path_start
    parts.query_len = -1
    if i < content_end:
        parts.query = s + i + 1
        parts.query_len = content_end - i - 1
    room = end - start
    if is_relative:
        room += base.authority_len + base.path_len + base.query_len + 1
        if parts.authority == NULL:
            # Rule 3 (RFC 3986 §5.2.2): the base's authority, and its path and query as needed.
            parts.authority = base.authority
            parts.authority_len = base.authority_len
            if parts.path_len == 0:
                parts.path = base.path
                parts.path_len = base.path_len
                if parts.query_len < 0 and base.has_query:
                    parts.query = base.query
                    parts.query_len = base.query_len
            elif parts.path[0] != 47:
                merged = work + 7 * room + 64
                base_dir = base.path_len
                while base_dir > 0 and base.path[base_dir - 1] != 47:
                    base_dir -= 1
                if base.path_len == 0:
                    merged[0] = 47
                    base_dir = 1
                else:
                    memcpy(merged, base.path, base_dir)
                memcpy(merged + base_dir, parts.path, parts.path_len)
                parts.path = merged
                parts.path_len += base_dir
    return _canonical_parts(plan, &parts, work, room, python)


cdef inline object _ascii_text(const unsigned char* s, Py_ssize_t n):
    result = PyUnicode_New(n, 127)
    memcpy(PyUnicode_DATA(result), s, n)
    return result


cdef Py_ssize_t _utf8_into(PyObject* text, unsigned char* out) noexcept nogil:
    """The UTF-8 form of a str (which the caller holds) into ``out`` (4 bytes a character), or
    DECLINE for a str with a surrogate (which has none: the reference names it)."""
    cdef int kind = _text_kind(text)
    cdef const void* data = _text_data(text)
    cdef Py_ssize_t i, o = 0
    cdef uint32_t c
    for i in range(_text_length(text)):
        c = _read_char(kind, data, i)
        if c < 0x80:
            out[o] = <unsigned char>c
            o += 1
        elif c < 0x800:
            out[o] = <unsigned char>(0xC0 | (c >> 6))
            out[o + 1] = <unsigned char>(0x80 | (c & 0x3F))
            o += 2
        elif 0xD800 <= c <= 0xDFFF:
            return DECLINE
        elif c < 0x10000:
            out[o] = <unsigned char>(0xE0 | (c >> 12))
            out[o + 1] = <unsigned char>(0x80 | ((c >> 6) & 0x3F))
            out[o + 2] = <unsigned char>(0x80 | (c & 0x3F))
            o += 3
        else:
            out[o] = <unsigned char>(0xF0 | (c >> 18))
            out[o + 1] = <unsigned char>(0x80 | ((c >> 12) & 0x3F))
            out[o + 2] = <unsigned char>(0x80 | ((c >> 6) & 0x3F))
            out[o + 3] = <unsigned char>(0x80 | (c & 0x3F))
            o += 4
    return o


cdef object _fast(object url, _Plan plan, object base_parts, bint may_unwrap=True):
    """The fast path for one URL: the canonical string, or None when the reference must decide.

    ``may_unwrap`` is False for the text of an unwrapped URL: rule 2 applies once.
    """
    cdef const unsigned char* s
    cdef Py_ssize_t n, chars, length, start = 0
    cdef bint is_str
    cdef _BaseView view
    cdef const CBase* base = NULL
    cdef unsigned char stack_work[STACK_BYTES]
    cdef unsigned char* work = stack_work
    cdef unsigned char encoded[4 * ENCODED_CHARS]
    cdef object utf8
    if type(url) is str:
        is_str = True
        if PyUnicode_IS_COMPACT_ASCII(url):
            s = <const unsigned char*>PyUnicode_DATA(url)
            n = PyUnicode_GET_LENGTH(url)
        elif PyUnicode_GET_LENGTH(url) <= ENCODED_CHARS:
            n = _utf8_into(<PyObject*>url, encoded)
            if n < 0:
                return None
            s = encoded
        else:
            try:
                utf8 = PyUnicode_AsUTF8String(url)
            except UnicodeEncodeError:  # unpaired surrogates
                return None
            s = <const unsigned char*>PyBytes_AS_STRING(utf8)
            n = PyBytes_GET_SIZE(utf8)
        chars = PyUnicode_GET_LENGTH(url)
    elif type(url) is bytes:
        is_str = False
        s = <const unsigned char*>PyBytes_AS_STRING(url)
        n = PyBytes_GET_SIZE(url)
        chars = n
    else:
        return None
    if base_parts is not None:
        view = _base_view_for(base_parts)
        if view.usable:
            base = &view.c
    if _too_long(&plan.c, s, n, chars):
        return None
    if _work_bytes(n, base) > STACK_BYTES:
        work = <unsigned char*>PyMem_Malloc(_work_bytes(n, base))
        if work == NULL:
            raise MemoryError()
    try:
        length = _canonical_bytes(&plan.c, s, n, chars, is_str, base, True, work)
        if length >= 0:
            return _ascii_text(work, length)
    finally:
        if work != stack_work:
            PyMem_Free(work)
    if length == WRAPPED and may_unwrap:
        while n > start and _is_strip(s[n - 1]):
            n -= 1
        while start < n and _is_strip(s[start]):
            start += 1
        unwrapped = _unwrap(s + start, n - start)
        return None if unwrapped is None else _fast(unwrapped, plan, base_parts, False)
    return None


def fast_canonicalize(url, policy=None, base=None):
    """The fast path alone: the canonical string, or None where the reference must decide.

    For tests and measurements; :func:`canonicalize` is the API.

    :param url: a URL (``str`` or ``bytes``).
    :param policy: a :class:`CanonicalPolicy`, or None for the default.
    :param base: as for :func:`canonicalize`.
    :returns: what :func:`crawldedup.reference.canonicalize` returns, or None.
    :raises InvalidURL: the base is not accepted.
    """
    cdef _Plan plan = _plan_for(policy)
    if plan is None:
        return None
    return _fast(url, plan, _checked_base(base, plan.policy))


def canonicalize(url, base=None, policy=None):
    """Returns the one ASCII string that every spelling of ``url``'s page maps to.

    The compiled twin of :func:`crawldedup.reference.canonicalize`: same parameters, results
    and exceptions. The fast path answers the common URL; the reference answers the rest.

    :param url: the URL, as ``str`` or UTF-8 ``bytes``; may be relative when ``base`` is given.
    :param base: an accepted absolute URL that relative references resolve against (RFC 3986 §5.2).
    :param policy: the rules to apply; :data:`DEFAULT_POLICY` when ``None``.
    :returns: ``scheme://host[:port]path[?query][#fragment]``, pure ASCII and idempotent.
    :raises InvalidURL: the URL or the base is not accepted; the message names the problem.
    :raises TypeError: ``url`` or ``base`` is not ``str``/``bytes``, or ``policy`` not a policy.
    """
    cdef _Plan plan = _plan_for(policy)
    if plan is not None:
        # The base is checked first, as the reference does (its parts are cached there).
        result = _fast(url, plan, _checked_base(base, plan.policy))
        if result is not None:
            return result
    return reference.canonicalize(url, base, policy)


def canonicalize_many(urls, base=None, policy=None):
    """Canonicalizes a batch without stopping at a URL that is not accepted.

    The compiled twin of :func:`crawldedup.reference.canonicalize_many`: the fast path takes
    what it can, then the reference takes the rest in one call, errors and all.

    :param urls: an iterable of URLs (``str`` or ``bytes``), not a single string.
    :param base: as for :func:`canonicalize`, validated once for the whole batch.
    :param policy: as for :func:`canonicalize`.
    :returns: ``Canonicalized(urls, errors)``, as the reference returns it.
    :raises InvalidURL: the base is not accepted.
    :raises TypeError: ``urls`` is a single ``str``/``bytes`` or not iterable, or holds an item
        that is not ``str``/``bytes``; ``base`` or ``policy`` has the wrong type.
    """
    cdef _Plan plan = _plan_for(policy)
    if plan is None or isinstance(urls, (str, bytes, bytearray, memoryview)):
        return reference.canonicalize_many(urls, base, policy)
    base_parts = _checked_base(base, plan.policy)
    try:
        items = _own_items(urls)  # our own references: the batch is read without the GIL
    except TypeError:
        return reference.canonicalize_many(urls, base, policy)
    results, positions = _fast_many(items, plan, base_parts)
    errors = {}
    if positions:
        _answer_declined(items, positions, base, policy, plan, results, errors)
    return Canonicalized(results, errors)


# The reference's refusals of declined URLs, by (URL, base, plan): the links a crawl cannot
# fetch (mailto:, javascript:, tel:, "#top", "") come back page after page, and naming the
# problem of each took the reference microseconds (a tenth of a frontier's canonicalization,
# for 1% of its lines). Short URLs only, and at most REFUSALS_KEPT of them (then forgotten).
cdef dict _refusals = {}
cdef Py_ssize_t REFUSALS_KEPT = 4096
cdef Py_ssize_t REFUSAL_MAX_LENGTH = 256


cdef void _answer_declined(list items, list positions, object base, object policy, _Plan plan, list results,
                           dict errors) except *:
    """The reference's answers for the rows at ``positions`` (ascending), a refusal seen before
    copied; ``errors`` gets them in row order, as the reference gives them."""
    cdef dict known = {}
    cdef list asked = []
    for position in positions:
        item = items[position]
        if (type(item) is str or type(item) is bytes) and len(item) <= REFUSAL_MAX_LENGTH:
            refusal = _refusals.get((item, base, plan))
            if refusal is not None:
                known[position] = InvalidURL(*refusal.args)  # each row its own exception
                continue
        asked.append(position)
    if asked:
        answered = reference.canonicalize_many([items[position] for position in asked], base, policy)
        for index, position in enumerate(asked):
            results[position] = answered.urls[index]
            error = answered.errors.get(index)
            if error is None:
                continue
            known[position] = error
            item = items[position]
            if (type(item) is str or type(item) is bytes) and len(item) <= REFUSAL_MAX_LENGTH and error.__cause__ is None:
                if len(_refusals) >= REFUSALS_KEPT:
                    _refusals.clear()
                _refusals[(item, base, plan)] = InvalidURL(*error.args)  # never raised: holds no traceback
    for position in positions:
        error = known.get(position)
        if error is not None:
            errors[position] = error


ctypedef struct Row:
    const unsigned char* s
    Py_ssize_t n, chars
    bint is_str
    Py_ssize_t result  # the canonical length (at offset in the arena) or a code
    Py_ssize_t offset


ctypedef struct Arena:
    unsigned char* data
    Py_ssize_t size, used


# Codes of a row still to be done: its bytes are noted (PENDING), or it is a non-ASCII str
# whose UTF-8 form is made with the GIL (TO_ENCODE).
cdef enum:
    PENDING = -4
    TO_ENCODE = -5
    # Objects are fetched this many items ahead when the batch is copied.
    COPY_AHEAD = 16


cdef list _own_items(object urls):
    """The items of ``urls`` in a list of our own, the objects fetched ahead as it is copied (a
    batch of new URLs is mostly out of cache, and each reference count is written)."""
    cdef PyObject** items
    cdef Py_ssize_t count, i
    cdef list copy
    if type(urls) is not list:
        return list(urls)
    items = PySequence_Fast_ITEMS(urls)
    count = len(<list>urls)
    copy = PyList_New(count)
    for i in range(count):
        if i + COPY_AHEAD < count:
            cdd_prefetch_object(items[i + COPY_AHEAD])
        Py_INCREF(<object>items[i])
        PyList_SET_ITEM(copy, i, items[i])
    return copy


cdef PyTypeObject* STR_TYPE = <PyTypeObject*>str
cdef PyTypeObject* BYTES_TYPE = <PyTypeObject*>bytes


cdef inline void _note_row(PyObject* url, Row* row) noexcept nogil:
    """The bytes of one item (which the caller holds), or why they are not taken here."""
    if _type_of(url) == STR_TYPE:
        row.is_str = True
        row.chars = _text_length(url)
        if _is_compact_ascii(url):
            row.s = <const unsigned char*>_text_data(url)
            row.n = row.chars
            row.result = PENDING
        else:
            row.result = TO_ENCODE
    elif _type_of(url) == BYTES_TYPE:
        row.is_str = False
        row.s = <const unsigned char*>_bytes_data(url)
        row.n = row.chars = _bytes_length(url)
        row.result = PENDING
    else:
        row.result = DECLINE


cdef inline void _run_row(const CPlan* plan, Row* row, const CBase* base, Arena* arena,
                          unsigned char* work) noexcept nogil:
    """Canonicalize a noted row in ``work`` (STACK_BYTES, hot in cache; a long row allocates)
    and append the result to the arena, grown as needed."""
    cdef Py_ssize_t length
    cdef unsigned char* buffer = work
    cdef unsigned char* grown
    if _too_long(plan, row.s, row.n, row.chars):
        row.result = DECLINE
        return
    if _work_bytes(row.n, base) > STACK_BYTES:
        buffer = <unsigned char*>malloc(_work_bytes(row.n, base))
        if buffer == NULL:
            row.result = NEEDS_PYTHON  # _fast meets the shortage and raises
            return
    length = _canonical_bytes(plan, row.s, row.n, row.chars, row.is_str, base, False, buffer)
    if length >= 0 and arena.used + length > arena.size:
        grown = <unsigned char*>realloc(arena.data, 2 * (arena.used + length))
        if grown == NULL:
            length = NEEDS_PYTHON
        else:
            arena.data = grown
            arena.size = 2 * (arena.used + length)
    if length >= 0:
        memcpy(arena.data + arena.used, buffer, length)
        row.offset = arena.used
        arena.used += length
    row.result = length
    if buffer != work:
        free(buffer)


cdef tuple _fast_many(list items, _Plan plan, object base_parts):
    """The fast path for a batch: (results, positions declined to the reference).

    The batch is read and canonicalized into one arena without the GIL (so threads with
    batches of their own run in parallel), then made strings with it. A non-ASCII ``str`` of
    more than ENCODED_CHARS characters is encoded with the GIL first; a host for the reference's rules or a wrapped link is taken one
    at a time by :func:`_fast`.
    """
    cdef Py_ssize_t count = len(items), i, encode = 0
    cdef PyObject** objects = PySequence_Fast_ITEMS(items)
    cdef Row* rows = <Row*>PyMem_Malloc(count * sizeof(Row) + 1)
    cdef Arena arena
    cdef unsigned char work[STACK_BYTES]
    cdef unsigned char encoded[4 * ENCODED_CHARS]
    cdef _BaseView view
    cdef const CBase* base = NULL
    cdef const CPlan* c = &plan.c
    cdef list held = []  # the UTF-8 bytes of non-ASCII str
    cdef list results = [None] * count
    cdef list declined = []
    if rows == NULL:
        raise MemoryError()
    arena.size = 64 * count + 4096  # about a canonical URL a row; grown when short
    arena.used = 0
    arena.data = <unsigned char*>malloc(arena.size)
    if arena.data == NULL:
        PyMem_Free(rows)
        raise MemoryError()
    try:
        if base_parts is not None:
            view = _base_view_for(base_parts)
            if view.usable:
                base = &view.c
        with nogil:
            for i in range(count):
                _note_row(objects[i], &rows[i])
                if rows[i].result == PENDING:
                    _run_row(c, &rows[i], base, &arena, work)
                elif rows[i].result == TO_ENCODE and rows[i].chars <= ENCODED_CHARS:
                    rows[i].n = _utf8_into(objects[i], encoded)
                    rows[i].s = encoded  # taken at once: the next row reuses it
                    if rows[i].n < 0:
                        rows[i].result = DECLINE
                    else:
                        _run_row(c, &rows[i], base, &arena, work)
                elif rows[i].result == TO_ENCODE:
                    encode += 1
        if encode:
            for i in range(count):
                if rows[i].result != TO_ENCODE:
                    continue
                try:
                    utf8 = PyUnicode_AsUTF8String(<object>objects[i])
                except UnicodeEncodeError:  # unpaired surrogates
                    rows[i].result = DECLINE
                    continue
                held.append(utf8)
                rows[i].s = <const unsigned char*>PyBytes_AS_STRING(utf8)
                rows[i].n = PyBytes_GET_SIZE(utf8)
                rows[i].result = PENDING
            with nogil:
                for i in range(count):
                    if rows[i].result == PENDING:
                        _run_row(c, &rows[i], base, &arena, work)
        for i in range(count):
            if rows[i].result >= 0:
                results[i] = _ascii_text(arena.data + rows[i].offset, rows[i].result)
            elif rows[i].result != DECLINE:
                results[i] = _fast(items[i], plan, base_parts)
            if results[i] is None:
                declined.append(i)
        return results, declined
    finally:
        PyMem_Free(rows)
        free(arena.data)


# A text column as Arrow lays one out (offsets and UTF-8 bytes, docs/engines.md): the engines'
# kernels hand its buffers here, so that no row becomes a Python object unless the fast path
# declines it.

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t

import numpy as np

from .._checks import check_offsets


ctypedef fused Offset:
    int32_t
    int64_t


cdef Py_ssize_t _utf8_chars(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    """The characters of ``s`` when it is valid UTF-8 as Python decodes it (no overlong form, no
    surrogate, nothing past U+10FFFF), else -1."""
    cdef Py_ssize_t i = 0, chars = 0, need, k
    cdef unsigned char c
    while i < n:
        c = s[i]
        if c < 0x80:
            i += 1
        else:
            if 0xC2 <= c <= 0xDF:
                need = 1
            elif 0xE0 <= c <= 0xEF:
                need = 2
            elif 0xF0 <= c <= 0xF4:
                need = 3
            else:
                return -1
            if i + need >= n:
                return -1
            if (c == 0xE0 and s[i + 1] < 0xA0) or (c == 0xED and s[i + 1] > 0x9F) \
                    or (c == 0xF0 and s[i + 1] < 0x90) or (c == 0xF4 and s[i + 1] > 0x8F):
                return -1
            for k in range(1, need + 1):
                if s[i + k] & 0xC0 != 0x80:
                    return -1
            i += need + 1
        chars += 1
    return chars


cdef inline bint _is_ascii(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef uint64_t word, high = 0
    while i + 8 <= n:
        memcpy(&word, s + i, 8)
        high |= word
        i += 8
    while i < n:
        high |= s[i]
        i += 1
    return not (high & 0x8080808080808080ULL)


cdef object _row_item(const unsigned char* s, Py_ssize_t n):
    """A declined row as :func:`canonicalize` takes it: ``str``, or ``bytes`` when not UTF-8."""
    try:
        return PyUnicode_DecodeUTF8(<const char*>s, n, NULL)
    except UnicodeDecodeError:
        return PyBytes_FromStringAndSize(<const char*>s, n)


def canonicalize_buffers(const Offset[::1] offsets, const unsigned char[::1] data, runs=None, policy=None):
    """The compiled twin of the reference's ``canonicalize_buffers``: the rows of a text column
    (Arrow's offsets and UTF-8 bytes) canonicalized without the GIL, the declined ones by
    :func:`canonicalize`'s own path, each with the GIL.

    :returns: ``(offsets, data, errors)``: int64 offsets (a numpy array), the canonical bytes and
        the :class:`InvalidURL` of each refused row.
    """
    cdef Py_ssize_t count = offsets.shape[0] - 1, i, start = 0, stop, declined = 0, total = 0, o
    cdef _Plan plan = _plan_for(policy)
    cdef Row* rows
    cdef Arena arena
    cdef unsigned char work[STACK_BYTES]
    cdef _BaseView view
    cdef const CBase* base
    cdef const unsigned char* text = &data[0] if data.shape[0] else <const unsigned char*>b""
    cdef Py_ssize_t max_length
    cdef int64_t[::1] out_offsets
    cdef unsigned char* out
    cdef int64_t previous = 0
    cdef bint fit = count >= 0
    with nogil:
        for i in range(count + 1):  # each row is read where its offsets say: they must hold
            if offsets[i] < previous or offsets[i] > data.shape[0]:
                fit = False
                break
            previous = offsets[i]
    if not fit:
        check_offsets(np.asarray(offsets).tolist(), data.shape[0])  # raises, naming the offset
    if plan is None:  # a policy the fast path declines: the reference's answers, row by row
        found = reference.canonicalize_buffers(offsets, bytes(data), runs, policy)
        return np.asarray(found[0], dtype=np.int64), found[1], found[2]
    max_length = plan.c.max_length
    rows = <Row*>PyMem_Malloc(count * sizeof(Row) + 1)
    arena.size = 64 * count + 4096
    arena.used = 0
    arena.data = <unsigned char*>malloc(arena.size)
    if rows == NULL or arena.data == NULL:
        PyMem_Free(rows)
        free(arena.data)
        raise MemoryError()
    cdef dict results = {}  # row -> canonical str of the rows answered with the GIL
    cdef dict errors = {}
    try:
        for stop, page in runs if runs is not None else ((count, None),):
            if not start <= stop <= count:
                raise ValueError(f"runs must end at ascending rows up to {count}, got {stop}")
            try:
                base_parts = _checked_base(page, plan.policy)
            except InvalidURL as exc:
                for i in range(start, stop):
                    rows[i].result = DECLINE
                    results[i] = ""
                    errors[i] = exc
                start = stop
                continue
            base = NULL
            if base_parts is not None:
                view = _base_view_for(base_parts)
                if view.usable:
                    base = &view.c
            with nogil:
                for i in range(start, stop):
                    rows[i].s = text + offsets[i]
                    rows[i].n = offsets[i + 1] - offsets[i]
                    rows[i].is_str = True
                    rows[i].chars = rows[i].n
                    if not _is_ascii(rows[i].s, rows[i].n):
                        rows[i].chars = _utf8_chars(rows[i].s, rows[i].n)
                    if rows[i].chars < 0:
                        rows[i].result = DECLINE  # not UTF-8: the reference names it
                    else:
                        _run_row(&plan.c, &rows[i], base, &arena, work)
            asked = []
            for i in range(start, stop):
                if rows[i].result < 0:
                    item = _row_item(rows[i].s, rows[i].n)
                    found = _fast(item, plan, base_parts) if rows[i].result != DECLINE else None
                    if found is None:
                        asked.append(i)
                        results[i] = item
                    else:
                        results[i] = found
            if asked:
                items = [results[i] for i in asked]
                answered, refused = [None] * len(asked), {}
                _answer_declined(items, list(range(len(asked))), page, policy, plan, answered, refused)
                for index, i in enumerate(asked):
                    results[i] = answered[index] or ""
                    if index in refused:
                        errors[i] = refused[index]
            start = stop
        if start != count:
            raise ValueError(f"runs must end at the last row ({count}), got {start}")
        # The output, in row order: the arena's bytes, and the strings answered with the GIL.
        offsets_array = np.empty(count + 1, dtype=np.int64)
        out_offsets = offsets_array
        out_offsets[0] = 0
        for i in range(count):
            if rows[i].result < 0:
                rows[i].n = len(<str>results[i])
                declined += 1
            else:
                rows[i].n = rows[i].result
            total += rows[i].n
            out_offsets[i + 1] = total
        joined = PyBytes_FromStringAndSize(NULL, total)
        out = <unsigned char*>PyBytes_AS_STRING(joined)
        if not declined:
            memcpy(out, arena.data, total)
        else:
            for i in range(count):
                if rows[i].result < 0:
                    rows[i].s = <const unsigned char*>PyUnicode_DATA(results[i])  # ASCII
                else:
                    rows[i].s = arena.data + rows[i].offset
            with nogil:
                o = 0
                for i in range(count):
                    memcpy(out + o, rows[i].s, rows[i].n)
                    o += rows[i].n
        return offsets_array, joined, dict(sorted(errors.items()))
    finally:
        PyMem_Free(rows)
        free(arena.data)
