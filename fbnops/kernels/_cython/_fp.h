/* float16 / bfloat16 <-> float32 conversions for the fbnops kernels.
 *
 * 16-bit values are a storage format only: kernels widen them to float32 exactly,
 * compute in float32 (with float64 per-channel totals), and round back once with
 * round-to-nearest-even.  Everything is branch-light integer/float code so GCC can
 * vectorize the loops that call it; no -ffast-math anywhere (it would flush the
 * subnormals the half conversions rely on).
 */
#ifndef FBNOPS_FP_H
#define FBNOPS_FP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_contract.h" /* FB_MAX_W, FB_RED_* and FB_APPLY_*: generated from _plan.py */

/* Distinct types so Cython's fused types can tell the two 16-bit formats apart. */
typedef struct { uint16_t bits; } fb_half;
typedef struct { uint16_t bits; } fb_bf16;

static inline float fb_f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
static inline uint32_t fb_bits_from_f32(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }

/* The items' buffers on the stack, 64-byte aligned: GCC aligns a plain float array to 16 bytes,
 * and a 32-byte vector at 16 mod 32 splits a cache line every other access (a variance pass from
 * cache measured 0.80x the time with its buffers aligned). */
typedef struct { float v[FB_MAX_W]; } __attribute__((aligned(64))) fb_f32_row;
typedef struct { float v[2 * FB_MAX_W]; } __attribute__((aligned(64))) fb_f32_lanes;
typedef struct { float v[4 * FB_MAX_W]; } __attribute__((aligned(64))) fb_f32_tiles;
typedef struct { double v[2 * FB_MAX_W]; } __attribute__((aligned(64))) fb_f64_lanes;

/* bfloat16 is the upper half of a float32: widening is a shift. */
static inline float fb_bf16_to_f32(fb_bf16 h) { return fb_f32_from_bits((uint32_t)h.bits << 16); }

/* Round to nearest even on the 16 dropped bits; a NaN stays a quiet NaN of the same sign. */
static inline fb_bf16 fb_f32_to_bf16(float f) {
    uint32_t u = fb_bits_from_f32(f);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x0040u;
    fb_bf16 h;
    h.bits = (uint16_t)((f != f) ? quiet_nan : rounded);  /* NaN test: one vector compare */
    return h;
}

#if defined(__F16C__) && defined(__FLT16_MAX__)
/* x86-64-v3 build: the hardware conversions (vcvtph2ps / vcvtps2ph, round to nearest
 * even), which GCC vectorizes through _Float16 casts. */
static inline float fb_half_to_f32(fb_half h) {
    _Float16 v;
    memcpy(&v, &h.bits, sizeof v);
    return (float)v;
}

static inline fb_half fb_f32_to_half(float f) {
    _Float16 v = (_Float16)f;
    fb_half h;
    memcpy(&h.bits, &v, sizeof v);
    return h;
}
#else
/* Exact half -> float.  Shifting exponent+mantissa into float position and scaling by
 * 2^112 re-biases the exponent (15 -> 127) and normalizes half subnormals in one
 * exact multiply; exponent 31 (Inf/NaN) then gets the all-ones float exponent. */
static inline float fb_half_to_f32(fb_half h) {
    uint32_t em = (uint32_t)(h.bits & 0x7fffu) << 13;
    uint32_t u = fb_bits_from_f32(fb_f32_from_bits(em) * 0x1p112f);
    u |= (em >= (0x7c00u << 13)) ? 0x7f800000u : 0u;
    u |= (uint32_t)(h.bits & 0x8000u) << 16;
    return fb_f32_from_bits(u);
}

