# ---------------------------------------------------------------------------------------
# Python entry points: check (cheaply, again) what the op layer validated, allocate, run.
# ---------------------------------------------------------------------------------------

cdef int BF16_NUM = np.dtype(ml_dtypes.bfloat16).num

from ._outputs import MIN_BYTES as _POOL_MIN_BYTES
from ._outputs import empty as _pooled_output  # large outputs reuse mapped pages (see _outputs.pyx)


cdef object _empty_output(x):
    """An uninitialised array like x: the pool's when large, else NumPy's (no Python call)."""
    cdef cnp.ndarray a = <cnp.ndarray> x
    if cnp.PyArray_NBYTES(a) < _POOL_MIN_BYTES:
        return cnp.PyArray_EMPTY(cnp.PyArray_NDIM(a), cnp.PyArray_DIMS(a), cnp.PyArray_TYPE(a), 0)
    return _pooled_output(x.shape, x.dtype)


include "_dispatch.pxi"  # run_any, reduce_any, samples_any, apply_any: the storage-type switches


cdef int _storage_kind(int type_num) noexcept:
    """The StorageKind of a NumPy type number; -1 for anything else."""
    if type_num == cnp.NPY_FLOAT:
        return STORAGE_FLOAT32
    if type_num == cnp.NPY_FLOAT16:
        return STORAGE_FLOAT16
    if type_num == BF16_NUM:
        return STORAGE_BFLOAT16
    return -1


cdef const float* _vector(object v, Py_ssize_t C, str name) except NULL:
    cdef cnp.ndarray a
    if isinstance(v, cnp.ndarray):
        a = <cnp.ndarray> v
        if (cnp.PyArray_TYPE(a) == cnp.NPY_FLOAT and cnp.PyArray_NDIM(a) == 1
                and cnp.PyArray_DIMS(a)[0] == C and cnp.PyArray_IS_C_CONTIGUOUS(a)
                and cnp.PyArray_ISALIGNED(a)):
            return <const float*> cnp.PyArray_DATA(a)
    raise ValueError(f"{name} must be a contiguous float32 vector of length {C}")


cdef void* _data(object t, object like, str name) except NULL:
    """Pointer to a contiguous 3-D (outer, C, inner) array of a storage type."""
    cdef cnp.ndarray a, b
    if isinstance(t, cnp.ndarray):
        a = <cnp.ndarray> t
        if (cnp.PyArray_NDIM(a) == 3 and cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISALIGNED(a)
                and _storage_kind(cnp.PyArray_TYPE(a)) >= 0):
            if like is None:
                return cnp.PyArray_DATA(a)
            b = <cnp.ndarray> like
            if (cnp.PyArray_TYPE(a) == cnp.PyArray_TYPE(b) and cnp.PyArray_DIMS(a)[0] == cnp.PyArray_DIMS(b)[0]
                    and cnp.PyArray_DIMS(a)[1] == cnp.PyArray_DIMS(b)[1]
                    and cnp.PyArray_DIMS(a)[2] == cnp.PyArray_DIMS(b)[2]):
                return cnp.PyArray_DATA(a)
            raise ValueError(f"{name} must have the shape and dtype of x")
    raise ValueError(f"{name} must be a contiguous 3-D (outer, C, inner) float32/float16/bfloat16 array")


cdef const double* _totals(object v, Py_ssize_t C, str name) except NULL:
    cdef cnp.ndarray a
    if isinstance(v, cnp.ndarray):
        a = <cnp.ndarray> v
        if (cnp.PyArray_TYPE(a) == cnp.NPY_DOUBLE and cnp.PyArray_NDIM(a) == 1
                and cnp.PyArray_DIMS(a)[0] == C and cnp.PyArray_IS_C_CONTIGUOUS(a)
                and cnp.PyArray_ISALIGNED(a)):
            return <const double*> cnp.PyArray_DATA(a)
    raise ValueError(f"{name} must be a contiguous float64 vector of length {C}")


