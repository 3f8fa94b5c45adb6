/* The 16-bit channel runs of the x86-64-v4 build (included by _rows16.h): one channel's run of a
 * channels-first plane, 32 values a step in 512-bit vectors, then the 16-value steps as in every
 * vector build.  On a core that executes 512-bit vectors at full width (AMD Zen 5) a bfloat16 run
 * in L2 took 0.41x the time of the 16-value steps and a float16 one 0.62x (C loops over 16 planes
 * of 28x28, median of 200); float32 runs are bound by L2, not by the vectors (1.05x), and keep
 * their 8-value steps.  Every value goes through fb_apply8's operations in 16 lanes instead of 8,
 * and is narrowed as fb_store_NAME16 narrows it: the same bits. */
#ifndef FBNOPS_RUNS512_H
#define FBNOPS_RUNS512_H

#if FB_BF16_HARDWARE
static inline void fb_put64(void* p, __m512i v) { _mm512_storeu_si512(p, v); }
static inline void fb_put64_nt(void* p, __m512i v) { _mm512_stream_si512((__m512i*)p, v); } /* (p 64-byte aligned) */

/* fb_apply8 on 16 lanes. */
static inline __attribute__((always_inline)) __m512 fb_apply16(int mode, __m512 x, __m512 dy, __m512 A, __m512 B,
                                                               __m512 K, __m512 m) {
    if (mode == FB_APPLY_FULL) return _mm512_mul_ps(A, _mm512_fmadd_ps(B, _mm512_sub_ps(x, m), _mm512_add_ps(dy, K)));
    if (mode == FB_APPLY_B) return _mm512_mul_ps(A, dy);
    return _mm512_fmadd_ps(B, _mm512_sub_ps(x, m), K);
}

/* 32 bfloat16 values as even/odd pairs of 32-bit lanes (as fb_apply_bf16_pairs: shifted up, the
 * even value is a float; masked, the odd one), narrowed by one vcvtne2ps2bf16 into [evens | odds]
 * and interleaved back by one vpermw.  0 (nothing in *r) where a lane is denormal, which the
 * hardware would read as zero: the caller takes the 16-value steps, whose narrowing handles it. */
static inline __attribute__((always_inline)) int fb_apply_bf16x32(int mode, const fb_bf16* a, const fb_bf16* b,
                                                                  __m512 A, __m512 B, __m512 K, __m512 m,
                                                                  __m512i* r) {
    const __m512i upper = _mm512_set1_epi32((int)0xffff0000u);
    const __m512i interleave = _mm512_setr_epi32(  /* word 2k <- evens[k] (word k), 2k + 1 <- odds[k] (16 + k) */
        0 | 16 << 16, 1 | 17 << 16, 2 | 18 << 16, 3 | 19 << 16, 4 | 20 << 16, 5 | 21 << 16, 6 | 22 << 16,
        7 | 23 << 16, 8 | 24 << 16, 9 | 25 << 16, 10 | 26 << 16, 11 | 27 << 16, 12 | 28 << 16, 13 | 29 << 16,
        14 | 30 << 16, 15 | 31 << 16);
    __m512i xa = mode == FB_APPLY_B ? _mm512_setzero_si512() : _mm512_loadu_si512((const void*)a);
    __m512i xb = mode == FB_APPLY_A ? _mm512_setzero_si512() : _mm512_loadu_si512((const void*)b);
    __m512 even = fb_apply16(mode, _mm512_castsi512_ps(_mm512_slli_epi32(xa, 16)),
                             _mm512_castsi512_ps(_mm512_slli_epi32(xb, 16)), A, B, K, m);
    __m512 odd = fb_apply16(mode, _mm512_castsi512_ps(_mm512_and_si512(xa, upper)),
                            _mm512_castsi512_ps(_mm512_and_si512(xb, upper)), A, B, K, m);
    if (!_kortestz_mask16_u8(_mm512_fpclass_ps_mask(even, FB_DENORMAL), _mm512_fpclass_ps_mask(odd, FB_DENORMAL)))
        return 0;
    *r = _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(odd, even));
    return 1;
}

/* 32 float16 values: two 16-lane vectors, each narrowed by vcvtps2ph (as fb_store_half16). */
static inline __attribute__((always_inline)) int fb_apply_halfx32(int mode, const fb_half* a, const fb_half* b,
                                                                  __m512 A, __m512 B, __m512 K, __m512 m,
                                                                  __m512i* r) {
#define FB_HALF16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(p)))
    __m512 v0 = fb_apply16(mode, mode == FB_APPLY_B ? _mm512_setzero_ps() : FB_HALF16(a),
                           mode == FB_APPLY_A ? _mm512_setzero_ps() : FB_HALF16(b), A, B, K, m);
    __m512 v1 = fb_apply16(mode, mode == FB_APPLY_B ? _mm512_setzero_ps() : FB_HALF16(a + 16),
                           mode == FB_APPLY_A ? _mm512_setzero_ps() : FB_HALF16(b + 16), A, B, K, m);
#undef FB_HALF16
    __m256i lo = _mm512_cvtps_ph(v0, _MM_FROUND_CUR_DIRECTION), hi = _mm512_cvtps_ph(v1, _MM_FROUND_CUR_DIRECTION);
    *r = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    return 1;
}

/* The steps of a run from i on (inside FB_ROWS_16's run functions: mode, a, b, out, n, A, B, K,
 * m and i in scope): one 16-value step first where out + i is half a line past a line boundary
 * (a streamed run starts on a 32-byte one; 64-byte stores want whole lines), then 32-value steps
 * (STEP32, stored by PUT64), then the 16-value steps. */
#define FB_RUN32(STEP32, LOAD8, STORE16, PUT32, PUT64)                                              \
    {                                                                                               \
        const __m512 wA = _mm512_set1_ps(A), wB = _mm512_set1_ps(B), wK = _mm512_set1_ps(K), wm = _mm512_set1_ps(m); \
        __m512i r32;                                                                                \
        if (i + 48 <= n && ((uintptr_t)(out + i) & 63) == 32) {                                     \
            FB_APPLY16(LOAD8, STORE16, FB_CHANNEL8, i);                                             \
            i += 16;                                                                                \
        }                                                                                           \
        for (; i + 32 <= n; i += 32) {                                                              \
            if (STEP32(mode, a + i, b + i, wA, wB, wK, wm, &r32))                                   \
                PUT64(out + i, r32);                                                                \
            else {                                                                                  \
                FB_APPLY16(LOAD8, STORE16, FB_CHANNEL8, i);                                         \
                FB_APPLY16(LOAD8, STORE16, FB_CHANNEL8, i + 16);                                    \
            }                                                                                       \
        }                                                                                           \
        FB_RUN16_VECTORS(LOAD8, STORE16, PUT32, PUT64)                                              \
    }
#define FB_RUN32_BF16(LOAD8, STORE16, PUT32, PUT64) FB_RUN32(fb_apply_bf16x32, LOAD8, STORE16, PUT32, PUT64)
#define FB_RUN32_HALF(LOAD8, STORE16, PUT32, PUT64) FB_RUN32(fb_apply_halfx32, LOAD8, STORE16, PUT32, PUT64)
#endif

#endif
