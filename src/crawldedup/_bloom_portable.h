/* The few things the probe loop needs that C does not spell the same way everywhere:
 * an atomic byte OR (processes sharing one file never lose a bit), a prefetch hint, and the
 * multiply-shift block choice without a 128-bit type. */
#ifndef CRAWLDEDUP_BLOOM_PORTABLE_H
#define CRAWLDEDUP_BLOOM_PORTABLE_H

#include <stdint.h>

#if defined(_MSC_VER)
#include <intrin.h>
#define CDD_PINLINE static __forceinline
CDD_PINLINE uint8_t cdd_atomic_or_u8(uint8_t *p, uint8_t mask) {
    return (uint8_t)_InterlockedOr8((volatile char *)p, (char)mask);
}
#if defined(_M_X64) || defined(_M_IX86)
#include <xmmintrin.h>
#define cdd_prefetch_read(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#define cdd_prefetch_write(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#else
#define cdd_prefetch_read(p) ((void)(p))
#define cdd_prefetch_write(p) ((void)(p))
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define CDD_PINLINE static inline
CDD_PINLINE uint8_t cdd_atomic_or_u8(uint8_t *p, uint8_t mask) {
    /* Relaxed is enough: bits only go from 0 to 1 and no other data is published with them. */
    return __atomic_fetch_or(p, mask, __ATOMIC_RELAXED);
}
#define cdd_prefetch_read(p) __builtin_prefetch((p), 0, 3)
#define cdd_prefetch_write(p) __builtin_prefetch((p), 1, 3)
#else
#error "crawldedup's extension needs GCC, Clang or MSVC for atomic OR; install with CRAWLDEDUP_NO_EXTENSIONS=1"
#endif

/* (h * n) >> 64 for n < 2**32, from 32-bit halves: exact, and the same on every compiler. */
CDD_PINLINE uint64_t cdd_mulhi_u64_u32(uint64_t h, uint64_t n) {
    return ((h >> 32) * n + (((h & 0xFFFFFFFFULL) * n) >> 32)) >> 32;
}

#endif
