/* The 16-bit row functions of the fbnops kernels (included by _fp.h, after its 8-lane loads
 * and stores): reductions of rows into float32 lane totals and the element passes, each
 * the float32 loops' operations in their order, so the same bits. */
#ifndef FBNOPS_ROWS16_H
#define FBNOPS_ROWS16_H

#if FB_HALF_ROWS
/* A kit of vector type and operations: FB_V8, 8 float32 lanes (the x86-64-v4 build's FB_V16 in
 * _wide512.h: 16).  The element operations and the strips are written once over a kit. */
#define FB_V8_T __m256
#define FB_V8_N 8
#define FB_V8_LOADF _mm256_loadu_ps
#define FB_V8_STOREF _mm256_storeu_ps
#define FB_V8_ADD _mm256_add_ps
#define FB_V8_SUB _mm256_sub_ps
#define FB_V8_MUL _mm256_mul_ps
#define FB_V8_FMADD _mm256_fmadd_ps

/* The float32 loops' operations in their order and with GCC's contractions, so the same
 * bits as the float32 loops on widened rows (dy: the gradient lanes, b).  Reduce modes:
 * FB_RED_GRAD (s0 + dy; fma(a - m, dy, s1)), FB_RED_SUM (s0 + a), FB_RED_SQ (fma(d, d, s1)).
 * Apply modes: FB_APPLY_FULL (A * fma(B, a - m, dy + K)), FB_APPLY_B (A * dy), FB_APPLY_A
 * (fma(B, a - m, K)).
 * fb_reduceN (N lane totals s0, s1 += one row's values) and fb_applyN (N outputs) in kit V's
 * vectors; fb_reduce1 and fb_apply1 one value. */
#define FB_ELEMENT_OPS(V, N)                                                                        \
    static inline __attribute__((always_inline)) void fb_reduce##N(int mode, V##_T x, V##_T dy, V##_T m, \
                                                                   float* s0, float* s1) {          \
        if (mode == FB_RED_GRAD) {                                                                  \
            V##_STOREF(s0, V##_ADD(V##_LOADF(s0), dy));                                             \
            V##_STOREF(s1, V##_FMADD(V##_SUB(x, m), dy, V##_LOADF(s1)));                            \
        } else if (mode == FB_RED_SUM) {                                                            \
            V##_STOREF(s0, V##_ADD(V##_LOADF(s0), x));                                              \
        } else {                                                                                    \
            V##_T d = V##_SUB(x, m);                                                                \
            V##_STOREF(s1, V##_FMADD(d, d, V##_LOADF(s1)));                                         \
        }                                                                                           \
    }                                                                                               \
    static inline __attribute__((always_inline)) V##_T fb_apply##N(int mode, V##_T x, V##_T dy, V##_T A, \
                                                                   V##_T B, V##_T K, V##_T m) {     \
        if (mode == FB_APPLY_FULL) return V##_MUL(A, V##_FMADD(B, V##_SUB(x, m), V##_ADD(dy, K)));  \
        if (mode == FB_APPLY_B) return V##_MUL(A, dy);                                              \
        return V##_FMADD(B, V##_SUB(x, m), K);                                                      \
    }
FB_ELEMENT_OPS(FB_V8, 8)

static inline void fb_reduce1(int mode, float x, float dy, float m, float* s0, float* s1) {
    if (mode == FB_RED_GRAD) {
        *s0 += dy;
        *s1 = __builtin_fmaf(x - m, dy, *s1);
    } else if (mode == FB_RED_SUM) {
        *s0 += x;
    } else {
        *s1 = __builtin_fmaf(x - m, x - m, *s1);
    }
}

static inline float fb_apply1(int mode, float x, float dy, float A, float B, float K, float m) {
    if (mode == FB_APPLY_FULL) return A * __builtin_fmaf(B, x - m, dy + K);
    if (mode == FB_APPLY_B) return A * dy;
    return __builtin_fmaf(B, x - m, K);
}

/* The row functions of one 16-bit type T, 8 lanes at a time (applies: 16, two vectors per
 * narrowing store, then 8), then the tail element by element: fb_reduce_NAME_row (a row of n
 * lanes into the lane accumulators s0, s1), fb_apply_NAME_rows (per-lane coefficients; with
 * TWO_ROWS, two rows per load of the coefficients where they fit in registers) and
 * fb_apply_NAME_run (one channel's). */
