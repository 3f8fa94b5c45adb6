# Storage types of the kernels and their float32 load/store helpers.
#
# ``storage_t`` is the fused type every kernel is written over: float32 data is used
# as is; float16 and bfloat16 are widened exactly on load and rounded to nearest even
# on store (see _fp.h).

from ._plan cimport MAX_W


cdef extern from "_fp.h" nogil:
    ctypedef struct fb_half:
        unsigned short bits
    # the items' stack buffers, 64-byte aligned (.v is the array)
    ctypedef struct fb_f32_row:
        float v[MAX_W]
    ctypedef struct fb_f32_lanes:
        float v[2 * MAX_W]
    ctypedef struct fb_f32_tiles:
        float v[4 * MAX_W]
    ctypedef struct fb_f64_lanes:
        double v[2 * MAX_W]
    ctypedef struct fb_bf16:
        unsigned short bits
    float fb_half_to_f32(fb_half h)
    fb_half fb_f32_to_half(float f)
    float fb_bf16_to_f32(fb_bf16 h)
    fb_bf16 fb_f32_to_bf16(float f)
    # x86-64-v3: 16-bit rows converted 8 lanes at a time in registers; reductions of many rows
    # with the lane totals in registers (see _rows16.h, which _fp.h includes)
    const bint FB_HALF_ROWS
    void fb_reduce_half_row(int mode, const fb_half* a, const fb_half* b, Py_ssize_t W, const float* m,
                            float* s0, float* s1)
    void fb_reduce_half_rows(int mode, const fb_half* a, const fb_half* b, Py_ssize_t nrows, Py_ssize_t stride,
                             Py_ssize_t span, Py_ssize_t W, const float* m, float* s0, float* s1)
    void fb_apply_half_rows(int mode, const fb_half* a, const fb_half* b, fb_half* out, Py_ssize_t nrows,
                            Py_ssize_t W, const float* A, const float* B, const float* K, const float* m)
    void fb_apply_half_run(int mode, const fb_half* a, const fb_half* b, fb_half* out, Py_ssize_t L,
                           float A, float B, float K, float m)
    void fb_apply_f32_rows(int mode, const float* a, const float* b, float* out, Py_ssize_t nrows,
                           Py_ssize_t W, const float* A, const float* B, const float* K, const float* m)
    # x86-64-v4: float32 reductions in the same row functions, 16 lanes a step (see _wide512.h)
    const bint FB_F32_WIDE
    # x86-64-v4: a forward's rows of one piece summed in 256-lane blocks (fb_blocks_NAME in _wide512.h)
    const bint FB_ROW_BLOCKS
    void fb_reduce_f32_row(int mode, const float* a, const float* b, Py_ssize_t W, const float* m,
                           float* s0, float* s1)
    void fb_reduce_f32_rows(int mode, const float* a, const float* b, Py_ssize_t nrows, Py_ssize_t stride,
                            Py_ssize_t span, Py_ssize_t W, const float* m, float* s0, float* s1)
    # runs and rows with non-temporal stores (x86-64-v3; elsewhere: apply_run_streamed, apply_rows_streamed)
    void fb_apply_f32_run_streamed(int mode, const float* a, const float* b, float* out, Py_ssize_t L,
                                   float A, float B, float K, float m)
    void fb_apply_half_run_streamed(int mode, const fb_half* a, const fb_half* b, fb_half* out, Py_ssize_t L,
                                    float A, float B, float K, float m)
    void fb_apply_bf16_run_streamed(int mode, const fb_bf16* a, const fb_bf16* b, fb_bf16* out, Py_ssize_t L,
                                    float A, float B, float K, float m)
    void fb_apply_f32_rows_streamed(int mode, const float* a, const float* b, float* out, Py_ssize_t nrows,
                                    Py_ssize_t W, const float* A, const float* B, const float* K, const float* m)
    void fb_apply_half_rows_streamed(int mode, const fb_half* a, const fb_half* b, fb_half* out, Py_ssize_t nrows,
                                     Py_ssize_t W, const float* A, const float* B, const float* K, const float* m)
    void fb_apply_bf16_rows_streamed(int mode, const fb_bf16* a, const fb_bf16* b, fb_bf16* out, Py_ssize_t nrows,
                                     Py_ssize_t W, const float* A, const float* B, const float* K, const float* m)
    const bint FB_BF16_ROWS
    void fb_reduce_bf16_row(int mode, const fb_bf16* a, const fb_bf16* b, Py_ssize_t W, const float* m,
                            float* s0, float* s1)
    void fb_reduce_bf16_rows(int mode, const fb_bf16* a, const fb_bf16* b, Py_ssize_t nrows, Py_ssize_t stride,
                             Py_ssize_t span, Py_ssize_t W, const float* m, float* s0, float* s1)
    void fb_apply_bf16_rows(int mode, const fb_bf16* a, const fb_bf16* b, fb_bf16* out, Py_ssize_t nrows,
                            Py_ssize_t W, const float* A, const float* B, const float* K, const float* m)
    void fb_apply_bf16_run(int mode, const fb_bf16* a, const fb_bf16* b, fb_bf16* out, Py_ssize_t L,
                           float A, float B, float K, float m)
    # floats narrowed as the kernels' applies store them (reached by the tests through NARROW_RUNS)
    void fb_narrow_half_run(const float* v, fb_half* out, Py_ssize_t n)
    void fb_narrow_bf16_run(const float* v, fb_bf16* out, Py_ssize_t n)
    # outputs larger than the caches: rows copied out with non-temporal stores (see _stream.h, which _fp.h includes)
    void fb_stream_copy(void* dst, const void* src, Py_ssize_t nbytes)
    void fb_stream_fence()
    void fb_prefetch_lines(const void* p, Py_ssize_t nbytes)

# A build's narrowing runs, published by each kernel module as the capsule NARROW_RUNS_ADDRESS
# for the test hook _tools.narrow (the module itself has no test entry point).
ctypedef struct NarrowRuns:
    void (*half)(const float* v, fb_half* out, Py_ssize_t n) noexcept nogil
    void (*bf16)(const float* v, fb_bf16* out, Py_ssize_t n) noexcept nogil


ctypedef fused storage_t:
    float
    fb_half
    fb_bf16


cdef inline float load(const storage_t* p, Py_ssize_t i) noexcept nogil:
    if storage_t is float:
        return p[i]
    elif storage_t is fb_half:
        return fb_half_to_f32(p[i])
    else:
        return fb_bf16_to_f32(p[i])


cdef inline void store(storage_t* p, Py_ssize_t i, float v) noexcept nogil:
    if storage_t is float:
        p[i] = v
    elif storage_t is fb_half:
        p[i] = fb_f32_to_half(v)
    else:
        p[i] = fb_f32_to_bf16(v)