cdef double* _scratch(Py_ssize_t nd, Py_ssize_t nf) except NULL:
    """One 64-byte aligned block of nd doubles then nf floats, not zeroed: every item zeroes the
    partials and lanes it adds to, and the combines, tiles and coefficients are written before
    they are read (zeroing a channels-last call's few hundred KB cost 5-8% of a small 16-bit
    forward).  PyMem_Raw*: thread-safe without the GIL, and visible to tracemalloc; the block
    malloc returned is kept just below the aligned one, for _scratch_free."""
    cdef size_t nbytes = nd * sizeof(double) + nf * sizeof(float)
    cdef char* raw = <char*> PyMem_RawMalloc(nbytes + 64)
    if raw == NULL:
        raise MemoryError(f"fbnops: cannot allocate {nbytes} bytes of kernel scratch")
    cdef char* wd = <char*> ((<size_t> raw + 64) & ~(<size_t> 63))  # (at least 8 bytes above raw)
    (<void**> wd)[-1] = raw
    return <double*> wd


cdef inline void _scratch_free(double* wd) noexcept:
    PyMem_RawFree((<void**> wd)[-1])


cdef int _dims(x, Py_ssize_t* outer, Py_ssize_t* C, Py_ssize_t* inner) except -1:
    """The (outer, C, inner) of a checked x; its storage kind."""
    cdef cnp.ndarray xa = <cnp.ndarray> x
    outer[0] = cnp.PyArray_DIMS(xa)[0]
    C[0] = cnp.PyArray_DIMS(xa)[1]
    inner[0] = cnp.PyArray_DIMS(xa)[2]
    if outer[0] * C[0] * inner[0] == 0:
        raise ValueError("empty inputs are handled by the op layer")
    return _storage_kind(cnp.PyArray_TYPE(xa))


cdef _call(Op op, x, dy, scale, offset, mean, variance, float epsilon, int num_threads):
    cdef void* px = _data(x, None, "x")
    cdef void* pb = _data(dy, x, "y_backprop") if dy is not None else px
    cdef Py_ssize_t outer, C, inner
    cdef StorageKind kind = <StorageKind> _dims(x, &outer, &C, &inner)
    cdef Params params
    cdef Plan P = make_plan(outer, C, inner, x.itemsize)
    params.op = op
    params.eps = epsilon
    params.n = <double>outer * <double>inner
    params.scale = _vector(scale, C, "scale")
    params.offset = _vector(offset, C, "offset") if offset is not None else NULL
    params.var_in = _vector(variance, C, "variance") if variance is not None else NULL

    out = _empty_output(x)
    cdef cnp.npy_intp nvec = C
    # The op's two per-channel outputs: (scale_backprop, offset_backprop) of a gradient,
    # (batch mean, batch variance) of a training forward.
    vec0 = cnp.PyArray_ZEROS(1, &nvec, cnp.NPY_FLOAT, 0)
    vec1 = cnp.PyArray_ZEROS(1, &nvec, cnp.NPY_FLOAT, 0)
    # Scratch, one block: float64 partials + totals, then float32 coefficients, lanes, tiles.
    cdef Py_ssize_t nd = scratch_doubles(&P)
    cdef double* wd = _scratch(nd, coefficient_floats(C) + scratch_floats(&P))
    cdef float* pcoef = <float*> (wd + nd)
    cdef Scratch S = carve(&P, wd, pcoef + coefficient_floats(C))
    cdef void* po = cnp.PyArray_DATA(out)
    params.A = pcoef
    params.B = pcoef + C
    params.K = pcoef + 2 * C
    params.scale_backprop = params.batch_mean = <float*> cnp.PyArray_DATA(vec0)
    params.offset_backprop = params.batch_var = <float*> cnp.PyArray_DATA(vec1)
    try:
        params.center = params.batch_mean if op == FWD_TRAIN else _vector(mean, C, "mean")
        with nogil:
            run_any(kind, &P, &params, px, pb, po, &S, max(num_threads, 1))
    finally:
        _scratch_free(wd)
    return out, vec0, vec1


