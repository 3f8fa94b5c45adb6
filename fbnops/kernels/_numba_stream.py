"""Streamed output and prefetches for the Numba kernels (the twin of ``_cython/_stream.h``).

An output past the caches is written with non-temporal stores, which skip reading each line
before overwriting it (``_plan._streams`` decides when, for both backends).  As in the C
kernels' x86-64-v3 build, each group of values is computed in vector registers and stored
straight from them (``_numba_vrows.streamed_row``: 8 values a store, 16-bit outputs 16): loaded,
widened, the mode's formula with an explicit FMA, narrowed and stored, all in one intrinsic.
The operations are those of the C kernels' 8-lane code (``fb_apply8`` and the F16C / integer
narrowing), so the bits are the same.  A Numba loop that filled a buffer, then copied it with
a streaming intrinsic, ran slower than ordinary stores (see docs/performance.md).

:func:`prefetch_lines` requests lines ahead of their use (``_plan._prefetches``).
"""

from __future__ import annotations

from llvmlite import binding, ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ._numba_fp import compiles_for
from ._plan import Apply

LANES8 = 8  # values per streamed store: 32 bytes of float32, 16 of a 16-bit type

# x86 with AVX: 16-bit streamed stores are an inline vmovntdq (see _store_streamed), for which
# LLVM needs the assembly parser, which Numba does not register.
INLINE_STORES = compiles_for("avx")
if INLINE_STORES:
    binding.initialize_native_asmparser()

_F32 = ir.FloatType()
_V8 = ir.VectorType(_F32, LANES8)
_V16 = ir.VectorType(_F32, 16)
_I32 = ir.IntType(32)


def _declare(builder, name, ret, params):
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, params), name)


def _fma16(builder):
    """llvm.fma on 16 float32 lanes (one 512-bit vector), as the wide steps and blocks call it."""
    return _declare(builder, "llvm.fma.v16f32", _V16, [_V16] * 3)


def _at(context, builder, ty, value, index, pointee):
    """A pointer to element `index` of the array `value` (Numba type ty), as a pointer to pointee."""
    ary = context.make_array(ty)(context, builder, value=value)
    return builder.bitcast(builder.gep(ary.data, [index]), pointee.as_pointer())


def _store_streamed(builder, value, at, align):
    """A non-temporal store of value at `at` (aligned to `align` bytes).  16-bit values are stored
    by an inline vmovntdq where the CPU has AVX: LLVM folds their bitcasts into a store of
    half-precision values, and with AVX512-FP16 it selected an ordinary store (vmovdqa64) for
    those, nontemporal or not."""
    if INLINE_STORES and value.type.element in (ir.HalfType(), ir.IntType(16)):
        words = ir.VectorType(ir.IntType(64), value.type.count // 4)  # (16, 32 or 64 bytes: xmm, ymm or zmm)
        register = "v" if value.type.count == 32 else "x"  # (zmm: AVX-512's register class)
        store = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [words, at.type]), "vmovntdq $0, ($1)",
                             f"{register},r,~{{memory}}", side_effect=True)  # fmt: skip
        builder.call(store, [builder.bitcast(value, words), at])
        return
    store = builder.store(value, at, align=align)
    store.set_metadata("nontemporal", builder.module.add_metadata([_I32(1)]))


@intrinsic
def _prefetch(typingctx, arr, i):
    """A request for the cache line of arr[i] (llvm.prefetch: read, keep in all levels), the
    C kernels' __builtin_prefetch: a hint that never faults and changes no value."""

    def codegen(context, builder, signature, args):
        byte = ir.IntType(8)
        fn = _declare(builder, "llvm.prefetch.p0", ir.VoidType(), [byte.as_pointer(), _I32, _I32, _I32])
        at = _at(context, builder, arr, args[0], args[1], byte)
        builder.call(fn, [at, _I32(0), _I32(3), _I32(1)])
        return context.get_dummy_value()

    return types.void(arr, types.intp), codegen


