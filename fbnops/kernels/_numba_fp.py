"""16-bit storage for the Numba kernels: float16 and bfloat16 as bits, exact widening,
round-to-nearest-even narrowing (the twin of ``_cython/_fp.h``); ``borrowed``, the
uncounted array views of the row sweeps; and ``lane_totals``, the lane fold's adds as vectors.

Numba has no float16/bfloat16 on the CPU: float16 data is read as ``uint16`` and
bfloat16 bits as ``int16`` (a distinct type, so the choice is made when Numba types
the call).  float16 is converted by LLVM's ``half`` type when Numba compiles for a CPU
with F16C (the x86-64-v3 Cython build's instructions), else with integer bit
manipulation plus a bitcast intrinsic (llvmlite), as the portable Cython build does.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from ._plan import Apply

# Contraction (a*b + c -> FMA) only, which is what GCC does by default: no reassociation,
# no reciprocals, no nnan/ninf.  The hot loops vectorize without reassociation (per-lane
# accumulators), and every rounding is then the C kernels' rounding, whatever LLVM inlines.
FASTMATH = {"contract"}


# ---------------------------------------------------------------------------------------
# 16-bit storage: bit casts and conversions
# ---------------------------------------------------------------------------------------


@intrinsic
def _f32_from_bits(typingctx, u):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


@intrinsic
def _bits_from_f32(typingctx, f):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@intrinsic
def borrowed(typingctx, arr):
    """arr without its reference count: a view Numba does not count (no meminfo).  Every array
    a function passes to an inlined helper is counted up and down once per call, with atomic
    adds (measured 13% of a channels-first gradient's reduction, a helper call per plane);
    a borrowed array's counts are calls that return at once.  Only for arrays whose owner
    outlives every use: a function's arguments, borrowed at its top."""

    def codegen(context, builder, signature, args):
        ary = context.make_array(arr)(context, builder, value=args[0])
        view = context.make_array(arr)(context, builder)
        for field in ("nitems", "itemsize", "data", "shape", "strides"):
            setattr(view, field, getattr(ary, field))
        view.meminfo = ir.Constant(ary.meminfo.type, None)
        view.parent = ir.Constant(ary.parent.type, None)
        return view._getvalue()

    return arr(arr), codegen


@intrinsic
def lane_totals(typingctx, v, start, groups):
    """The eight running totals of v[start:start + 8 * groups], lane start + 8i + k added into
    total k (float64), as one vector of eight totals: the same adds in the same order as eight
    scalar totals, which LLVM leaves scalar (a widening and an add per lane; this is 2-3x as
    fast).  v: a contiguous float32 or float64 vector."""
    floats = (types.float32, types.float64)
    if not (isinstance(v, types.Array) and v.ndim == 1 and v.layout == "C" and v.dtype in floats):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, value=args[0])
        lanes_type, totals_type = ir.VectorType(context.get_value_type(v.dtype), 8), ir.VectorType(ir.DoubleType(), 8)
        base = builder.gep(ary.data, [args[1]])
        totals = cgutils.alloca_once_value(builder, ir.Constant(totals_type, None))  # +0.0 each
        with cgutils.for_range(builder, args[2]) as loop:
            at = builder.gep(base, [builder.mul(loop.index, ir.Constant(loop.index.type, 8))])
            lanes = builder.load(builder.bitcast(at, lanes_type.as_pointer()), align=v.dtype.bitwidth // 8)
            if v.dtype == types.float32:
                lanes = builder.fpext(lanes, totals_type)  # exact
            builder.store(builder.fadd(builder.load(totals), lanes), totals)
        result = builder.load(totals)
        k = [builder.extract_element(result, ir.Constant(ir.IntType(32), k)) for k in range(8)]
        return context.make_tuple(builder, signature.return_type, k)

    return types.UniTuple(types.float64, 8)(v, types.intp, types.intp), codegen


def compiles_for(feature: str) -> bool:
    """Whether Numba compiles for a CPU with this LLVM feature ("f16c", "avx"); False if unknown."""
    try:
        from numba.core.registry import cpu_target

        return f"+{feature}" in cpu_target.target_context.codegen()._tm_features.split(",")
    except (ImportError, AttributeError):  # a Numba without this private attribute: the portable paths
        return False


# Where Numba compiles for AVX-512, the sweeps ask LLVM for 512-bit vectors (wide_vectors): its
# tuning for Intel's AVX-512 CPUs prefers 256-bit ones in the loops it vectorizes itself, and on an
# Emerald Rapids that left Numba's channels-last 16-bit applies at 1.4-1.6x the C kernels' time,
# whose x86-64-v4 build takes 16 lanes a vector.  Lanes are independent: the same bits.
WIDE_VECTORS = compiles_for("avx512f")
_PREFER_512 = '"prefer-vector-width"="512"'


@intrinsic
def wide_vectors(typingctx):
    """Mark the function being compiled to prefer 512-bit vectors (WIDE_VECTORS; else nothing).
    An LLVM string attribute, which llvmlite's attribute set does not list: added to the set as is."""

    def codegen(context, builder, signature, args):
        if WIDE_VECTORS:
            set.add(builder.function.attributes, _PREFER_512)
        return context.get_dummy_value()

    return types.void(), codegen


# With F16C, LLVM's half <-> float conversions are the x86-64-v3 Cython build's instructions
# (the same bits, round to nearest even) and vectorize 8 at a time; the integer twins of
# _fp.h below are the portable path.
HARDWARE_HALF = compiles_for("f16c")


@intrinsic
def _f32_from_half_bits(typingctx, h):
    def codegen(context, builder, signature, args):
        half = builder.bitcast(builder.trunc(args[0], ir.IntType(16)), ir.HalfType())
        return builder.fpext(half, ir.FloatType())

    return types.float32(types.uint32), codegen


@intrinsic
def _half_bits_from_f32(typingctx, f):
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


@njit(inline="always")
def _half_to_f32_soft(h):
    em = np.uint32(h & 0x7FFF) << np.uint32(13)
    u = _bits_from_f32(_f32_from_bits(em) * np.float32(5.192296858534828e33))  # * 2**112
    if em >= np.uint32(0x7C00 << 13):
        u |= np.uint32(0x7F800000)
    u |= np.uint32(h & 0x8000) << np.uint32(16)
    return _f32_from_bits(u)


@njit(inline="always")
def _f32_to_half_soft(f):
    u = _bits_from_f32(f)
    sign = (u >> np.uint32(16)) & np.uint32(0x8000)
    a = u & np.uint32(0x7FFFFFFF)
    if a >= np.uint32(0x47800000):
        out = np.uint32(0x7E00) if a > np.uint32(0x7F800000) else np.uint32(0x7C00)
    elif a < np.uint32(0x38800000):
        out = _bits_from_f32(_f32_from_bits(a) + np.float32(0.5)) - np.uint32(0x3F000000)
    else:
        out = (a + np.uint32(0xC8000FFF) + ((a >> np.uint32(13)) & np.uint32(1))) >> np.uint32(13)
    return np.uint16(out | sign)


_half_to_f32 = _f32_from_half_bits if HARDWARE_HALF else _half_to_f32_soft
_f32_to_half = _half_bits_from_f32 if HARDWARE_HALF else _f32_to_half_soft


@njit(inline="always")
def _bf16_to_f32(h):
    return _f32_from_bits(np.uint32(h) << np.uint32(16))


# (Numba widens integer arithmetic to 64 bits; the np.uint32 casts keep every step in 32-bit
# lanes, which LLVM then vectorizes eight to a vector instead of four.)
@njit(inline="always")
def _bf16_round_high(u):
    """The bfloat16 rounding of float32 bits u, left in the upper half of the word (the lower half
    is not cleared): round to nearest even, or for a NaN the quiet bit set."""
    nan = np.uint32(u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    rounded = np.uint32(np.uint32(u + np.uint32(0x7FFF)) + np.uint32(np.uint32(u >> np.uint32(16)) & np.uint32(1)))
    return np.uint32(u | np.uint32(0x400000)) if nan else rounded


@njit(inline="always")
def _f32_to_bf16(f):
    return np.uint16(_bf16_round_high(_bits_from_f32(f)) >> np.uint32(16))


@njit(inline="always")
def _bf16_pair(w_even_high, w_odd_high):
    """One 32-bit word of two bfloat16 results: the even value (rounded) low, the odd one high."""
    return np.uint32(np.uint32(w_even_high >> np.uint32(16)) | np.uint32(w_odd_high & np.uint32(0xFFFF0000)))


def pairs_of(a):
    """True for bfloat16 bits (int16): their words hold two values each (see _apply_run_pairs)."""


@overload(pairs_of, inline="always")
def _pairs_of_impl(a):
    value = a.dtype == types.int16
    return lambda a: value


def _load(a, i):
    """Element i of a storage array as float32 (specialized per dtype at compile time)."""


def _store(out, i, v):
    """Round v to the storage type of out and store it at i."""


# Storage dtypes: float32 as is; float16 bits as uint16; bfloat16 bits as int16 (a distinct
# type, so the choice is made when Numba types the call - no branch in the loops).
@overload(_load, inline="always")
def _load_impl(a, i):
    if a.dtype == types.float32:
        return lambda a, i: a[i]
    if a.dtype == types.uint16:
        return lambda a, i: _half_to_f32(np.uint32(a[i]))
    if a.dtype == types.int16:
        return lambda a, i: _bf16_to_f32(np.uint32(np.uint16(a[i])))
    return None


@overload(_store, inline="always")
def _store_impl(out, i, v):
    if out.dtype == types.float32:

        def store_f32(out, i, v):
            out[i] = v

        return store_f32
    if out.dtype == types.uint16:

        def store_f16(out, i, v):
            out[i] = _f32_to_half(v)

        return store_f16
    if out.dtype == types.int16:

        def store_bf16(out, i, v):
            out[i] = np.int16(_f32_to_bf16(v))

        return store_bf16
    return None


@njit(inline="always", fastmath=FASTMATH)
def _apply1(amode, x, dy, A, B, K, m):
    """One output value of an apply pass (the formulas of _plan.Apply, as the C fb_apply1), all
    float32; with amode a constant, LLVM drops the loads a mode does not use."""
    if amode == Apply.APPLY_FULL:
        return A * ((dy + K) + B * (x - m))
    if amode == Apply.APPLY_B:
        return A * dy
    return B * (x - m) + K
