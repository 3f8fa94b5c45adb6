"""The Numba backend: ``@njit`` kernels, a bitwise twin of the Cython ones.

The same program as the Cython kernels (see ``_cython/_batch_norm_impl.pxi``): the
canonical ``(outer, C, inner)`` view, reduction passes into float32 lanes flushed to
float64 partials, per-channel coefficients, one apply pass
``out = A*((b + K) + B*(a - m))``, and the work plan of ``_plan.py`` (which depends
on the shape only, combined in a fixed order), so that results are identical for
any thread count and equal to Cython's, byte for byte.  The loops and regions live
in ``_numba_loops.py``, the per-channel math in ``_numba_channels.py``, the stages' drivers in
``_numba_stages.py``; this module plans, drives and registers.

Importing it changes no global state: Numba's thread count is set around each
parallel call and restored afterwards.
"""

from __future__ import annotations

import warnings

import numba
import numba.core.errors
import numpy as np

from ..framework import dtypes
from ..framework.errors import InvalidArgumentError
from ..framework.registry import register_kernel, register_stage
from ..framework.threads import configured_count, note_parallel
from . import _numba_channels as channels
from . import _numba_loops as loops
from . import _numba_stages as stage_drivers
from . import outputs
from ._host import STREAM_ROWS_MIN_BYTES
from ._numba_fp import HARDWARE_HALF
from ._plan import STREAM_MIN_BYTES, Apply, Op, _moves, _streams, apply_mode, plan, threads_for

# Storage dtype of each input dtype: float32 as is, 16-bit floats as their bits (Numba has
# no float16/bfloat16 arrays).
_BITS = {
    np.dtype(np.float32): None,
    np.dtype(dtypes.float16): np.dtype(np.uint16),
    np.dtype(dtypes.bfloat16): np.dtype(np.int16),
}


# Each op's apply mode (_plan.apply_mode), looked up: the function's enum lookups cost ~0.65 us a call.
_APPLY_MODE = {op: apply_mode(op) for op in Op}

# Where _plan._streams starts streaming; tests lower it to stream small outputs (the bits must not
# change), as _tools.set_stream_min_bytes does for the C kernels.  Production code never writes it.
stream_min_bytes = STREAM_MIN_BYTES
stream_rows_min_bytes = STREAM_ROWS_MIN_BYTES  # (channels-last passes: the host's)


def _streamed(p, x: np.ndarray, amode: int) -> bool:
    """Whether the apply pass writes its output non-temporally: _plan._streams, as the C kernels
    decide (float16 only where Numba converts with F16C, the x86-64-v3 build's instructions).
    Passes that move too little to stream return at once (the whole rule cost 1.3 us a call)."""
    full = amode == Apply.APPLY_FULL
    if _moves(x.size, x.dtype.itemsize, full) < min(stream_min_bytes, stream_rows_min_bytes):
        return False
    if x.dtype == dtypes.float16 and not HARDWARE_HALF:
        return False
    return _streams(p.channels_last, p.block, x.size, x.dtype.itemsize, full, stream_min_bytes, stream_rows_min_bytes)


def _storage(x: np.ndarray, writeable: bool = True) -> np.ndarray:
    """Flat storage of x (a new view: x's own flags are untouched), read-only unless writeable.

    Numba types read-only arrays apart from writeable ones, so inputs are always passed
    read-only: one compiled specialization (and one disk-cache entry, the one warm_up
    fills) serves callers' writeable and read-only arrays alike."""
    try:
        bits = _BITS[x.dtype]
    except KeyError:  # the ops check dtypes first: this guards direct kernel calls
        raise InvalidArgumentError(
            f"numba kernels: x (and dy) must be float32, float16 or bfloat16, got {x.dtype}"
        ) from None
    flat = x.reshape(-1)
    if bits is not None:
        flat = flat.view(bits)
    if not writeable:
        flat.flags.writeable = False
    return flat


def _frozen(a: np.ndarray) -> np.ndarray:
    """A read-only view of a per-channel vector (see _storage)."""
    view = a.view()
    view.flags.writeable = False
    return view


def _inputs(x, dy):
    """The storage of x and of dy (x again where the op has no dy), read-only."""
    a = _storage(x, writeable=False)
    return a, (_storage(dy, writeable=False) if dy is not None else a)


