/* What the run kernels need that C does not spell the same way everywhere: little-endian 64-bit
 * loads at any byte (a suffix starts at any bit of the stream), stores, and a prefetch hint. */
#ifndef CRAWLDEDUP_RUNS_PORTABLE_H
#define CRAWLDEDUP_RUNS_PORTABLE_H

#include <stdint.h>
#include <string.h>

#if defined(_MSC_VER)
#include <stdlib.h>
#define CDX_INLINE static __forceinline
#define cdx_bswap64(v) _byteswap_uint64(v)
#if defined(_M_X64) || defined(_M_IX86)
#include <xmmintrin.h>
#define cdx_prefetch(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#else
#define cdx_prefetch(p) ((void)(p))
#endif
#else
#define CDX_INLINE static inline
#define cdx_bswap64(v) __builtin_bswap64(v)
#define cdx_prefetch(p) __builtin_prefetch((p), 0, 3)
#endif

/* The 8 bytes at p as a little-endian integer, on every host (memcpy: no alignment needed). */
CDX_INLINE uint64_t cdx_load_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = cdx_bswap64(v);
#endif
    return v;
}

/* Store v as a little-endian integer in the 8 bytes at p. */
CDX_INLINE void cdx_store_le64(uint8_t *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = cdx_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

#endif
