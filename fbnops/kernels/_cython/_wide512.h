/* The 512-bit steps of the x86-64-v4 build's 16-bit row functions (included by _rows16.h): 16
 * lanes a vector instead of 8, in front of the 16- and 8-value steps every vector build takes.
 * On a core that executes 512-bit vectors at full width (AMD Zen 5), a C loop over 16 planes of
 * 28x28 in L2 (median of 200, 1 thread) took, per 16 values of the training gradient's apply,
 * 2.9 cycles for bfloat16 (7.0 in 16-value steps, 5.4 in pairs) and 3.5 for float16 (5.7); float32
 * applies are bound by L2, not by the vectors (5.0 against 4.8), and keep their 8-lane steps;
 * float32 reductions take the 16-bit ones' strips and rows here (FB_F32_WIDE), 16 lanes a step.
 *
 * - channel runs (one channel's coefficients): FB_RUN32_BF16 / FB_RUN32_HALF, 32 values a step;
 * - rows with per-lane coefficients (the applies) and per-lane totals (the reductions from
 *   memory, one row at a time): FB_WIDE_APPLY_ROW and FB_WIDE_REDUCE_ROW;
 * - strips (the reductions from cache): FB_STRIPS_8_4.
 *
 * Every value goes through fb_apply8's or fb_reduce8's operations, in 16 lanes instead of 8, and
 * each lane total takes its row's value once, in row order; outputs are narrowed as
 * fb_store_NAME16 narrows them.  So the same bits as the x86-64-v3 build. */
#ifndef FBNOPS_WIDE512_H
#define FBNOPS_WIDE512_H

static inline void fb_put64(void* p, __m512i v) { _mm512_storeu_si512(p, v); }
static inline void fb_put64_nt(void* p, __m512i v) { _mm512_stream_si512((__m512i*)p, v); } /* (p 64-byte aligned) */

/* 16 values widened to float32 (as fb_load_bf16x8 and fb_load_half8 widen 8). */
static inline __m512 fb_load_bf16_16(const fb_bf16* p) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
static inline __m512 fb_load_half_16(const fb_half* p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p)); }
static inline __m512 fb_load_f32_16(const float* p) { return _mm512_loadu_ps(p); }

/* 32 values narrowed into 64 bytes (PUT64; PUT32 for a bfloat16 pair of vectors with a denormal
 * lane, which vcvtne2ps2bf16 would read as zero: the integer code, 16 values at a time). */
#define FB_WIDE_PUT_FORMS(KIND, PUT32, PUT64)                                                       \
    static inline void fb_put_bf16_32##KIND(fb_bf16* p, __m512 v0, __m512 v1) {                     \
        if (__builtin_expect(_kortestz_mask16_u8(_mm512_fpclass_ps_mask(v0, FB_DENORMAL),           \
                                                 _mm512_fpclass_ps_mask(v1, FB_DENORMAL)), 1)) {     \
            PUT64(p, (__m512i)_mm512_cvtne2ps_pbh(v1, v0)); /* (v0 in the lower half) */            \
            return;                                                                                 \
        }                                                                                           \
        PUT32(p, fb_bf16_narrow16_soft(_mm512_castps512_ps256(v0), _mm512_extractf32x8_ps(v0, 1)));  \
        PUT32(p + 16, fb_bf16_narrow16_soft(_mm512_castps512_ps256(v1), _mm512_extractf32x8_ps(v1, 1))); \
    }                                                                                               \
    static inline void fb_put_half_32##KIND(fb_half* p, __m512 v0, __m512 v1) {                     \
        __m256i lo = _mm512_cvtps_ph(v0, _MM_FROUND_CUR_DIRECTION), hi = _mm512_cvtps_ph(v1, _MM_FROUND_CUR_DIRECTION); \
        PUT64(p, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));                             \
    }
FB_WIDE_PUT_FORMS(, fb_put32, fb_put64)
FB_WIDE_PUT_FORMS(_nt, fb_put32_nt, fb_put64_nt)