def _threads(nelems: int) -> int:
    """The threads of a call over nelems elements (1: the serial twins)."""
    return min(threads_for(nelems), numba.config.NUMBA_NUM_THREADS)


def _chunks(nitems: int, nelems: int) -> int:
    """Chunks of items per region, and the threads that run them: one per thread.  Numba splits
    a prange evenly over the threads, so more chunks balance nothing, and each chunk allocates
    its scratch (64 chunks cost a tenth of a small call).  One chunk runs on the serial twins, as
    the C kernels' for_items runs one item: a parallel region of one chunk still woke the team
    (one-item forwards of 32K to 64K values took 0.73-0.79x the time without it).  Each item's
    result is its own, so the chunking never changes the bits."""
    return min(nitems, _threads(nelems))


def _launch(twins, n: int, *args):
    """Run a region (or the driver) on n threads: its serial twin on one (no thread pool
    touched), else the parallel one with Numba's thread count (per calling thread) set to n
    for the call and restored after; left alone when it already is n (each set costs ~1.5 us)."""
    if n == 1:
        return twins[0](*args)
    note_parallel()
    before = numba.get_num_threads()
    if before == n:
        return twins[1](*args)
    numba.set_num_threads(n)
    try:
        return twins[1](*args)
    finally:
        numba.set_num_threads(before)


def _zeros(C: int) -> np.ndarray:
    return np.zeros(C, np.float32)


def _vector(v) -> np.ndarray:
    """A per-channel input as the kernels take it: read-only (see _storage), an empty array if absent."""
    return _frozen(v) if v is not None else _ABSENT


_ABSENT = _frozen(np.zeros(0, np.float32))


def _per_channel(op: int, epsilon: float, n: float, scale, offset, variance, center) -> tuple:
    """The per-channel arguments of the driver and the finish stage (see make_params)."""
    return int(op), float(epsilon), n, _frozen(scale), _vector(offset), _vector(variance), _vector(center)


def _run(op: int, x, dy, scale, offset, mean, variance, epsilon: float):
    outer, C, inner = x.shape
    a, b = _inputs(x, dy)
    out_arr = outputs.empty_like(x)
    p = plan(outer, C, inner, x.dtype.itemsize)
    per_channel = _per_channel(op, epsilon, float(outer) * float(inner), scale, offset, variance, mean)
    n = _chunks(p.nitems, x.size)
    stream = _streamed(p, x, _APPLY_MODE[op])
    vecs = _launch(loops.drive, n, a, b, _storage(out_arr), tuple(p), n, *per_channel, stream)
    return out_arr, vecs[0], vecs[1]


@register_kernel("FusedBatchNormGradV3", "numba")
def batch_norm_grad(x, dy, scale, mean, variance, *, epsilon, is_training):
    return _run(Op.GRAD_TRAIN if is_training else Op.GRAD_FROZEN, x, dy, scale, None, mean, variance, epsilon)


@register_kernel("FusedBatchNormV3", "numba")
def batch_norm(x, scale, offset, mean, variance, *, epsilon, is_training):
    if is_training:
        return _run(Op.FWD_TRAIN, x, None, scale, offset, None, None, epsilon)
    y, _, _ = _run(Op.FWD_INFER, x, None, scale, offset, mean, variance, epsilon)
    return y, mean, variance


# ---------------------------------------------------------------------------------------
# The stages (fbnops.kernels.stages): partials, finish, apply
# ---------------------------------------------------------------------------------------


@register_stage("reduce_totals", "numba")
def reduce_totals(mode, x, dy, center, rows_per_sample):
    outer, C, inner = x.shape
    a, b = _inputs(x, dy)
    center = _frozen(center if center is not None else _zeros(C))
    p = plan(rows_per_sample or outer, C, inner, x.dtype.itemsize)
    if not rows_per_sample:
        n = _chunks(p.nitems, x.size)
        s = np.empty((2, C))
        _launch(stage_drivers.reduce_totals, n, a, b, int(mode), tuple(p), n, center, s)
        return s
    nsamples = outer // rows_per_sample
    out = np.empty((nsamples, 2, C))
    n = _chunks(nsamples, x.size)
    _launch(stage_drivers.reduce_samples, n, a, b, int(mode), tuple(p), nsamples, n, center, out)
    return out


