/* A prefetch hint spelled for each compiler (a no-op where it has none): the key loops fetch
 * the objects they will read next while hashing the ones they hold. */
#ifndef CRAWLDEDUP_PREFETCH_H
#define CRAWLDEDUP_PREFETCH_H

#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#include <xmmintrin.h>
#define cdd_prefetch_read(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#define cdd_prefetch_write(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#elif defined(__GNUC__) || defined(__clang__)
#define cdd_prefetch_read(p) __builtin_prefetch((p), 0, 3)
#define cdd_prefetch_write(p) __builtin_prefetch((p), 1, 3)
#else
#define cdd_prefetch_read(p) ((void)(p))
#define cdd_prefetch_write(p) ((void)(p))
#endif

#endif