/* The kit of 16 float32 lanes (FB_V8's in _rows16.h), and fb_apply16 / fb_reduce16 in it. */
#define FB_V16_T __m512
#define FB_V16_N 16
#define FB_V16_LOADF _mm512_loadu_ps
#define FB_V16_STOREF _mm512_storeu_ps
#define FB_V16_ADD _mm512_add_ps
#define FB_V16_SUB _mm512_sub_ps
#define FB_V16_MUL _mm512_mul_ps
#define FB_V16_FMADD _mm512_fmadd_ps
FB_ELEMENT_OPS(FB_V16, 16)

/* The 16 values at j of a row (in a run: COEF16 _mm512_set1_ps of the channel's coefficient). */
#define FB_APPLY_WIDE(NAME, COEF16, j)                                                              \
    fb_apply16(mode, mode == FB_APPLY_B ? _mm512_setzero_ps() : fb_load_##NAME##_16(a + (j)),       \
               mode == FB_APPLY_A ? _mm512_setzero_ps() : fb_load_##NAME##_16(b + (j)),             \
               COEF16(A, j), COEF16(B, j), COEF16(K, j), COEF16(m, j))
#define FB_LANE16(v, j) _mm512_loadu_ps((v) + (j))
#define FB_CHANNEL16(v, j) _mm512_set1_ps(v)

/* One 16-value step first where out + i is half a line past a line boundary (rows and runs start
 * on 32-byte ones; 64-byte loads and stores want whole lines, and streamed ones must have them). */
#define FB_WIDE_ALIGN(STEP16)                                                                       \
    if (i + 48 <= n && ((uintptr_t)(out + i) & 63) == 32) {                                         \
        STEP16;                                                                                     \
        i += 16;                                                                                    \
    }

/* Inside the rows' apply (mode, a, b, out, n, A, B, K, m and i in scope): 32 values a step with
 * per-lane coefficients, stored as KIND (empty or _nt); STORE16 the 16-value store of that kind. */
#define FB_WIDE_APPLY_ROW_STEPS(NAME, KIND, LOAD8, STORE16)                                         \
    FB_WIDE_ALIGN(FB_APPLY16(LOAD8, STORE16, FB_LANE8, i))                                          \
    for (; i + 32 <= n; i += 32)                                                                    \
        fb_put_##NAME##_32##KIND(out + i, FB_APPLY_WIDE(NAME, FB_LANE16, i), FB_APPLY_WIDE(NAME, FB_LANE16, i + 16));
#define FB_WIDE_APPLY_ROW_bf16(KIND, LOAD8, STORE16) FB_WIDE_APPLY_ROW_STEPS(bf16, KIND, LOAD8, STORE16)
#define FB_WIDE_APPLY_ROW_half(KIND, LOAD8, STORE16) FB_WIDE_APPLY_ROW_STEPS(half, KIND, LOAD8, STORE16)
#define FB_WIDE_APPLY_ROW_f32(KIND, LOAD8, STORE16)
#define FB_WIDE_APPLY_ROW(NAME, KIND, LOAD8, STORE16) FB_WIDE_APPLY_ROW_##NAME(KIND, LOAD8, STORE16)

