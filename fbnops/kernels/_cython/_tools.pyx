# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Tools beside the production kernels: the benchmarks' streaming floor and the test hooks.

* ``stream_add``: out = a + b, the memory-bandwidth yardstick of the benchmarks;
* ``stream_sum``: the total of a + b, reading both once: the read pass that a two-pass gradient
  adds to that yardstick;
* ``round_to_half`` / ``round_to_bfloat16`` / ``widen``: the kernels' 16-bit conversions
  (``_fp.h``), exposed so the tests can check them exhaustively against NumPy/ml_dtypes;
* ``plan``: the C work plan (``_plan.pxd``, generated from ``fbnops.kernels._plan``), tested
  equal to ``fbnops.kernels._plan.plan``;
* ``set_stream_min_bytes``: the bytes an apply pass moves from which a kernel module streams its stores
  (tests force streaming on small outputs to check that the bits do not change);
* ``set_cached_max_bytes``: the input bytes under which a kernel module's reductions add rows in
  strips (tests force the one-row loop to check that both give the same bits);
* ``narrow``: float32 values rounded to float16/bfloat16 by a kernel module's own vector stores
  (16 and 8 lanes at a time in the x86-64-v3 build), checked against NumPy/ml_dtypes;
* ``add_chain_seconds``: the time of a chain of dependent register-to-register adds, one per
  cycle on any x86-64 core: the clock this process actually gets (the benchmarks' CPU-speed witness).
"""

import ml_dtypes
import numpy as np

from fbnops.kernels._plan import check_plan_args

cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_GetPointer
from cython.parallel cimport prange

from ._fp cimport NarrowRuns, fb_bf16, fb_f32_to_bf16, fb_f32_to_half, fb_half, load
from ._plan cimport Plan, make_plan

cnp.import_array()


def plan(Py_ssize_t outer, Py_ssize_t C, Py_ssize_t inner, Py_ssize_t itemsize=4):
    """The Cython kernels' work partition for a shape, as a dict."""
    check_plan_args(outer, C, inner, itemsize)  # make_plan divides by these
    cdef Plan P = make_plan(outer, C, inner, itemsize)
    return dict(P)


cdef Py_ssize_t _swap(capsule, const char* name, Py_ssize_t nbytes) except? -1:
    """Write the kernel module's threshold behind ``capsule`` (see _batch_norm_impl.pxi); return the old value."""
    cdef Py_ssize_t* threshold = <Py_ssize_t*> PyCapsule_GetPointer(capsule, name)
    cdef Py_ssize_t old = threshold[0]
    threshold[0] = nbytes
    return old


def set_stream_min_bytes(kernels, nbytes):
    """Apply passes that move at least ``nbytes`` (inputs and output) write the output of the kernel
    module ``kernels`` (batch_norm or batch_norm_avx2) with non-temporal stores.  ``nbytes``: one
    threshold for every pass, or (channels-first, channels-last) as returned; returns the old pair."""
    first, rows = nbytes if isinstance(nbytes, tuple) else (nbytes, nbytes)
    return (_swap(kernels.STREAM_MIN_BYTES_ADDRESS, b"fbnops.stream_min_bytes", first),
            _swap(kernels.STREAM_ROWS_MIN_BYTES_ADDRESS, b"fbnops.stream_rows_min_bytes", rows))


def set_cached_max_bytes(kernels, Py_ssize_t nbytes):
    """Reductions of inputs under ``nbytes`` add rows in strips in the kernel module ``kernels`` (0: every
    reduction adds its rows one by one); returns the old threshold."""
    return _swap(kernels.CACHED_MAX_BYTES_ADDRESS, b"fbnops.cached_max_bytes", nbytes)


def set_prefetch_block_max_bytes(kernels, Py_ssize_t nbytes):
    """Fused channels-first blocks of at most ``nbytes`` of inputs request the next block's planes in the
    kernel module ``kernels`` (0: none do); returns the old threshold."""
    return _swap(kernels.PREFETCH_BLOCK_MAX_BYTES_ADDRESS, b"fbnops.prefetch_block_max_bytes", nbytes)


def narrow(kernels, const float[::1] v, dtype):
    """float32 values -> ``dtype`` (float16 or bfloat16) rounded as the kernel module ``kernels``
    (batch_norm or batch_norm_avx2) stores its outputs."""
    dtype = np.dtype(dtype)
    if dtype != np.float16 and dtype != np.dtype(ml_dtypes.bfloat16):
        raise ValueError(f"dtype must be float16 or bfloat16, not {dtype}")
    cdef NarrowRuns* runs = <NarrowRuns*> PyCapsule_GetPointer(kernels.NARROW_RUNS_ADDRESS, b"fbnops.narrow_runs")
    out = np.empty(v.shape[0], np.uint16)
    cdef unsigned short[::1] o = out
    cdef Py_ssize_t n = v.shape[0]
    cdef bint half = dtype == np.float16
    if n:
        with nogil:
            if half:
                runs.half(&v[0], <fb_half*> &o[0], n)
            else:
                runs.bf16(&v[0], <fb_bf16*> &o[0], n)
    return out.view(dtype)


def round_to_half(const float[::1] v):
    out = np.empty(v.shape[0], np.uint16)
    cdef unsigned short[::1] o = out
    cdef Py_ssize_t i
    for i in range(v.shape[0]):
        o[i] = fb_f32_to_half(v[i]).bits
    return out.view(np.float16)


def round_to_bfloat16(const float[::1] v):
    out = np.empty(v.shape[0], np.uint16)
    cdef unsigned short[::1] o = out
    cdef Py_ssize_t i
    for i in range(v.shape[0]):
        o[i] = fb_f32_to_bf16(v[i]).bits
    return out.view(ml_dtypes.bfloat16)


def widen(x):
    """float16/bfloat16 array -> float32 through the kernels' load()."""
    x = np.ascontiguousarray(x)
    n = x.size
    out = np.empty(n, np.float32)
    cdef float* o = <float*> cnp.PyArray_DATA(out)
    cdef void* p = cnp.PyArray_DATA(x)
    cdef Py_ssize_t i
    if x.dtype == np.float16:
        for i in range(n):
            o[i] = load(<const fb_half*> p, i)
    elif x.dtype == np.dtype(ml_dtypes.bfloat16):
        for i in range(n):
            o[i] = load(<const fb_bf16*> p, i)
    else:
        raise ValueError("widen expects float16 or bfloat16")
    return out.reshape(x.shape)


cdef extern from *:
    """
    /* out = a + b with streaming (non-temporal) stores: no read-for-ownership of `out`. */
    #if defined(__SSE2__) || defined(_M_X64)
    #include <xmmintrin.h>
    #include <stdint.h>
    static void fbnops_add_streaming(const float* a, const float* b, float* o, Py_ssize_t n) {
        Py_ssize_t i = 0;
        for (; i < n && ((uintptr_t)(o + i) & 15); i++) o[i] = a[i] + b[i];
        for (; i + 4 <= n; i += 4)
            _mm_stream_ps(o + i, _mm_add_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
        for (; i < n; i++) o[i] = a[i] + b[i];
        _mm_sfence();
    }
    #else
    static void fbnops_add_streaming(const float* a, const float* b, float* o, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) o[i] = a[i] + b[i];
    }
    #endif
    """
    void fbnops_add_streaming(const float* a, const float* b, float* o, Py_ssize_t n) noexcept nogil


cdef float* _floats(object v, Py_ssize_t n, str name) except NULL:
    cdef cnp.ndarray a
    if isinstance(v, cnp.ndarray):
        a = <cnp.ndarray> v
        if (cnp.PyArray_TYPE(a) == cnp.NPY_FLOAT and cnp.PyArray_SIZE(a) == n
                and cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISALIGNED(a)):
            return <float*> cnp.PyArray_DATA(a)
    raise ValueError(f"{name} must be a contiguous float32 array of {n} elements")


cdef enum:
    STREAM_CHUNKS = 64  # the yardsticks' static partition: a range of elements per chunk


cdef inline Py_ssize_t chunk_start(Py_ssize_t n, Py_ssize_t k) noexcept nogil:
    """Where chunk ``k`` of ``n`` elements starts (chunk STREAM_CHUNKS starts at ``n``)."""
    return n * k // STREAM_CHUNKS


def stream_add(a, b, out, int num_threads=1, bint streaming=False):
    """out = a + b over float32 arrays: the streaming-bandwidth yardstick of the benchmarks
    (2 reads + 1 write per element, the same threads and static partition as the kernels;
    `streaming`: non-temporal stores, which skip reading `out` into the cache first)."""
    cdef Py_ssize_t n = a.size, k, i, i0, i1
    cdef const float* pa = _floats(a, n, "a")
    cdef const float* pb = _floats(b, n, "b")
    cdef float* po = _floats(out, n, "out")
    if not out.flags.writeable:
        raise ValueError("out must be writeable")
    num_threads = max(num_threads, 1)
    with nogil:
        for k in prange(STREAM_CHUNKS, schedule="static", num_threads=num_threads, use_threads_if=num_threads > 1):
            i0, i1 = chunk_start(n, k), chunk_start(n, k + 1)
            if streaming:
                fbnops_add_streaming(pa + i0, pb + i0, po + i0, i1 - i0)
            else:
                for i in range(i0, i1):
                    po[i] = pa[i] + pb[i]


cdef extern from *:
    """
    /* The total of a[i] + b[i], reading each array once.  Four vector totals side by side, so
       that the adds keep up with memory (one total would wait on its own latency). */
    #if defined(__SSE2__) || defined(_M_X64)
    #include <xmmintrin.h>
    static double fbnops_sum_two(const float* a, const float* b, Py_ssize_t n) {
        __m128 t0 = _mm_setzero_ps(), t1 = t0, t2 = t0, t3 = t0;
        Py_ssize_t i = 0;
        for (; i + 16 <= n; i += 16) {
            t0 = _mm_add_ps(t0, _mm_add_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
            t1 = _mm_add_ps(t1, _mm_add_ps(_mm_loadu_ps(a + i + 4), _mm_loadu_ps(b + i + 4)));
            t2 = _mm_add_ps(t2, _mm_add_ps(_mm_loadu_ps(a + i + 8), _mm_loadu_ps(b + i + 8)));
            t3 = _mm_add_ps(t3, _mm_add_ps(_mm_loadu_ps(a + i + 12), _mm_loadu_ps(b + i + 12)));
        }
        float lanes[4];
        _mm_storeu_ps(lanes, _mm_add_ps(_mm_add_ps(t0, t1), _mm_add_ps(t2, t3)));
        double total = (double)lanes[0] + lanes[1] + lanes[2] + lanes[3];
        for (; i < n; i++) total += (double)a[i] + b[i];
        return total;
    }
    #else
    static double fbnops_sum_two(const float* a, const float* b, Py_ssize_t n) {
        double total = 0.0;
        for (Py_ssize_t i = 0; i < n; i++) total += (double)a[i] + b[i];
        return total;
    }
    #endif
    """
    double fbnops_sum_two(const float* a, const float* b, Py_ssize_t n) noexcept nogil


def stream_sum(a, b, int num_threads=1):
    """The total of a + b over float32 arrays, reading each once (the same threads and static
    partition as stream_add): the read pass that a gradient adds to the floor, since it reads x
    and dy once for its sums and once more to apply them.  Returned so that the reads count."""
    cdef Py_ssize_t n = a.size, k, i0, i1
    cdef const float* pa = _floats(a, n, "a")
    cdef const float* pb = _floats(b, n, "b")
    cdef double parts[STREAM_CHUNKS]
    cdef double total = 0.0
    num_threads = max(num_threads, 1)
    with nogil:
        for k in prange(STREAM_CHUNKS, schedule="static", num_threads=num_threads, use_threads_if=num_threads > 1):
            i0, i1 = chunk_start(n, k), chunk_start(n, k + 1)
            parts[k] = fbnops_sum_two(pa + i0, pb + i0, i1 - i0)
    for k in range(STREAM_CHUNKS):  # (a C loop: a generator here would move `parts` into a Python closure)
        total += parts[k]
    return total


cdef extern from *:
    """
    #include <time.h>
    /* A chain of dependent register-to-register adds (8 per loop trip, so the loop's own
       instructions overlap the chain): one cycle each on any x86-64 core, whatever the vendor.
       Not adds of an immediate: Intel's Golden Cove cores (Sapphire Rapids) fold chains of those
       while renaming, and the same chain read as 6 to 12 GHz there.  -1 where not x86-64. */
    static double fbnops_add_chain_seconds(long trips) {
    #if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
        struct timespec t0, t1;
        long x = 0, one = 1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < trips; i++)
            __asm__ volatile("add %1, %0; add %1, %0; add %1, %0; add %1, %0; "
                             "add %1, %0; add %1, %0; add %1, %0; add %1, %0" : "+r"(x) : "r"(one));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        return (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    #else
        (void)trips;
        return -1.0;
    #endif
    }
    """
    double fbnops_add_chain_seconds(long trips) noexcept nogil


ADDS_PER_TRIP = 8


def add_chain_seconds(long adds):
    """Seconds for ``adds`` dependent integer adds (rounded down to whole trips of 8), or None
    where the chain is not written for this CPU (not x86-64).  adds / seconds is the clock the
    calling thread got, in cycles per second: a host that takes cycles from a virtual machine
    slows it where /proc/stat shows nothing."""
    if adds < ADDS_PER_TRIP:
        raise ValueError(f"adds must be at least {ADDS_PER_TRIP}, got {adds}")
    cdef double seconds
    cdef long trips = adds // ADDS_PER_TRIP
    with nogil:
        seconds = fbnops_add_chain_seconds(trips)
    return None if seconds < 0 else seconds