def batch_norm_grad(x, dy, scale, mean, variance, *, float epsilon, bint is_training, int num_threads=1):
    """x, dy: contiguous (outer, C, inner); scale/mean/variance: float32 (C,).

    Returns ``(x_backprop, scale_backprop, offset_backprop)``.
    """
    return _call(GRAD_TRAIN if is_training else GRAD_FROZEN, x, dy, scale, None, mean, variance,
                 epsilon, num_threads)


def batch_norm(x, scale, offset, mean, variance, *, float epsilon, bint is_training, int num_threads=1):
    """Forward.  Returns ``(y, mean_used, variance_used)``: the batch statistics
    (mean, biased variance) in training, the given ones in inference."""
    if is_training:
        return _call(FWD_TRAIN, x, None, scale, offset, None, None, epsilon, num_threads)
    y, _, _ = _call(FWD_INFER, x, None, scale, offset, mean, variance, epsilon, num_threads)
    return y, mean, variance


# ---------------------------------------------------------------------------------------
# The stages, one entry each (fbnops.kernels.stages composes them).
# ---------------------------------------------------------------------------------------

def reduce_totals(int mode, x, dy, center, Py_ssize_t rows_per_sample=0, int num_threads=1):
    """float64 totals of one reduction pass (mode 0: [sum dy, sum dy*(x - m)], 1: [sum x, 0],
    2: [0, sum (x - m)**2]): shape (2, C), the numbers the op computes; with rows_per_sample > 0,
    per sample of that many outer rows: (outer // rows_per_sample, 2, C)."""
    if mode < RED_GRAD or mode > RED_SQ:
        raise ValueError(f"unknown reduction mode {mode}")
    cdef void* px = _data(x, None, "x")
    if mode == RED_GRAD and dy is None:
        raise ValueError("the gradient reduction needs y_backprop")
    cdef void* pb = _data(dy, x, "y_backprop") if dy is not None else px
    cdef Py_ssize_t outer, C, inner, nd, nchunks, nsamples = 0
    cdef StorageKind kind = <StorageKind> _dims(x, &outer, &C, &inner)
    cdef Params params
    params.center = _vector(center, C, "mean") if mode != RED_SUM else NULL
    cdef Plan P
    cdef Scratch S
    cdef double* wd
    cdef cnp.npy_intp dims[3]
    if rows_per_sample <= 0:
        P = make_plan(outer, C, inner, x.itemsize)
        nd = scratch_doubles(&P)
        wd = _scratch(nd, coefficient_floats(C) + scratch_floats(&P))
        dims[0] = 2
        dims[1] = C
        out = cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)
    else:
        if outer % rows_per_sample:
            raise ValueError(f"outer ({outer}) is not a multiple of rows_per_sample ({rows_per_sample})")
        nsamples = outer // rows_per_sample
        P = make_plan(rows_per_sample, C, inner, x.itemsize)
        nchunks = min(nsamples, max(num_threads, 1))
        nd = nchunks * scratch_doubles(&P)
        wd = _scratch(nd, coefficient_floats(C) + nchunks * scratch_floats(&P))
        dims[0] = nsamples
        dims[1] = 2
        dims[2] = C
        out = cnp.PyArray_EMPTY(3, dims, cnp.NPY_DOUBLE, 0)
    cdef float* pcoef = <float*> (wd + nd)
    params.A = pcoef  # (unset: the centres' tile is the only one a reduction reads)
    params.B = pcoef + C
    params.K = pcoef + 2 * C
    cdef double* po = <double*> cnp.PyArray_DATA(out)
    try:
        if rows_per_sample <= 0:
            S = carve(&P, wd, pcoef + coefficient_floats(C))
            with nogil:
                reduce_any(kind, &P, &params, <Reduce> mode, &S, px, pb, max(num_threads, 1))
            memcpy(po, S.s, 2 * C * sizeof(double))
        else:
            with nogil:
                samples_any(kind, &P, &params, <Reduce> mode, nsamples, wd, pcoef + coefficient_floats(C), px, pb, po,
                            max(num_threads, 1))
    finally:
        _scratch_free(wd)
    return out