/* Inside the reduction of one row (mode, a, b, n, m, s0, s1 and i in scope): 16 lanes a step. */
#define FB_WIDE_REDUCE_ROW_STEPS(NAME)                                                              \
    for (; i + 16 <= n; i += 16) {                                                                  \
        __m512 x16 = fb_load_##NAME##_16(a + i);                                                    \
        if (mode == FB_RED_GRAD)                                                                    \
            fb_reduce16(FB_RED_GRAD, x16, fb_load_##NAME##_16(b + i), _mm512_loadu_ps(m + i), s0 + i, s1 + i); \
        else if (mode == FB_RED_SUM) fb_reduce16(FB_RED_SUM, x16, x16, x16, s0 + i, s1 + i);         \
        else fb_reduce16(FB_RED_SQ, x16, x16, _mm512_loadu_ps(m + i), s0 + i, s1 + i);              \
    }
#define FB_WIDE_REDUCE_ROW_bf16 FB_WIDE_REDUCE_ROW_STEPS(bf16)
#define FB_WIDE_REDUCE_ROW_half FB_WIDE_REDUCE_ROW_STEPS(half)
#define FB_WIDE_REDUCE_ROW_f32 FB_WIDE_REDUCE_ROW_STEPS(f32)
#define FB_WIDE_REDUCE_ROW(NAME) FB_WIDE_REDUCE_ROW_##NAME

/* Strips (FB_STRIP_IN in _rows16.h) of the same 64 lanes (32 with two totals a lane) in 16-lane
 * vectors, each lane's adds in the same row order. */
#define FB_STRIP_WIDE(T, NAME, NV) FB_STRIP_IN(T, NAME, FB_V16, fb_load_##NAME##_16, NV)

/* Blocks: a forward pass's rows of one piece (stride apart) summed down all nrows (at most
 * BLOCK_ROWS) in strips of 16 vectors, 256 lanes, each strip's totals in registers from the first
 * row to the last: one load and store of a total per block, not per row (fb_reduce_NAME_row) or per
 * group of 8 rows (the 64-lane strips), and only two strips across a 512-lane row, so the rows are
 * still read 1 KB (float32) at a time.  The adds of FB_STRIP_STEP, a lane's rows in order: the same
 * bits.  Measured against the rows and strips before (docs/performance.md): a pass's time 0.74-1.01
 * (its input in L3 or memory), the forwards 0.85-0.89 on 3136-value planes, the others 0.92-1.08.  Not the
 * gradient's pass: its blocks of 128 lanes (two totals a lane) took 1.00-1.17 of its time. */
#define FB_WIDE_BLOCK(T, NAME)                                                                      \
    static inline __attribute__((always_inline)) void fb_block_##NAME(const int mode, const T* a, ptrdiff_t nrows, \
                                                                      ptrdiff_t stride, const float* m, float* s) { \
        __m512 t[16]; /* (RED_SUM's totals s0, or RED_SQ's s1) */                                  \
        _Pragma("GCC unroll 16") for (int k = 0; k < 16; k++) t[k] = _mm512_loadu_ps(s + 16 * k);  \
        for (ptrdiff_t r = 0; r < nrows; r++, a += stride) {                                        \
            _Pragma("GCC unroll 16") for (int k = 0; k < 16; k++) {                                 \
                __m512 xv = fb_load_##NAME##_16(a + 16 * k);                                        \
                if (mode == FB_RED_SUM) t[k] = _mm512_add_ps(t[k], xv);                             \
                else {                                                                              \
                    __m512 d = _mm512_sub_ps(xv, _mm512_loadu_ps(m + 16 * k));                      \
                    t[k] = _mm512_fmadd_ps(d, d, t[k]);                                             \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
        _Pragma("GCC unroll 16") for (int k = 0; k < 16; k++) _mm512_storeu_ps(s + 16 * k, t[k]);  \
    }                                                                                               \
    static inline __attribute__((always_inline)) ptrdiff_t fb_blocks_##NAME##_in(                   \
        const int mode, const T* a, ptrdiff_t nrows, ptrdiff_t stride, ptrdiff_t W, const float* m, float* s) { \
        ptrdiff_t j = 0;                                                                            \
        for (; j + 256 <= W; j += 256) fb_block_##NAME(mode, a + j, nrows, stride, m + j, s + j);   \
        return j;                                                                                   \
    }                                                                                               \
    /* Lanes [0, j) of a forward pass's rows in blocks, each mode its own loops; returns j (the     \
     * lanes left: FB_STRIP_RANGE's).  The gradient's pass: 0. */                                  \
    static ptrdiff_t fb_blocks_##NAME(int mode, const T* a, ptrdiff_t nrows, ptrdiff_t stride, ptrdiff_t W, \
                                      const float* m, float* s0, float* s1) {                       \
        if (mode == FB_RED_SUM) return fb_blocks_##NAME##_in(FB_RED_SUM, a, nrows, stride, W, m, s0); \
        if (mode == FB_RED_SQ) return fb_blocks_##NAME##_in(FB_RED_SQ, a, nrows, stride, W, m, s1); \
        return 0;                                                                                   \
    }
#define FB_WIDE_STRIPS_bf16(T, LOAD8) FB_STRIP_WIDE(T, bf16, 8) FB_STRIP_WIDE(T, bf16, 4) FB_WIDE_BLOCK(T, bf16)
#define FB_WIDE_STRIPS_half(T, LOAD8) FB_STRIP_WIDE(T, half, 8) FB_STRIP_WIDE(T, half, 4) FB_WIDE_BLOCK(T, half)
#define FB_WIDE_STRIPS_f32(T, LOAD8) FB_STRIP_WIDE(T, f32, 8) FB_STRIP_WIDE(T, f32, 4) FB_WIDE_BLOCK(T, f32)
#define FB_BLOCKS_OF(NAME) fb_blocks_##NAME(mode, a, nrows, stride, W, m, s0, s1)
#define FB_ROW_BLOCKS 1
#define FB_STRIPS_8_4(T, NAME, LOAD8) FB_WIDE_STRIPS_##NAME(T, LOAD8)

/* 32 bfloat16 values of a run as even/odd pairs of 32-bit lanes (as fb_apply_bf16_pairs: shifted
 * up, the even value is a float; masked, the odd one), narrowed by one vcvtne2ps2bf16 into [evens |
 * odds] and interleaved back by one vpermw: no widening shuffle.  0 (nothing in *r) where a lane
 * is denormal: the caller takes the 16-value steps, whose narrowing handles it. */
static inline __attribute__((always_inline)) int fb_apply_bf16_pairs32(int mode, const fb_bf16* a, const fb_bf16* b,
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

/* The steps of a run from i on (inside FB_ROWS_16's run functions): the alignment step, 32-value
 * steps (stored by PUT64), then the 16-value steps. */
#define FB_RUN32_BF16(LOAD8, STORE16, PUT32, PUT64)                                                 \
    {                                                                                               \
        const __m512 wA = _mm512_set1_ps(A), wB = _mm512_set1_ps(B), wK = _mm512_set1_ps(K), wm = _mm512_set1_ps(m); \
        __m512i r32;                                                                                \
        FB_WIDE_ALIGN(FB_APPLY16(LOAD8, STORE16, FB_CHANNEL8, i))                                   \
        for (; i + 32 <= n; i += 32) {                                                              \
            if (fb_apply_bf16_pairs32(mode, a + i, b + i, wA, wB, wK, wm, &r32))                    \
                PUT64(out + i, r32);                                                                \
            else {                                                                                  \
                FB_APPLY16(LOAD8, STORE16, FB_CHANNEL8, i);                                         \
                FB_APPLY16(LOAD8, STORE16, FB_CHANNEL8, i + 16);                                    \
            }                                                                                       \
        }                                                                                           \
        FB_RUN16_VECTORS(LOAD8, STORE16, PUT32, PUT64)                                              \
    }
/* float16: two vectors of 16 (PUT64 tells the store's kind). */
#define FB_PUT_HALF_32_fb_put64 fb_put_half_32
#define FB_PUT_HALF_32_fb_put64_nt fb_put_half_32_nt
#define FB_RUN32_HALF(LOAD8, STORE16, PUT32, PUT64)                                                 \
    FB_WIDE_ALIGN(FB_APPLY16(LOAD8, STORE16, FB_CHANNEL8, i))                                       \
    for (; i + 32 <= n; i += 32)                                                                    \
        FB_PUT_HALF_32_##PUT64(out + i, FB_APPLY_WIDE(half, FB_CHANNEL16, i), FB_APPLY_WIDE(half, FB_CHANNEL16, i + 16)); \
    FB_RUN16_VECTORS(LOAD8, STORE16, PUT32, PUT64)

#endif
