# GENERATED from fbnops/kernels/_plan.py by `python -m fbnops.kernels._plan`: do not edit.
# (from _dispatch.pxi.tp, a Tempita template: the storage-type switches of the nogil drivers)

cdef enum StorageKind:
    STORAGE_FLOAT32 = 0
    STORAGE_FLOAT16 = 1
    STORAGE_BFLOAT16 = 2


cdef void run_any(StorageKind kind, const Plan* plan, Params* params, const void* a, const void* b, void* out, const Scratch* scratch, int nthreads) noexcept nogil:
    if kind == 0:
        run(plan, params, <const float*> a, <const float*> b, <float*> out, scratch, nthreads)
    elif kind == 1:
        run(plan, params, <const fb_half*> a, <const fb_half*> b, <fb_half*> out, scratch, nthreads)
    else:
        run(plan, params, <const fb_bf16*> a, <const fb_bf16*> b, <fb_bf16*> out, scratch, nthreads)


cdef void reduce_any(StorageKind kind, const Plan* plan, Params* params, Reduce mode, const Scratch* scratch, const void* a, const void* b, int nthreads) noexcept nogil:
    if kind == 0:
        reduce_pass(plan, params, mode, scratch, <const float*> a, <const float*> b, nthreads)
    elif kind == 1:
        reduce_pass(plan, params, mode, scratch, <const fb_half*> a, <const fb_half*> b, nthreads)
    else:
        reduce_pass(plan, params, mode, scratch, <const fb_bf16*> a, <const fb_bf16*> b, nthreads)


cdef void samples_any(StorageKind kind, const Plan* sample_plan, Params* params, Reduce mode, Py_ssize_t nsamples, double* work_doubles, float* work_floats, const void* a, const void* b, double* totals, int nthreads) noexcept nogil:
    if kind == 0:
        reduce_samples(sample_plan, params, mode, nsamples, work_doubles, work_floats, <const float*> a, <const float*> b, totals, nthreads)
    elif kind == 1:
        reduce_samples(sample_plan, params, mode, nsamples, work_doubles, work_floats, <const fb_half*> a, <const fb_half*> b, totals, nthreads)
    else:
        reduce_samples(sample_plan, params, mode, nsamples, work_doubles, work_floats, <const fb_bf16*> a, <const fb_bf16*> b, totals, nthreads)


cdef void apply_any(StorageKind kind, const Plan* plan, Params* params, Apply amode, const Scratch* scratch, const void* a, const void* b, void* out, int nthreads) noexcept nogil:
    if kind == 0:
        apply_pass(plan, params, amode, scratch, <const float*> a, <const float*> b, <float*> out, nthreads)
    elif kind == 1:
        apply_pass(plan, params, amode, scratch, <const fb_half*> a, <const fb_half*> b, <fb_half*> out, nthreads)
    else:
        apply_pass(plan, params, amode, scratch, <const fb_bf16*> a, <const fb_bf16*> b, <fb_bf16*> out, nthreads)
