/* MurmurHash3 x64-128 (Austin Appleby, public domain), equal to mmh3.hash128(key, seed).
 * Blocks are read as little-endian on every host, so h1/h2 never depend on the machine. */
#ifndef CRAWLDEDUP_MURMUR3_H
#define CRAWLDEDUP_MURMUR3_H

#include <stdint.h>
#include <string.h>

#if defined(_MSC_VER)
#define CDD_INLINE static __forceinline
#else
#define CDD_INLINE static inline
#endif

CDD_INLINE uint64_t cdd_rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

CDD_INLINE uint64_t cdd_load_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8); /* unaligned-safe; one mov on x86 and arm64 */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

CDD_INLINE uint64_t cdd_fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

static const uint64_t cdd_murmur3_c1 = 0x87c37b91114253d5ULL, cdd_murmur3_c2 = 0x4cf5ad432745937fULL;

/* The 16-byte blocks of a key into (h1, h2). */
CDD_INLINE void cdd_murmur3_blocks(const uint8_t *data, size_t nblocks, uint64_t *h1, uint64_t *h2) {
    const uint64_t c1 = cdd_murmur3_c1, c2 = cdd_murmur3_c2;
    uint64_t k1, k2;
    size_t i;

    for (i = 0; i < nblocks; i++) {
        k1 = cdd_load_le64(data + i * 16);
        k2 = cdd_load_le64(data + i * 16 + 8);
        k1 *= c1; k1 = cdd_rotl64(k1, 31); k1 *= c2; *h1 ^= k1;
        *h1 = cdd_rotl64(*h1, 27); *h1 += *h2; *h1 = *h1 * 5 + 0x52dce729;
        k2 *= c2; k2 = cdd_rotl64(k2, 33); k2 *= c1; *h2 ^= k2;
        *h2 = cdd_rotl64(*h2, 31); *h2 += *h1; *h2 = *h2 * 5 + 0x38495ab5;
    }
}

/* The tail's words k1 (its bytes 0-7) and k2 (8-14) mixed in, then the finalization. A zero
 * word mixes in as nothing (0 * c = 0), so a tail without bytes 8-14 may pass k2 = 0. */
CDD_INLINE void cdd_murmur3_finish(uint64_t h1, uint64_t h2, uint64_t k1, uint64_t k2, size_t len,
                                   uint64_t *out) {
    const uint64_t c1 = cdd_murmur3_c1, c2 = cdd_murmur3_c2;
    k2 *= c2; k2 = cdd_rotl64(k2, 33); k2 *= c1; h2 ^= k2;
    k1 *= c1; k1 = cdd_rotl64(k1, 31); k1 *= c2; h1 ^= k1;
    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = cdd_fmix64(h1);
    h2 = cdd_fmix64(h2);
    h1 += h2;
    h2 += h1;
    out[0] = h1;
    out[1] = h2;
}

/* out[0] = h1, out[1] = h2: the two halves mmh3.hash64(key, seed, signed=False) returns. */
CDD_INLINE void cdd_murmur3_x64_128(const void *key, size_t len, uint32_t seed, uint64_t *out) {
    const uint8_t *data = (const uint8_t *)key;
    const size_t nblocks = len / 16;
    uint64_t h1 = seed, h2 = seed, k1, k2;

    cdd_murmur3_blocks(data, nblocks, &h1, &h2);
    const size_t tail_len = len & 15;
    const uint8_t *tail = data + nblocks * 16;
    k1 = 0;
    k2 = 0;
    if (tail_len && len >= 16) {
        /* The tail is the end of the last 16 bytes, so whole-word loads stay inside the key:
         * two loads and shifts instead of up to 15 byte loads (~9 against ~11 ns for a 45-byte
         * URL on the reference VM). A shift by 64 is undefined, hence the tail_len cases. */
        const uint8_t *end = data + len;
        if (tail_len > 8) {
            k1 = cdd_load_le64(tail);
            k2 = cdd_load_le64(end - 8) >> (8 * (16 - tail_len));
        } else {
            k1 = cdd_load_le64(end - 8) >> (8 * (8 - tail_len));
        }
    } else {
        switch (tail_len) {
        case 15: k2 ^= (uint64_t)tail[14] << 48; /* fall through */
        case 14: k2 ^= (uint64_t)tail[13] << 40; /* fall through */
        case 13: k2 ^= (uint64_t)tail[12] << 32; /* fall through */
        case 12: k2 ^= (uint64_t)tail[11] << 24; /* fall through */
        case 11: k2 ^= (uint64_t)tail[10] << 16; /* fall through */
        case 10: k2 ^= (uint64_t)tail[9] << 8;   /* fall through */
        case 9: k2 ^= (uint64_t)tail[8];         /* fall through */
        case 8: k1 ^= (uint64_t)tail[7] << 56;   /* fall through */
        case 7: k1 ^= (uint64_t)tail[6] << 48;   /* fall through */
        case 6: k1 ^= (uint64_t)tail[5] << 40;   /* fall through */
        case 5: k1 ^= (uint64_t)tail[4] << 32;   /* fall through */
        case 4: k1 ^= (uint64_t)tail[3] << 24;   /* fall through */
        case 3: k1 ^= (uint64_t)tail[2] << 16;   /* fall through */
        case 2: k1 ^= (uint64_t)tail[1] << 8;    /* fall through */
        case 1: k1 ^= (uint64_t)tail[0];
        }
    }
    cdd_murmur3_finish(h1, h2, k1, k2, len, out);
}

/* cdd_murmur3_x64_128 of a key followed by at least 16 readable bytes (whatever they hold):
 * the tail is read as two whole words and masked, without a branch on its length (the
 * SimHash's shingles, of every length up to a few blocks, mispredicted the switch above). */
CDD_INLINE void cdd_murmur3_x64_128_padded(const void *key, size_t len, uint32_t seed, uint64_t *out) {
    /* cdd_murmur3_tail_mask[n]: the low n bytes of a word, n = 0..8. */
    static const uint64_t cdd_murmur3_tail_mask[9] = {
        0, 0xffULL, 0xffffULL, 0xffffffULL, 0xffffffffULL, 0xffffffffffULL, 0xffffffffffffULL,
        0xffffffffffffffULL, 0xffffffffffffffffULL};
    const uint8_t *data = (const uint8_t *)key;
    const size_t nblocks = len / 16, tail_len = len & 15;
    const size_t low_len = tail_len < 8 ? tail_len : 8;
    const uint8_t *tail = data + nblocks * 16;
    uint64_t h1 = seed, h2 = seed;

    cdd_murmur3_blocks(data, nblocks, &h1, &h2);
    cdd_murmur3_finish(h1, h2, cdd_load_le64(tail) & cdd_murmur3_tail_mask[low_len],
                       cdd_load_le64(tail + 8) & cdd_murmur3_tail_mask[tail_len - low_len], len, out);
}

#endif
