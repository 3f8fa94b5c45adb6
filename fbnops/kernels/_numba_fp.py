"""16-bit storage for the Numba kernels: float16 and bfloat16 as bits, exact widening,
round-to-nearest-even narrowing (the twin of ``_cython/_fp.h``).

Numba has no float16/bfloat16 on the CPU: float16 data is read as ``uint16`` and
bfloat16 bits as ``int16`` (a distinct type, so the choice is made when Numba types
the call), converted with integer bit manipulation plus a bitcast intrinsic (llvmlite).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

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


@njit(inline="always")
def _half_to_f32(h):
    em = np.uint32(h & 0x7FFF) << np.uint32(13)
    u = _bits_from_f32(_f32_from_bits(em) * np.float32(5.192296858534828e33))  # * 2**112
    if em >= np.uint32(0x7C00 << 13):
        u |= np.uint32(0x7F800000)
    u |= np.uint32(h & 0x8000) << np.uint32(16)
    return _f32_from_bits(u)


@njit(inline="always")
def _f32_to_half(f):
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


@njit(inline="always")
def _bf16_to_f32(h):
    return _f32_from_bits(np.uint32(h) << np.uint32(16))


@njit(inline="always")
def _f32_to_bf16(f):
    u = _bits_from_f32(f)
    if (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
        return np.uint16((u >> np.uint32(16)) | np.uint32(0x40))
    return np.uint16((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))


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
