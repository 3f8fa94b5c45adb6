/* Non-temporal copies for the fbnops kernels (included by _fp.h). */
#ifndef FBNOPS_STREAM_H
#define FBNOPS_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Non-temporal copies of finished output rows.  An output larger than the caches is
 * written with streaming stores, which skip reading each line into the cache before
 * writing it (the read-for-ownership of ordinary stores): one memory pass of the
 * output fewer.  Unaligned head and tail bytes are ordinary stores; fb_stream_fence
 * orders the streamed stores before anything the thread does next. */
#if defined(__AVX__)  /* one body, the widest vector the build has */
#include <immintrin.h>
#define FB_VEC __m256i
#define FB_STREAM(d, s) _mm256_stream_si256((__m256i*)(d), _mm256_loadu_si256((const __m256i*)(s)))
#elif defined(__SSE2__)
#include <emmintrin.h>
#define FB_VEC __m128i
#define FB_STREAM(d, s) _mm_stream_si128((__m128i*)(d), _mm_loadu_si128((const __m128i*)(s)))
#endif
#ifdef FB_STREAM
static inline void fb_stream_copy(void* dst, const void* src, ptrdiff_t nbytes) {
    const ptrdiff_t V = (ptrdiff_t)sizeof(FB_VEC);
    char* d = (char*)dst;
    const char* s = (const char*)src;
    ptrdiff_t head = (V - (ptrdiff_t)((uintptr_t)d & (uintptr_t)(V - 1))) & (V - 1);
    if (head > nbytes) head = nbytes;
    memcpy(d, s, (size_t)head);
    d += head; s += head; nbytes -= head;
    for (; nbytes >= V; nbytes -= V, d += V, s += V)
        FB_STREAM(d, s);
    memcpy(d, s, (size_t)nbytes);
}
static inline void fb_stream_fence(void) { _mm_sfence(); }
#else
static inline void fb_stream_copy(void* dst, const void* src, ptrdiff_t nbytes) { memcpy(dst, src, (size_t)nbytes); }
static inline void fb_stream_fence(void) {}
#endif

/* Ask for the lines of [p, p + nbytes) ahead of their use (a hint: never faults, changes no
 * value).  A channel's planes lie one plane-stride apart, far past what the hardware's stream
 * prefetchers follow; the next channel's planes are requested while this one is applied. */
static inline void fb_prefetch_lines(const void* p, ptrdiff_t nbytes) {
    const char* c = (const char*)p;
    for (ptrdiff_t i = 0; i < nbytes; i += 64) __builtin_prefetch(c + i, 0, 3);
}

#endif