@register_stage("finish", "numba")
def finish(op, s0, s1, count, epsilon, scale, offset, variance, center):
    per_channel = _per_channel(op, epsilon, float(count), scale, offset, variance, center)
    vecs = channels.finish(*per_channel, _frozen(s0), _frozen(s1))
    return vecs[0], vecs[1], vecs[2], vecs[3], vecs[4]


@register_stage("apply", "numba")
def apply(amode, x, dy, A, B, K, center):
    outer, C, inner = x.shape
    a, b = _inputs(x, dy)
    A, B, K, center = (_frozen(v) for v in (A, B, K, center))
    out_arr = outputs.empty_like(x)
    p = plan(outer, C, inner, x.dtype.itemsize)
    n = _chunks(p.nitems, x.size)
    stream = _streamed(p, x, amode)
    _launch(stage_drivers.apply, n, a, b, _storage(out_arr), int(amode), tuple(p), n, A, B, K, center, stream)
    return out_arr


# The warm-up's parts, one per dtype, slowest first (bfloat16 rounds by hand; float16 converts in
# software or F16C). A dtype's serial and parallel twins call the same compiled row sweeps, so they
# stay in one part; split apart, both processes would compile them (from an empty cache here:
# one process 883 s, two processes with one dtype each 581 s).
WARM_UP_SHAPES = ((64, 8, 1), (4, 8, 16), (2, 8, 4), (8192, 8, 1), (4, 8, 2048))  # the last two: parallel
WARM_UP_PARTS = ("bfloat16", "float16", "float32")


def warm_up(jobs: int = 1) -> None:
    """Compile (or load from the cache) every specialization: serial and parallel twins, both
    layouts, all dtypes, all modes, and the stages (partials per call and per sample, finish, apply).

    With jobs > 1, that many fresh processes compile the parts between them into the shared
    disk cache (whose files are locked, see _numba_cache), and this process loads nothing."""
    from ._numba_cache import LOCKS

    if jobs <= 1 or not LOCKS:
        for dtype in WARM_UP_PARTS:
            warm_up_part(dtype)
        return
    import concurrent.futures
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter each: no forked thread pools
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=spawn) as pool:
        for done in [pool.submit(warm_up_part, dtype) for dtype in WARM_UP_PARTS]:
            done.result()  # a part's error is raised here


def warm_up_part(dtype_name: str) -> None:
    """Compile (or load) the specializations one dtype's calls reach: small shapes run the serial
    twins, the last two are past SERIAL_BELOW (the parallel ones).

    The calls use the configured thread count, not the cores other processes leave idle
    (configured_count): on a busy machine, and a parallel warm-up keeps it busy, the
    large shapes would run the serial twins and leave the parallel ones uncompiled."""
    with configured_count(), warnings.catch_warnings():
        # (Numba's own pedantic IR notes, "please report", are not ours to act on)
        warnings.simplefilter("ignore", numba.core.errors.NumbaIRAssumptionWarning)
        _compile_part(getattr(dtypes, dtype_name))


def _compile_part(dt) -> None:
    from ..framework.registry import backend
    from . import stages

    rng = np.random.default_rng(0)
    for shape in WARM_UP_SHAPES:
        x = rng.standard_normal(shape).astype(dt)
        v = np.ones(shape[1], np.float32)
        n = shape[0] * shape[2]
        for training in (True, False):
            batch_norm_grad(x, x, v, v, v, epsilon=1e-3, is_training=training)
            stats = (None, None) if training else (v, v)  # as the op passes them: no inputs in training
            batch_norm(x, v, v, *stats, epsilon=1e-3, is_training=training)
        with backend("numba"):
            rows = shape[0] // 2  # per-sample partials (reproducible synchronized batch norm)
            stages.sum_x(x, rows_per_sample=rows), stages.sum_sq(x, v, rows_per_sample=rows)
            stages.sum_grad(x, x, v, rows_per_sample=rows)
            sx, sq, sums = stages.sum_x(x), stages.sum_sq(x, v), stages.sum_grad(x, x, v)
            for training in (True, False):
                stages.apply_grad(x, x, stages.finish_grad(sums, n, v, v, v, 1e-3, training)[2])
            stages.apply_forward(x, stages.finish_forward(sx, sq, n, v, v, 1e-3)[2])
            stages.apply_forward(x, stages.finish_inference(v, v, v, v, 1e-3))