#define FB_APPLY8V(LOAD8, pa, pb, vA, vB, vK, vm)                                                   \
    fb_apply8(mode, mode == FB_APPLY_B ? _mm256_setzero_ps() : LOAD8(pa),                           \
              mode == FB_APPLY_A ? _mm256_setzero_ps() : LOAD8(pb), vA, vB, vK, vm)
#define FB_APPLY8(LOAD8, COEF8, j)                                                                  \
    FB_APPLY8V(LOAD8, a + (j), b + (j), COEF8(A, j), COEF8(B, j), COEF8(K, j), COEF8(m, j))
/* The 16-value step of every apply loop: values j to j + 15, the first 8 through the coefficient
 * vectors (A0, B0, K0, m0), the next 8 through (A1, ...), two vectors per narrowing store. */
#define FB_APPLY16V(LOAD8, STORE16, j, A0, B0, K0, m0, A1, B1, K1, m1)                              \
    STORE16(out + (j), FB_APPLY8V(LOAD8, a + (j), b + (j), A0, B0, K0, m0),                         \
            FB_APPLY8V(LOAD8, a + (j) + 8, b + (j) + 8, A1, B1, K1, m1))
/* ... with the coefficients COEF8(v, i) of lanes i and i + 8. */
#define FB_APPLY16(LOAD8, STORE16, COEF8, i)                                                        \
    FB_APPLY16V(LOAD8, STORE16, i, COEF8(A, i), COEF8(B, i), COEF8(K, i), COEF8(m, i),              \
                COEF8(A, (i) + 8), COEF8(B, (i) + 8), COEF8(K, (i) + 8), COEF8(m, (i) + 8))
#define FB_APPLY_LOOP(LOAD8, STORE8, STORE16, LOAD1, STORE1, COEF8, COEF1)                          \
    for (; i + 16 <= n; i += 16) FB_APPLY16(LOAD8, STORE16, COEF8, i);                              \
    FB_APPLY_TAIL(LOAD8, STORE8, LOAD1, STORE1, COEF8, COEF1)
/* From i on: 8 lanes at a time; then the last t < 8 values, in a row of 8 or more, as the last 8
 * computed into a buffer of which the last t are copied out (the same operations on each value, so
 * the same bits, and no value written twice); in a shorter row, one by one. */
#define FB_APPLY_TAIL(LOAD8, STORE8, LOAD1, STORE1, COEF8, COEF1)                                   \
    for (; i + 8 <= n; i += 8)                                                                      \
        STORE8(out + i, FB_APPLY8(LOAD8, COEF8, i));                                                \
    if (i < n && n >= 8) {                                                                          \
        __typeof__(*out) last8[8];                                                                  \
        STORE8(last8, FB_APPLY8(LOAD8, COEF8, n - 8));                                              \
        for (int k = 8 - (int)(n - i); k < 8; k++) out[n - 8 + k] = last8[k];                       \
        i = n;                                                                                      \
    }                                                                                               \
    for (; i < n; i++) {                                                                            \
        float x = mode == FB_APPLY_B ? 0.0f : LOAD1(a[i]), dy = mode == FB_APPLY_A ? 0.0f : LOAD1(b[i]); \
        out[i] = STORE1(fb_apply1(mode, x, dy, COEF1(A, i), COEF1(B, i), COEF1(K, i), COEF1(m, i))); \
    }
/* bfloat16 with one channel's coefficients: 16 values per 32-byte load and store.  A 32-bit lane
 * holds two bfloat16 values, the even one in its lower half: shifted up, that one is a float;
 * masked, the odd one is.  Each set of 8 is computed and rounded in place (fb_bf16_round16) and
 * the two are blended back: no widening, packing or permuting shuffle.  The same operations on
 * every value as fb_apply8 and fb_store_bf16x16, so the same bits. */
static inline __attribute__((always_inline)) __m256i fb_apply_bf16_pairs(int mode, const fb_bf16* a, const fb_bf16* b,
                                                                         __m256 A, __m256 B, __m256 K, __m256 m) {
    const __m256i upper = _mm256_set1_epi32((int)0xffff0000u);
    __m256i xa = mode == FB_APPLY_B ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i*)a);
    __m256i xb = mode == FB_APPLY_A ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i*)b);
    __m256 even = fb_apply8(mode, _mm256_castsi256_ps(_mm256_slli_epi32(xa, 16)),
                            _mm256_castsi256_ps(_mm256_slli_epi32(xb, 16)), A, B, K, m);
    __m256 odd = fb_apply8(mode, _mm256_castsi256_ps(_mm256_and_si256(xa, upper)),
                           _mm256_castsi256_ps(_mm256_and_si256(xb, upper)), A, B, K, m);
    __m256i re, ro;
    fb_bf16_round16(even, odd, &re, &ro);
    return _mm256_blend_epi16(_mm256_srli_epi32(re, 16), ro, 0xAA);
}
/* The values of out[0:n] before its first 32-byte boundary, where its streamed 16-value steps
 * start: n if not one step fits (or out is misaligned for its type, never the case for the
 * kernels' outputs), so that nothing is streamed. */