@njit(inline="always")
def prefetch_lines(a, start, n):
    """Request the lines of a[start:start + n] (every 64 bytes)."""
    step = max(64 // a.itemsize, 1)
    for i in range(start, start + n, step):
        _prefetch(a, i)


@intrinsic
def stream_fence(typingctx):
    """Order the streamed stores before anything the thread does next (sfence)."""

    def codegen(context, builder, signature, args):
        builder.call(_declare(builder, "llvm.x86.sse.sfence", ir.VoidType(), []), [])
        return context.get_dummy_value()

    return types.void(), codegen


def _widened(builder, context, ty, value, index, lanes=LANES8):
    """ty's elements [index, index + lanes) as float32 lanes: float32 as is, float16 bits (uint16)
    converted (F16C's vcvtph2ps), bfloat16 bits (int16) shifted into the upper half."""
    bits = ir.IntType(ty.dtype.bitwidth)
    floats = ir.VectorType(_F32, lanes)
    vec = floats if ty.dtype == types.float32 else ir.VectorType(bits, lanes)
    v = builder.load(_at(context, builder, ty, value, index, vec), align=ty.dtype.bitwidth // 8)
    if ty.dtype == types.float32:
        return v
    if ty.dtype == types.uint16:
        return builder.fpext(builder.bitcast(v, ir.VectorType(ir.HalfType(), lanes)), floats)
    words = ir.VectorType(_I32, lanes)
    return builder.bitcast(builder.shl(builder.zext(v, words), ir.Constant(words, 16)), floats)


def _narrowed8(builder, dtype, y):
    """float32 lanes y rounded to dtype's bits (round to nearest even; a bfloat16 NaN keeps its
    upper half with the quiet bit set: _numba_fp._bf16_round_high).  8 lanes; float16 any number."""
    if dtype == types.float32:
        return y
    if dtype == types.uint16:
        n = y.type.count
        return builder.bitcast(builder.fptrunc(y, ir.VectorType(ir.HalfType(), n)), ir.VectorType(ir.IntType(16), n))
    return builder.trunc(builder.lshr(_bf16_high8(builder, y), _splat(16)), ir.VectorType(ir.IntType(16), LANES8))


_W8 = ir.VectorType(_I32, LANES8)  # 8 words: 8 float32 bits, or 16 bfloat16 values in pairs


def _splat(c):
    return ir.Constant(_W8, c)


def _bf16_high8(builder, y):
    """float32 lanes y rounded to bfloat16, each result in the upper half of its word (the lower
    half not cleared): _numba_fp._bf16_round_high on 8 lanes."""
    u = builder.bitcast(y, _W8)
    nan = builder.icmp_unsigned(">", builder.and_(u, _splat(0x7FFFFFFF)), _splat(0x7F800000))
    odd = builder.and_(builder.lshr(u, _splat(16)), _splat(1))
    rounded = builder.add(builder.add(u, _splat(0x7FFF)), odd)
    return builder.select(nan, builder.or_(u, _splat(0x400000)), rounded)


def _coefficient8(builder, context, ty, value, j):
    """A coefficient as 8 lanes: a tile's lanes [j, j + 8), or one float32 in every lane."""
    if isinstance(ty, types.Array):
        return _widened(builder, context, ty, value, j)
    one = builder.insert_element(
        ir.Constant(_V8, ir.Undefined), context.cast(builder, value, ty, types.float32), _I32(0)
    )
    return builder.shuffle_vector(
        one, ir.Constant(_V8, ir.Undefined), ir.Constant(ir.VectorType(_I32, LANES8), [0] * LANES8)
    )


def _formula8(builder, mode, x, dy, A, B, K, m):
    """The mode's formula on 8 float32 lanes, as fb_apply8 computes it (x or dy None where the
    mode does not read it)."""
    fma = _declare(builder, "llvm.fma.v8f32", _V8, [_V8, _V8, _V8])
    if mode == Apply.APPLY_B:  # A * dy
        return builder.fmul(A, dy)
    d = builder.fsub(x, m)
    if mode == Apply.APPLY_A:  # fma(B, x - m, K)
        return builder.call(fma, [B, d, K])
    return builder.fmul(A, builder.call(fma, [B, d, builder.fadd(dy, K)]))  # A * fma(B, x - m, dy + K)


def _apply8_for(mode: int, streamed: bool):
    """out[i:i + 8] = the mode's formula on a[i:], b[i:] (coefficients: floats, or tiles read at
    lane j); streamed: a non-temporal store, out + i aligned to the 8 values (see streamed_row);
    else an ordinary one, anywhere."""

    @intrinsic
    def apply8(typingctx, a, b, out, i, A, B, K, m, j):
        def codegen(context, builder, signature, args):
            ta, tb, tout, _, tA, tB, tK, tm, _ = signature.args
            va, vb, vout, vi, vA, vB, vK, vm, vj = args
            coefficients = [
                _coefficient8(builder, context, t, v, vj) for t, v in ((tA, vA), (tB, vB), (tK, vK), (tm, vm))
            ]
            x = None if mode == Apply.APPLY_B else _widened(builder, context, ta, va, vi)
            dy = None if mode == Apply.APPLY_A else _widened(builder, context, tb, vb, vi)
            value = _narrowed8(builder, tout.dtype, _formula8(builder, mode, x, dy, *coefficients))
            at = _at(context, builder, tout, vout, vi, value.type)
            size = tout.dtype.bitwidth // 8
            if streamed:
                _store_streamed(builder, value, at, LANES8 * size)
            else:
                builder.store(value, at, align=size)
            return context.get_dummy_value()

        return types.void(a, b, out, types.intp, A, B, K, m, types.intp), codegen

    return apply8


# The intrinsic of each (mode, streamed): streamed_row picks its pair at compile time.
_APPLY8 = {(mode, streamed): _apply8_for(mode, streamed) for mode in Apply for streamed in (False, True)}


def _pairs16_for(mode: int):
    """bfloat16 only, one channel's float coefficients: out[i:i + 16] streamed (out + i aligned to
    32 bytes), as the C kernels' fb_apply_bf16_pairs computes it: x's and dy's 16 values loaded as
    8 words, the even values shifted up and the odd ones masked (each is then its float32), both
    sets through the formula and rounded, and blended back into words (no widening or packing
    shuffle).  The same operations on every value as the 8-lane intrinsic, so the same bits."""

    @intrinsic
    def pairs16(typingctx, a, b, out, i, A, B, K, m, j):  # (j: the 16-value steps' common signature)
        def codegen(context, builder, signature, args):
            ta, tb, tout, _, tA, tB, tK, tm, _ = signature.args
            va, vb, vout, vi, vA, vB, vK, vm, _ = args

            def words(ty, value):
                return builder.load(_at(context, builder, ty, value, vi, _W8), align=2)

            def halves(w):  # (the even values, the odd ones) as float32 lanes
                if w is None:
                    return None, None
                even = builder.bitcast(builder.shl(w, _splat(16)), _V8)
                return even, builder.bitcast(builder.and_(w, _splat(0xFFFF0000)), _V8)

            coefficients = [
                _coefficient8(builder, context, t, v, None) for t, v in ((tA, vA), (tB, vB), (tK, vK), (tm, vm))
            ]
            x = halves(None if mode == Apply.APPLY_B else words(ta, va))
            dy = halves(None if mode == Apply.APPLY_A else words(tb, vb))
            even, odd = (_bf16_high8(builder, _formula8(builder, mode, x[k], dy[k], *coefficients)) for k in (0, 1))
            word = builder.or_(builder.lshr(even, _splat(16)), builder.and_(odd, _splat(0xFFFF0000)))
            _store_streamed(builder, word, _at(context, builder, tout, vout, vi, _W8), 32)
            return context.get_dummy_value()

        return types.void(a, b, out, types.intp, A, B, K, m, types.intp), codegen

    return pairs16


_PAIRS16 = {mode: _pairs16_for(mode) for mode in Apply}


def _sixteen_for(mode: int):
    """A 16-bit output's out[i:i + 16] streamed in one 32-byte store (out + i aligned to 32 bytes):
    two sets of 8 lanes (lanes j and j + 8 of tile coefficients) through the 8-lane intrinsic's
    operations, joined (as the C kernels' 16-value stores join two vectors)."""

    @intrinsic
    def sixteen(typingctx, a, b, out, i, A, B, K, m, j):
        def codegen(context, builder, signature, args):
            ta, tb, tout, _, tA, tB, tK, tm, _ = signature.args
            va, vb, vout, vi, vA, vB, vK, vm, vj = args
            halves = []
            for k in (0, 1):
                vik, vjk = (builder.add(v, ir.Constant(v.type, 8 * k)) for v in (vi, vj))
                coefficients = [
                    _coefficient8(builder, context, t, v, vjk) for t, v in ((tA, vA), (tB, vB), (tK, vK), (tm, vm))
                ]
                x = None if mode == Apply.APPLY_B else _widened(builder, context, ta, va, vik)
                dy = None if mode == Apply.APPLY_A else _widened(builder, context, tb, vb, vik)
                halves.append(_narrowed8(builder, tout.dtype, _formula8(builder, mode, x, dy, *coefficients)))
            value = builder.shuffle_vector(halves[0], halves[1], ir.Constant(ir.VectorType(_I32, 16), list(range(16))))
            _store_streamed(builder, value, _at(context, builder, tout, vout, vi, value.type), 32)
            return context.get_dummy_value()

        return types.void(a, b, out, types.intp, A, B, K, m, types.intp), codegen

    return sixteen


_SIXTEEN = {mode: _sixteen_for(mode) for mode in Apply}