/* float -> half, round to nearest even, overflow to Inf, NaN to quiet NaN. */
static inline fb_half fb_f32_to_half(float f) {
    uint32_t u = fb_bits_from_f32(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    uint32_t out;
    if (a >= 0x47800000u) {              /* |f| >= 2^16, Inf or NaN */
        out = (a > 0x7f800000u) ? 0x7e00u : 0x7c00u;
    } else if (a < 0x38800000u) {        /* |f| < 2^-14: a half subnormal or zero */
        /* At 0.5 a float's ulp is 2^-24, the half subnormal step: the FPU's own
         * round-to-nearest-even does the rounding, the bits above 0.5 are the result. */
        out = fb_bits_from_f32(fb_f32_from_bits(a) + 0.5f) - 0x3f000000u;
    } else {                             /* normal: re-bias (-112 << 23), round off 13 bits */
        uint32_t odd = (a >> 13) & 1u;
        out = (a + 0xc8000fffu + odd) >> 13;
    }
    fb_half h;
    h.bits = (uint16_t)(out | sign);
    return h;
}
#endif

/* x86-64-v3 build: 16-bit rows converted 8 lanes at a time in registers.  GCC 12 does not
 * vectorize _Float16 conversions (one scalar vcvtph2ps per element) and narrows to bfloat16
 * at about twice the instructions, so the kernels call these row functions instead of their
 * element loops.  Elsewhere FB_HALF_ROWS and FB_BF16_ROWS are 0 and the kernels convert
 * element by element. */
#if defined(__F16C__) && defined(__FLT16_MAX__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define FB_HALF_ROWS 1
#define FB_BF16_ROWS 1

/* 8 lanes widened and narrowed.  float16: the F16C instructions.  bfloat16: widening is a
 * zero-extend and a shift; narrowing is fb_f32_to_bf16's rounding (nearest even, NaN ->
 * quiet NaN of the same sign) on 8 lanes, then a pack. */
/* float32 rows through the same row functions (the forward's apply, two rows per load of its
 * tiles): loads and stores as they are. */
static inline __m256 fb_load_f32x8(const float* p) { return _mm256_loadu_ps(p); }
static inline void fb_store_f32x8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
static inline float fb_f32_same(float v) { return v; }
static inline __m256 fb_load_half8(const fb_half* p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }
static inline void fb_store_half8(fb_half* p, __m256 v) {
    _mm_storeu_si128((__m128i*)p, _mm256_cvtps_ph(v, _MM_FROUND_CUR_DIRECTION));
}
/* One 32-byte vector of finished output: an ordinary store, or non-temporal (p 32-byte aligned;
 * see _stream.h).  The 16-value stores below are written over these two. */
static inline void fb_put32(void* p, __m256i v) { _mm256_storeu_si256((__m256i*)p, v); }
static inline void fb_put32_nt(void* p, __m256i v) { _mm256_stream_si256((__m256i*)p, v); }

static inline __m256 fb_load_bf16x8(const fb_bf16* p) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

/* bfloat16 narrowing of 8 lanes, left in the upper 16 bits of each 32-bit lane: round to
 * nearest even (u + 0x7fff + lsb), or for a NaN the quiet bit set (u | 0x400000); the
 * caller shifts and packs.  Same bits as fb_f32_to_bf16. */
static inline __m256i fb_bf16_round8_numbers(__m256 v) { /* (no lane a NaN) */
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    return _mm256_add_epi32(_mm256_add_epi32(u, bias), lsb);
}

static inline __m256i fb_bf16_round8(__m256 v) {
    const __m256i quiet = _mm256_set1_epi32(0x400000);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(fb_bf16_round8_numbers(v), _mm256_or_si256(_mm256_castps_si256(v), quiet), nan);
}

/* Two vectors rounded as fb_bf16_round8 rounds each: one compare and test for a NaN in either,
 * and the NaN blends only then (NaNs are rare; the test costs less than two blends). */
static inline void fb_bf16_round16(__m256 v0, __m256 v1, __m256i* r0, __m256i* r1) {
    __m256 nan = _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q);
    if (__builtin_expect(_mm256_testz_ps(nan, nan), 1)) {
        *r0 = fb_bf16_round8_numbers(v0);
        *r1 = fb_bf16_round8_numbers(v1);
    } else {
        *r0 = fb_bf16_round8(v0);
        *r1 = fb_bf16_round8(v1);
    }
}

/* Two vectors narrowed in order into one 32-byte vector of 16 bfloat16 values. */
static inline __m256i fb_bf16_narrow16_soft(__m256 v0, __m256 v1) {
    __m256i lo, hi;
    fb_bf16_round16(v0, v1, &lo, &hi);
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(_mm256_srli_epi32(lo, 16), _mm256_srli_epi32(hi, 16)), 0xd8);
}

static inline __m128i fb_bf16_narrow8_soft(__m256 v) {
    __m256i bits = _mm256_srli_epi32(fb_bf16_round8(v), 16);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(bits, bits), 0x08));  /* 0-3, 4-7 */
}

#if defined(__AVX512BF16__) && defined(__AVX512VL__)
/* The x86-64-v4 build with AVX512-BF16: the hardware narrows 16 values in one instruction
 * (vcvtne2ps2bf16), rounding to nearest even and quieting NaNs exactly as fb_f32_to_bf16 (the
 * two agree on all 2^32 float32 inputs but one class), but it reads denormal inputs as zero.  A
 * vector with a denormal lane (vfpclassps; rare in batch-norm outputs) takes the integer code. */