def finish(int op, s0, s1, double n, float epsilon, scale, offset, variance, center):
    """The per-channel step from float64 totals: ``(vec0, vec1, A, B, K)`` (see channel_done: vec0, vec1
    are scale_backprop, offset_backprop of a gradient, the batch mean and variance of FWD_TRAIN);
    op 0/1: gradient training/frozen, 2: forward training (s0: sum x, s1: sum (x - mean)**2),
    3: inference (totals unused)."""
    if op < GRAD_TRAIN or op > FWD_INFER:
        raise ValueError(f"unknown op {op}")
    cdef Py_ssize_t C = len(scale), c
    cdef int p, npasses = 2 if op == FWD_TRAIN else 1
    cdef const double* t0 = _totals(s0, C, "s0")
    cdef const double* t1 = _totals(s1, C, "s1")
    cdef Params params
    params.op = <Op> op
    params.eps = epsilon
    params.n = n
    params.scale = _vector(scale, C, "scale")
    params.offset = _vector(offset, C, "offset") if op >= FWD_TRAIN else NULL
    params.var_in = _vector(variance, C, "variance") if op != FWD_TRAIN else NULL
    cdef cnp.npy_intp nvec = C
    vec0, vec1, A, B, K = [cnp.PyArray_ZEROS(1, &nvec, cnp.NPY_FLOAT, 0) for _ in range(5)]
    params.scale_backprop = params.batch_mean = <float*> cnp.PyArray_DATA(vec0)
    params.offset_backprop = params.batch_var = <float*> cnp.PyArray_DATA(vec1)
    params.A = <float*> cnp.PyArray_DATA(A)
    params.B = <float*> cnp.PyArray_DATA(B)
    params.K = <float*> cnp.PyArray_DATA(K)
    params.center = params.batch_mean if op == FWD_TRAIN else _vector(center, C, "mean")
    with nogil:
        for p in range(npasses):
            for c in range(C):
                channel_done(&params, p, c, t0[c], t1[c])
    return vec0, vec1, A, B, K


def apply(int amode, x, dy, A, B, K, center, int num_threads=1):
    """out = A*((dy + K) + B*(x - m)) (amode 0), A*dy (1) or B*(x - m) + K (2), per element."""
    if amode < APPLY_FULL or amode > APPLY_A:
        raise ValueError(f"unknown apply mode {amode}")
    cdef void* px = _data(x, None, "x")
    if amode != APPLY_A and dy is None:
        raise ValueError("the gradient apply needs y_backprop")
    cdef void* pb = _data(dy, x, "y_backprop") if dy is not None else px
    cdef Py_ssize_t outer, C, inner
    cdef StorageKind kind = <StorageKind> _dims(x, &outer, &C, &inner)
    cdef Params params
    params.A = <float*> _vector(A, C, "A")
    params.B = <float*> _vector(B, C, "B")
    params.K = <float*> _vector(K, C, "K")
    params.center = _vector(center, C, "mean")
    cdef Plan P = make_plan(outer, C, inner, x.itemsize)
    cdef Py_ssize_t nd = scratch_doubles(&P)
    cdef double* wd = _scratch(nd, scratch_floats(&P))
    cdef Scratch S = carve(&P, wd, <float*> (wd + nd))
    out = _empty_output(x)
    cdef void* po = cnp.PyArray_DATA(out)
    try:
        with nogil:
            apply_any(kind, &P, &params, <Apply> amode, &S, px, pb, po, max(num_threads, 1))
    finally:
        _scratch_free(wd)
    return out