#define FB_STREAM_HEAD(out, n)                                                                          \
    ({                                                                                              \
        ptrdiff_t h_ = (ptrdiff_t)((32 - ((uintptr_t)(out) & 31)) & 31) / (ptrdiff_t)sizeof(*(out)); \
        ((uintptr_t)(out) % sizeof(*(out)) || h_ + 16 > (n)) ? (n) : h_;                            \
    })
/* The 16-value steps of a run (one channel's coefficients) from i on: two vectors per narrowing
 * store (STORE16), or bfloat16 pairs (stored with PUT32, of the same kind: ordinary or
 * non-temporal).  (PUT64: the 64-byte store of that kind, for the x86-64-v4 build's wider steps
 * in _wide512.h.) */
#define FB_RUN16_VECTORS(LOAD8, STORE16, PUT32, PUT64)                                              \
    for (; i + 16 <= n; i += 16) FB_APPLY16(LOAD8, STORE16, FB_CHANNEL8, i);
#define FB_RUN16_PAIRS(LOAD8, STORE16, PUT32, PUT64)                                                \
    {                                                                                               \
        const __m256 vA = _mm256_set1_ps(A), vB = _mm256_set1_ps(B), vK = _mm256_set1_ps(K), vm = _mm256_set1_ps(m); \
        for (; i + 16 <= n; i += 16) PUT32(out + i, fb_apply_bf16_pairs(mode, a + i, b + i, vA, vB, vK, vm)); \
    }
#define FB_LANE8(v, i) _mm256_loadu_ps((v) + (i))
#define FB_LANE1(v, i) (v)[i]
#define FB_CHANNEL8(v, i) _mm256_set1_ps(v)
#define FB_CHANNEL1(v, i) (v)
/* Reductions of many rows at once, each lane's float32 total kept in a register for a group of
 * rows (loaded and stored once a group, not once per row).  nrows rows, `stride` elements apart;
 * a row is `span` elements folded onto W lanes: lane j takes elements j, j + W, j + 2W, ... below
 * span, row after row.  That is exactly the adds of the one-row loop run on each W-lane piece in turn
 * (same operations, same order per lane), so the same bits.  A strip of NV vectors is summed
 * over a group of rows before the next strip (see FB_REDUCE_ROWS): NV independent add chains
 * hide the add latency. */
/* A strip's vectors: V names a kit of vector type and operations (FB_V8; FB_V16 in _wide512.h),
 * LOADV the storage type's widening load. */
/* One vector of one row into the strip's totals u[k], v[k] (centre mk). */
#define FB_STRIP_STEP(V, LOADV, px, pg, mk, k)                                                      \
    {                                                                                               \
        V##_T xv = LOADV(px);                                                                       \
        if (mode == FB_RED_SUM) u[k] = V##_ADD(u[k], xv);                                           \
        else if (mode == FB_RED_SQ) {                                                               \
            V##_T d = V##_SUB(xv, mk);                                                              \
            v[k] = V##_FMADD(d, d, v[k]);                                                           \
        } else {                                                                                    \
            V##_T dy = LOADV(pg);                                                                   \
            u[k] = V##_ADD(u[k], dy);                                                               \
            v[k] = V##_FMADD(V##_SUB(xv, mk), dy, v[k]);                                            \
        }                                                                                           \
    }
/* fb_strip_NAME_NV: a strip of NV * 8 lanes in vectors of the kit V.  With one piece a row, the
 * passes that centre (SQ, GRAD) take two rows per load of the centre tile, row r before row r + 1
 * in every lane as in the one-row loop. */