#define FB_BF16_HARDWARE 1
#define FB_DENORMAL 0x20 /* vfpclassps: denormal */
static inline __m256i fb_bf16_narrow16(__m256 v0, __m256 v1) {
    if (__builtin_expect((_mm256_fpclass_ps_mask(v0, FB_DENORMAL) | _mm256_fpclass_ps_mask(v1, FB_DENORMAL)) == 0, 1))
        return (__m256i)_mm256_cvtne2ps_pbh(v1, v0); /* (v0 in the lower half) */
    return fb_bf16_narrow16_soft(v0, v1);
}
static inline __m128i fb_bf16_narrow8(__m256 v) {
    if (__builtin_expect(_mm256_fpclass_ps_mask(v, FB_DENORMAL) == 0, 1)) return (__m128i)_mm256_cvtneps_pbh(v);
    return fb_bf16_narrow8_soft(v);
}
#else
#define FB_BF16_HARDWARE 0
#define fb_bf16_narrow16 fb_bf16_narrow16_soft
#define fb_bf16_narrow8 fb_bf16_narrow8_soft
#endif

static inline void fb_store_bf16x8(fb_bf16* p, __m256 v) { _mm_storeu_si128((__m128i*)p, fb_bf16_narrow8(v)); }

/* 16 lanes stored through PUT (fb_put32, or fb_put32_nt as the _nt forms).  16-bit: narrowed
 * into one 32-byte store, one pack and one permute for two vectors (the 8-lane forms above spend
 * a pack, a permute and a store on each). */
#define FB_STORE16_FORMS(SUFFIX, PUT)                                                               \
    static inline void fb_store_f32x16##SUFFIX(float* p, __m256 v0, __m256 v1) {                    \
        PUT(p, _mm256_castps_si256(v0));                                                            \
        PUT(p + 8, _mm256_castps_si256(v1));                                                        \
    }                                                                                               \
    static inline void fb_store_bf16x16##SUFFIX(fb_bf16* p, __m256 v0, __m256 v1) {                 \
        PUT(p, fb_bf16_narrow16(v0, v1));                                                           \
    }                                                                                               \
    /* (register-form vcvtps2ph joined into one store: the memory form is slower on AMD) */         \
    static inline void fb_store_half16##SUFFIX(fb_half* p, __m256 v0, __m256 v1) {                  \
        __m128i lo = _mm256_cvtps_ph(v0, _MM_FROUND_CUR_DIRECTION);                                 \
        __m128i hi = _mm256_cvtps_ph(v1, _MM_FROUND_CUR_DIRECTION);                                 \
        PUT(p, _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));                         \
    }
FB_STORE16_FORMS(, fb_put32)
FB_STORE16_FORMS(_nt, fb_put32_nt)
#else
#define FB_HALF_ROWS 0
#define FB_BF16_ROWS 0
#endif

/* n floats narrowed as the kernels' 16-bit applies store them: 16 lanes, 8, then the tail
 * element by element on x86-64-v3; element by element elsewhere.  (A test hook: its
 * results are checked against ml_dtypes and NumPy on every rounding boundary.) */
#if FB_BF16_ROWS
#define FB_NARROW_RUN(T, NAME, STORE16, STORE8, STORE1)                                             \
    static inline void fb_narrow_##NAME##_run(const float* v, T* out, ptrdiff_t n) {                \
        ptrdiff_t i = 0;                                                                            \
        for (; i + 16 <= n; i += 16) STORE16(out + i, _mm256_loadu_ps(v + i), _mm256_loadu_ps(v + i + 8)); \
        for (; i + 8 <= n; i += 8) STORE8(out + i, _mm256_loadu_ps(v + i));                        \
        for (; i < n; i++) out[i] = STORE1(v[i]);                                                   \
    }
#else
#define FB_NARROW_RUN(T, NAME, STORE16, STORE8, STORE1)                                             \
    static inline void fb_narrow_##NAME##_run(const float* v, T* out, ptrdiff_t n) {                \
        for (ptrdiff_t i = 0; i < n; i++) out[i] = STORE1(v[i]);                                    \
    }
#endif
FB_NARROW_RUN(fb_half, half, fb_store_half16, fb_store_half8, fb_f32_to_half)
FB_NARROW_RUN(fb_bf16, bf16, fb_store_bf16x16, fb_store_bf16x8, fb_f32_to_bf16)

#include "_rows16.h" /* the 16-bit row functions of the x86-64-v3 build */
#include "_stream.h" /* fb_stream_copy, fb_stream_fence: non-temporal copies of output rows */

#endif
