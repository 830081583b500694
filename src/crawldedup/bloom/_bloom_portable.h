/* The few things the probe loop needs that C does not spell the same way everywhere:
 * an atomic 64-bit OR (processes sharing one file never lose a bit), a prefetch hint (_prefetch.h), and the
 * multiply-shift block choice without a 128-bit type. */
#ifndef CRAWLDEDUP_BLOOM_PORTABLE_H
#define CRAWLDEDUP_BLOOM_PORTABLE_H

#include <stdint.h>

#include "_prefetch.h" /* the fingerprints layer's, shared with its key loop */

#if defined(_MSC_VER)
#include <intrin.h>
#define CDD_PINLINE static __forceinline
CDD_PINLINE uint64_t cdd_atomic_or_u64(uint64_t *p, uint64_t mask) {
#if defined(_M_IX86)
    uint64_t old = *(volatile uint64_t *)p, seen;
    while ((seen = (uint64_t)_InterlockedCompareExchange64((volatile __int64 *)p, (__int64)(old | mask), (__int64)old)) != old)
        old = seen;
    return old;
#else
    return (uint64_t)_InterlockedOr64((volatile __int64 *)p, (__int64)mask);
#endif
}
#elif defined(__GNUC__) || defined(__clang__)
#define CDD_PINLINE static inline
CDD_PINLINE uint64_t cdd_atomic_or_u64(uint64_t *p, uint64_t mask) {
    /* Relaxed is enough: bits only go from 0 to 1 and no other data is published with them. */
    return __atomic_fetch_or(p, mask, __ATOMIC_RELAXED);
}
#else
#error "crawldedup's extension needs GCC, Clang or MSVC for atomic OR; install with CRAWLDEDUP_NO_EXTENSIONS=1"
#endif

/* The mask, in memory order, of bit (i & 63) of the block's little-endian word i >> 6: bit i
 * of a block is bit (i & 7) of its byte i >> 3 on every host. */
CDD_PINLINE uint64_t cdd_le_bit(unsigned i) {
    uint64_t mask = (uint64_t)1 << (i & 63);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    mask = __builtin_bswap64(mask);
#endif
    return mask;
}

/* (h * n) >> 64 for n < 2**32, from 32-bit halves: exact, and the same on every compiler. */
CDD_PINLINE uint64_t cdd_mulhi_u64_u32(uint64_t h, uint64_t n) {
    return ((h >> 32) * n + (((h & 0xFFFFFFFFULL) * n) >> 32)) >> 32;
}

#endif