#define FB_STRIP_IN(T, NAME, V, LOADV, NV)                                                          \
    static inline __attribute__((always_inline)) void fb_strip_##NAME##_##NV(                       \
        int mode, const T* a, const T* b, ptrdiff_t nrows, ptrdiff_t stride, ptrdiff_t q,            \
        ptrdiff_t W, const float* m, float* s0, float* s1) {                                        \
        enum { NVEC = NV * 8 / V##_N };                                                             \
        V##_T u[NVEC], v[NVEC];                                                                     \
        ptrdiff_t r = 0;                                                                            \
        for (int k = 0; k < NVEC; k++) { /* (only the totals the mode adds to) */                   \
            if (fb_adds_to(mode, 0)) u[k] = V##_LOADF(s0 + V##_N * k);                              \
            if (fb_adds_to(mode, 1)) v[k] = V##_LOADF(s1 + V##_N * k);                              \
        }                                                                                           \
        if (mode != FB_RED_SUM && q == 1)                                                           \
            for (; r + 2 <= nrows; r += 2) {                                                        \
                const T* x = a + r * stride;                                                        \
                const T* g = b + r * stride;                                                        \
                for (int k = 0; k < NVEC; k++) {                                                    \
                    const V##_T mk = V##_LOADF(m + V##_N * k);                                      \
                    FB_STRIP_STEP(V, LOADV, x + V##_N * k, g + V##_N * k, mk, k)                    \
                    FB_STRIP_STEP(V, LOADV, x + stride + V##_N * k, g + stride + V##_N * k, mk, k)  \
                }                                                                                   \
            }                                                                                       \
        for (; r < nrows; r++)                                                                      \
            for (ptrdiff_t piece = 0; piece < q; piece++) {                                         \
                const T* x = a + r * stride + piece * W;                                            \
                const T* g = b + r * stride + piece * W;                                            \
                for (int k = 0; k < NVEC; k++)                                                      \
                    FB_STRIP_STEP(V, LOADV, x + V##_N * k, g + V##_N * k, V##_LOADF(m + V##_N * k), k) \
            }                                                                                       \
        for (int k = 0; k < NVEC; k++) {                                                            \
            if (fb_adds_to(mode, 0)) V##_STOREF(s0 + V##_N * k, u[k]);                              \
            if (fb_adds_to(mode, 1)) V##_STOREF(s1 + V##_N * k, v[k]);                              \
        }                                                                                           \
    }
#define FB_STRIP(T, NAME, LOAD8, NV) FB_STRIP_IN(T, NAME, FB_V8, LOAD8, NV)
/* The last t < 8 lanes of [.., j1), j1 >= 8: the one-vector strip of lanes j1 - 8 to j1 on a copy
 * of their totals, of which only the last t are kept (the other lanes' adds are thrown away).  A
 * lane below j1 - t takes at least as many pieces a row as the lanes above it, so every read is
 * inside the rows.  Each kept lane gets the adds of the one-lane loop in its order: the same bits
 * (a 14x14 plane is 3 strips of 64 lanes and 4 lanes that took longer one by one than the 192). */
#define FB_STRIP_LAST(NAME, j1, t)                                                                  \
    {                                                                                               \
        float u8[8] = {0}, v8[8] = {0}; /* (a mode reads only its own) */                             \
        if (fb_adds_to(mode, 0)) memcpy(u8, s0 + (j1) - 8, sizeof u8);                              \
        if (fb_adds_to(mode, 1)) memcpy(v8, s1 + (j1) - 8, sizeof v8);                              \
        fb_strip_##NAME##_1(mode, a + (j1) - 8, b + (j1) - 8, nrows, stride, q, W, m + (j1) - 8, u8, v8); \
        if (fb_adds_to(mode, 0)) memcpy(s0 + (j1) - (t), u8 + 8 - (t), (size_t)(t) * sizeof(float)); \
        if (fb_adds_to(mode, 1)) memcpy(s1 + (j1) - (t), v8 + 8 - (t), (size_t)(t) * sizeof(float)); \
    }
/* Lanes [j0, j1), each taking q pieces a row: strips of 8 vectors (4 with two totals a lane),
 * then single vectors, then the last lanes (FB_STRIP_LAST, or one at a time with fb_reduce1, the
 * same operations, in a row of fewer than 8 lanes). */
#define FB_STRIP_RANGE(T, NAME, LOAD1)                                                              \
    static inline __attribute__((always_inline)) void fb_strip_range_##NAME(                        \
        int mode, const T* a, const T* b, ptrdiff_t nrows, ptrdiff_t stride, ptrdiff_t q,            \
        ptrdiff_t W, ptrdiff_t j0, ptrdiff_t j1, const float* m, float* s0, float* s1) {            \
        ptrdiff_t j = j0;                                                                           \
        if (mode == FB_RED_GRAD)                                                                    \
            for (; j + 32 <= j1; j += 32)                                                           \
                fb_strip_##NAME##_4(mode, a + j, b + j, nrows, stride, q, W, m + j, s0 + j, s1 + j); \
        else                                                                                        \
            for (; j + 64 <= j1; j += 64)                                                           \
                fb_strip_##NAME##_8(mode, a + j, b + j, nrows, stride, q, W, m + j, s0 + j, s1 + j); \
        for (; j + 8 <= j1; j += 8)                                                                 \
            fb_strip_##NAME##_1(mode, a + j, b + j, nrows, stride, q, W, m + j, s0 + j, s1 + j);     \
        if (j < j1 && j1 >= 8) {                                                                    \
            FB_STRIP_LAST(NAME, j1, j1 - j)                                                         \
            return;                                                                                 \
        }                                                                                           \
        for (; j < j1; j++)                                                                         \
            for (ptrdiff_t r = 0; r < nrows; r++)                                                   \
                for (ptrdiff_t piece = 0; piece < q; piece++) {                                     \
                    ptrdiff_t at = r * stride + piece * W + j;                                      \
                    float x = LOAD1(a[at]);                                                         \
                    if (mode == FB_RED_GRAD) fb_reduce1(FB_RED_GRAD, x, LOAD1(b[at]), m[j], s0 + j, s1 + j); \
                    else fb_reduce1(mode, x, x, mode == FB_RED_SUM ? 0.0f : m[j], s0 + j, s1 + j);  \
                }                                                                                   \
    }
/* FN(mode, ...) with the mode made a constant, so that each mode compiles to its own straight
 * loops (no test of the mode inside them). */
#define FB_REDUCE_BY_MODE(FN, ...)                                                                  \
    if (mode == FB_RED_SUM) FN(FB_RED_SUM, __VA_ARGS__);                                            \
    else if (mode == FB_RED_SQ) FN(FB_RED_SQ, __VA_ARGS__);                                         \
    else FN(FB_RED_GRAD, __VA_ARGS__);
#define FB_APPLY_BY_MODE(FN, ...)                                                                   \
    if (mode == FB_APPLY_A) FN(FB_APPLY_A, __VA_ARGS__);                                            \
    else if (mode == FB_APPLY_B) FN(FB_APPLY_B, __VA_ARGS__);                                       \
    else FN(FB_APPLY_FULL, __VA_ARGS__);
/* A strip sums at most FB_STRIP_PIECES pieces (_plan.STRIP_PIECES: rows, when a row is one piece)
 * before the next strip: the rows go in groups, each read whole before the next.  Down a whole
 * item (64 rows of 2 KB), the strips' column order lost the prefetchers once the rows came from L3
 * (a replica in C: 75 us for a 6.4 MB sum on one core, 86 when the rows start off a 64-byte line;
 * in groups of 16 rows, 60 either way).  In the kernels, two builds side by side
 * (benchmarks/ab_kernels.py, 2 threads), groups of 8 against whole items: channels-last float32
 * forwards of (32,28,28,128) to (32,7,7,512) 0.89-0.94, 16-bit gradients of (32,14,14,256) and
 * (32,7,7,512) 0.87-0.98 (docs/performance.md); groups of 4, 16 and 32 gained less.  Each lane's
 * adds keep their row order: the same bits.  In the x86-64-v4 build a forward pass's rows of one
 * piece go in 256-lane blocks down all the rows first (FB_BLOCKS_OF, _wide512.h), the lanes past
 * the last whole block in these strips. */
#define FB_REDUCE_ROWS(T, NAME)                                                                     \
    static inline void fb_reduce_##NAME##_rows_in(int mode, const T* a, const T* b, ptrdiff_t nrows, \
                                                  ptrdiff_t stride, ptrdiff_t span, ptrdiff_t W,    \
                                                  const float* m, float* s0, float* s1) {           \
        ptrdiff_t q = (span + W - 1) / W, last = span - (q - 1) * W; /* lanes below last: q pieces */ \
        ptrdiff_t group = q < FB_STRIP_PIECES ? FB_STRIP_PIECES / q : 1; /* rows a group */        \
        ptrdiff_t j0 = q == 1 ? FB_BLOCKS_OF(NAME) : 0; /* (x86-64-v4: lanes [0, j0) in blocks) */  \
        for (ptrdiff_t r = 0; r < nrows && j0 < last; r += group) {                                 \
            ptrdiff_t n = nrows - r < group ? nrows - r : group;                                    \
            const T* ar = a + r * stride;                                                           \
            const T* br = b + r * stride;                                                           \
            fb_strip_range_##NAME(mode, ar, br, n, stride, q, W, j0, last, m, s0, s1);              \
            if (q > 1) fb_strip_range_##NAME(mode, ar, br, n, stride, q - 1, W, last, W, m, s0, s1); \
        }                                                                                           \
    }                                                                                               \
    static inline void fb_reduce_##NAME##_rows(int mode, const T* a, const T* b, ptrdiff_t nrows,   \
                                               ptrdiff_t stride, ptrdiff_t span, ptrdiff_t W,       \
                                               const float* m, float* s0, float* s1) {              \
        FB_REDUCE_BY_MODE(fb_reduce_##NAME##_rows_in, a, b, nrows, stride, span, W, m, s0, s1)      \
    }
#define FB_ROWS_16(T, NAME, LOAD8, STORE8, STORE16, LOAD1, STORE1, RUN16, TWO_ROWS)                 \
    FB_STRIPS_8_4(T, NAME, LOAD8)                                                                   \
    FB_STRIP(T, NAME, LOAD8, 1)                                                                     \
    FB_STRIP_RANGE(T, NAME, LOAD1)                                                                  \
    FB_REDUCE_ROWS(T, NAME)                                                                         \
    static inline void fb_reduce_##NAME##_row(int mode, const T* a, const T* b, ptrdiff_t n,        \
                                              const float* m, float* s0, float* s1) {               \
        ptrdiff_t i = 0; /* (each mode loads only what it uses: dy and the centre tile) */          \
        FB_WIDE_REDUCE_ROW(NAME)                                                                    \
        for (; i + 8 <= n; i += 8) {                                                                \
            __m256 x = LOAD8(a + i);                                                                \
            if (mode == FB_RED_GRAD)                                                                \
                fb_reduce8(FB_RED_GRAD, x, LOAD8(b + i), _mm256_loadu_ps(m + i), s0 + i, s1 + i);   \
            else if (mode == FB_RED_SUM) fb_reduce8(FB_RED_SUM, x, x, x, s0 + i, s1 + i);           \
            else fb_reduce8(FB_RED_SQ, x, x, _mm256_loadu_ps(m + i), s0 + i, s1 + i);               \
        }                                                                                           \
        for (; i < n; i++) {                                                                        \
            float x = LOAD1(a[i]);                                                                  \
            if (mode == FB_RED_GRAD) fb_reduce1(FB_RED_GRAD, x, LOAD1(b[i]), m[i], s0 + i, s1 + i); \
            else fb_reduce1(mode, x, x, mode == FB_RED_SUM ? 0.0f : m[i], s0 + i, s1 + i);          \
        }                                                                                           \
    }                                                                                               \
    static inline __attribute__((always_inline)) void fb_apply_##NAME##_row_in(                     \
        int mode, const T* a, const T* b, T* out, ptrdiff_t n, const float* A, const float* B,      \
        const float* K, const float* m) {                                                           \
        ptrdiff_t i = 0;                                                                            \
        FB_WIDE_APPLY_ROW(NAME, , LOAD8, STORE16)                                                   \
        FB_APPLY_LOOP(LOAD8, STORE8, STORE16, LOAD1, STORE1, FB_LANE8, FB_LANE1)                    \
    }                                                                                               \
    /* Two rows (n lanes apart) through the same lanes: each coefficient vector is loaded once   \
     * for both (for one row, three of a vector's four loads were the per-lane tiles). */          \
    static inline __attribute__((always_inline)) void fb_apply_##NAME##_two_rows_in(                \
        int mode, const T* a, const T* b, T* out, ptrdiff_t n, const float* A, const float* B,      \
        const float* K, const float* m) {                                                           \
        ptrdiff_t i = 0;                                                                            \
        for (; i + 16 <= n; i += 16) {                                                              \
            const __m256 A0 = FB_LANE8(A, i), B0 = FB_LANE8(B, i), K0 = FB_LANE8(K, i), m0 = FB_LANE8(m, i); \
            const __m256 A1 = FB_LANE8(A, i + 8), B1 = FB_LANE8(B, i + 8), K1 = FB_LANE8(K, i + 8);  \
            const __m256 m1 = FB_LANE8(m, i + 8);                                                   \
            FB_APPLY16V(LOAD8, STORE16, i, A0, B0, K0, m0, A1, B1, K1, m1);                         \
            FB_APPLY16V(LOAD8, STORE16, n + i, A0, B0, K0, m0, A1, B1, K1, m1);                     \
        }                                                                                           \
        fb_apply_##NAME##_row_in(mode, a + i, b + i, out + i, n - i, A + i, B + i, K + i, m + i);   \
        fb_apply_##NAME##_row_in(mode, a + n + i, b + n + i, out + n + i, n - i, A + i, B + i, K + i, m + i); \
    }                                                                                               \
    static inline __attribute__((always_inline)) void fb_apply_##NAME##_rows_in(                    \
        int mode, const T* a, const T* b, T* out, ptrdiff_t nrows, ptrdiff_t n, const float* A,     \
        const float* B, const float* K, const float* m) {                                           \
        ptrdiff_t r = 0;                                                                            \
        if (TWO_ROWS && mode == FB_APPLY_A) /* (measured: slower for the other modes and bfloat16) */ \
            for (; r + 2 <= nrows; r += 2)                                                          \
                fb_apply_##NAME##_two_rows_in(mode, a + r * n, b + r * n, out + r * n, n, A, B, K, m); \
        for (; r < nrows; r++)                                                                      \
            fb_apply_##NAME##_row_in(mode, a + r * n, b + r * n, out + r * n, n, A, B, K, m);       \
    }                                                                                               \
    /* nrows contiguous rows of n lanes with per-lane coefficients */                              \
    static inline void fb_apply_##NAME##_rows(int mode, const T* a, const T* b, T* out, ptrdiff_t nrows, \
                                              ptrdiff_t n, const float* A, const float* B,          \
                                              const float* K, const float* m) {                     \
        FB_APPLY_BY_MODE(fb_apply_##NAME##_rows_in, a, b, out, nrows, n, A, B, K, m)                \
    }                                                                                               \
    /* The same rows with their 16-value steps stored non-temporally from each row's first 32-byte \
     * boundary (see _stream.h; the other values as fb_apply_NAME_rows stores them: the same bits). */ \
    static inline __attribute__((always_inline)) void fb_apply_##NAME##_rows_streamed_in(           \
        int mode, const T* a, const T* b, T* out, ptrdiff_t nrows, ptrdiff_t n, const float* A,     \
        const float* B, const float* K, const float* m) {                                           \
        for (ptrdiff_t r = 0; r < nrows; r++, a += n, b += n, out += n) {                           \
            ptrdiff_t i = FB_STREAM_HEAD(out, n);                                                       \
            fb_apply_##NAME##_row_in(mode, a, b, out, i, A, B, K, m);                               \
            FB_WIDE_APPLY_ROW(NAME, _nt, LOAD8, STORE16##_nt)                                       \
            for (; i + 16 <= n; i += 16) FB_APPLY16(LOAD8, STORE16##_nt, FB_LANE8, i);              \
            fb_apply_##NAME##_row_in(mode, a + i, b + i, out + i, n - i, A + i, B + i, K + i, m + i); \
        }                                                                                           \
    }                                                                                               \
    static inline void fb_apply_##NAME##_rows_streamed(int mode, const T* a, const T* b, T* out,    \
                                                       ptrdiff_t nrows, ptrdiff_t n, const float* A, \
                                                       const float* B, const float* K, const float* m) { \
        FB_APPLY_BY_MODE(fb_apply_##NAME##_rows_streamed_in, a, b, out, nrows, n, A, B, K, m)       \
    }                                                                                               \
    static inline __attribute__((always_inline)) void fb_apply_##NAME##_run_in(                     \
        int mode, const T* a, const T* b, T* out, ptrdiff_t n, float A, float B, float K, float m) { \
        ptrdiff_t i = 0;                                                                            \
        RUN16(LOAD8, STORE16, fb_put32, fb_put64)                                                   \
        FB_APPLY_TAIL(LOAD8, STORE8, LOAD1, STORE1, FB_CHANNEL8, FB_CHANNEL1)                       \
    }                                                                                               \
    static inline void fb_apply_##NAME##_run(int mode, const T* a, const T* b, T* out, ptrdiff_t n, \
                                             float A, float B, float K, float m) {                  \
        FB_APPLY_BY_MODE(fb_apply_##NAME##_run_in, a, b, out, n, A, B, K, m)                        \
    }                                                                                               \
    /* The same run with its 16-value steps stored non-temporally from out's first 32-byte boundary \
     * (see _stream.h): the values before it and after the last step as fb_apply_NAME_run stores \
     * them.  Every value goes through the same operations either way, so the same bits. */         \
    static inline __attribute__((always_inline)) void fb_apply_##NAME##_run_streamed_in(            \
        int mode, const T* a, const T* b, T* out, ptrdiff_t n, float A, float B, float K, float m) { \
        ptrdiff_t i = FB_STREAM_HEAD(out, n);                                                           \
        fb_apply_##NAME##_run_in(mode, a, b, out, i, A, B, K, m);                                   \
        RUN16(LOAD8, STORE16##_nt, fb_put32_nt, fb_put64_nt)                                        \
        fb_apply_##NAME##_run_in(mode, a + i, b + i, out + i, n - i, A, B, K, m);                   \
    }                                                                                               \
    static inline void fb_apply_##NAME##_run_streamed(int mode, const T* a, const T* b, T* out,     \
                                                      ptrdiff_t n, float A, float B, float K, float m) { \
        FB_APPLY_BY_MODE(fb_apply_##NAME##_run_streamed_in, a, b, out, n, A, B, K, m)               \
    }
#else
/* (never called: FB_HALF_ROWS and FB_BF16_ROWS are 0) */
#define FB_ROWS_16(T, NAME, LOAD8, STORE8, STORE16, LOAD1, STORE1, RUN16, TWO_ROWS)                 \
    static inline void fb_reduce_##NAME##_rows(int mode, const T* a, const T* b, ptrdiff_t nrows,   \
                                               ptrdiff_t stride, ptrdiff_t span, ptrdiff_t W,       \
                                               const float* m, float* s0, float* s1) {}             \
    static inline void fb_reduce_##NAME##_row(int mode, const T* a, const T* b, ptrdiff_t n,        \
                                              const float* m, float* s0, float* s1) {}              \
    static inline void fb_apply_##NAME##_rows(int mode, const T* a, const T* b, T* out, ptrdiff_t nrows, \
                                              ptrdiff_t n, const float* A, const float* B,          \
                                              const float* K, const float* m) {}                    \
    static inline void fb_apply_##NAME##_run(int mode, const T* a, const T* b, T* out, ptrdiff_t n, \
                                             float A, float B, float K, float m) {}                 \
    static inline void fb_apply_##NAME##_run_streamed(int mode, const T* a, const T* b, T* out,     \
                                                      ptrdiff_t n, float A, float B, float K, float m) {} \
    static inline void fb_apply_##NAME##_rows_streamed(int mode, const T* a, const T* b, T* out,    \
                                                       ptrdiff_t nrows, ptrdiff_t n, const float* A, \
                                                       const float* B, const float* K, const float* m) {}
#endif
/* 16-bit rows and runs: in the x86-64-v4 build (FB_BF16_HARDWARE), 16 lanes a vector first
 * (_wide512.h; float16 rows one at a time, not two per load of the tiles); otherwise float16 runs
 * as vectors and bfloat16 runs in pairs (no widening or packing, where narrowing is integer code). */
#if FB_BF16_HARDWARE
#include "_wide512.h"
#define FB_HALF_RUN FB_RUN32_HALF
#define FB_BF16_RUN FB_RUN32_BF16
#define FB_HALF_TWO_ROWS 0
#define FB_F32_WIDE 1 /* float32 reductions through fb_reduce_f32_row(s), not the Cython loops */
#else
#define FB_WIDE_APPLY_ROW(NAME, KIND, LOAD8, STORE16)
#define FB_WIDE_REDUCE_ROW(NAME)
#define FB_BLOCKS_OF(NAME) 0
#define FB_ROW_BLOCKS 0
#define FB_STRIPS_8_4(T, NAME, LOAD8) FB_STRIP(T, NAME, LOAD8, 8) FB_STRIP(T, NAME, LOAD8, 4)
#define FB_HALF_RUN FB_RUN16_VECTORS
#define FB_BF16_RUN FB_RUN16_PAIRS
#define FB_HALF_TWO_ROWS 1
#define FB_F32_WIDE 0
#endif
FB_ROWS_16(float, f32, fb_load_f32x8, fb_store_f32x8, fb_store_f32x16, fb_f32_same, fb_f32_same, FB_RUN16_VECTORS, 1)
FB_ROWS_16(fb_half, half, fb_load_half8, fb_store_half8, fb_store_half16, fb_half_to_f32, fb_f32_to_half, FB_HALF_RUN,
           FB_HALF_TWO_ROWS)
FB_ROWS_16(fb_bf16, bf16, fb_load_bf16x8, fb_store_bf16x8, fb_store_bf16x16, fb_bf16_to_f32, fb_f32_to_bf16, FB_BF16_RUN, 0)

#endif
