"""Rows of an apply pass in vector steps (the Numba twin of the C kernels' 8- and 16-value steps,
and of their x86-64-v4 build's 32-value ones): :func:`streamed_row` writes a row with
non-temporal stores, and :func:`hardware_bf16_row` a bfloat16 row with ordinary ones, narrowed
by the CPU where it has AVX512-BF16.

The steps are the intrinsics of ``_numba_stream.py``, plus two here: 16 and 32 bfloat16 values
narrowed by one ``vcvtne2ps2bf16`` (an inline instruction: LLVM has no bfloat type in llvmlite's
IR), which rounds to nearest even and quiets NaNs as the integer code does but reads denormals as
zero, so a step with a denormal lane takes the integer code (the C kernels' x86-64-v4 build does
the same: the same bits).  On that CPU the integer narrowing made Numba's bfloat16 applies 1.5-1.6x
the C kernels' time, and streaming 16 values a store instead of 32 made its apply passes past the caches
1.8x.
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import errors
from numba.extending import intrinsic, overload

from ._numba_fp import FASTMATH, WIDE_VECTORS, _apply1, _load, _store, compiles_for
from ._numba_stream import (
    _APPLY8,
    _I32,
    _PAIRS16,
    _SIXTEEN,
    INLINE_STORES,
    LANES8,
    _at,
    _coefficient8,
    _fma16,
    _formula8,
    _narrowed8,
    _store_streamed,
    _widened,
)
from ._plan import Apply

HARDWARE_BF16 = INLINE_STORES and compiles_for("avx512bf16") and compiles_for("avx512vl")
_H16 = ir.VectorType(ir.IntType(16), 16)


def _denormal_in(builder, halves):
    """Whether any float32 lane of the vectors (of one length) is denormal (exponent 0, mantissa not)."""
    n = halves[0].type.count
    words = ir.VectorType(_I32, n)
    found = None
    for h in halves:
        u = builder.bitcast(h, words)
        exp0 = builder.icmp_unsigned("==", builder.and_(u, ir.Constant(words, 0x7F800000)), ir.Constant(words, 0))
        mant = builder.icmp_unsigned("!=", builder.and_(u, ir.Constant(words, 0x007FFFFF)), ir.Constant(words, 0))
        lanes = builder.and_(exp0, mant)
        found = lanes if found is None else builder.or_(found, lanes)
    return builder.icmp_unsigned("!=", builder.bitcast(found, ir.IntType(n)), ir.Constant(ir.IntType(n), 0))


def _joined(builder, low, high):
    """Two vectors of one type as one of twice the lanes, low first."""
    n = low.type.count
    return builder.shuffle_vector(low, high, ir.Constant(ir.VectorType(_I32, 2 * n), list(range(2 * n))))


def _formula16(builder, mode, x, dy, A, B, K, m):
    """_formula8 on 16 lanes (one 512-bit vector)."""
    fma = _fma16(builder)
    if mode == Apply.APPLY_B:
        return builder.fmul(A, dy)
    d = builder.fsub(x, m)
    if mode == Apply.APPLY_A:
        return builder.call(fma, [B, d, K])
    return builder.fmul(A, builder.call(fma, [B, d, builder.fadd(dy, K)]))


def _inputs8(builder, context, mode, signature, args, k):
    """x, dy and the coefficients of lanes [8k, 8k + 8) of a step (None where the mode reads none)."""
    ta, tb, tout, _, tA, tB, tK, tm, _ = signature.args
    va, vb, vout, vi, vA, vB, vK, vm, vj = args
    vik, vjk = (builder.add(v, ir.Constant(v.type, 8 * k)) for v in (vi, vj))
    coefficients = [_coefficient8(builder, context, t, v, vjk) for t, v in ((tA, vA), (tB, vB), (tK, vK), (tm, vm))]
    x = None if mode == Apply.APPLY_B else _widened(builder, context, ta, va, vik)
    dy = None if mode == Apply.APPLY_A else _widened(builder, context, tb, vb, vik)
    return [x, dy, *coefficients]


def _narrowed_store(builder, halves, at, streamed, integer_bits):
    """Store float32 vectors `halves` (low, high: 8 or 16 lanes each) at `at` as bfloat16: one
    vcvtne2ps2bf16, or, where a lane is denormal, integer_bits() (the integer code's vector);
    streamed: one non-temporal store (at aligned to the vector's bytes)."""
    n = halves[0].type.count
    register = "v" if n == 16 else "x"  # (zmm: AVX-512's register class)
    signature = ir.FunctionType(ir.VectorType(ir.IntType(16), 2 * n), [halves[0].type] * 2)
    narrow2 = ir.InlineAsm(signature, "vcvtne2ps2bf16 $2, $1, $0", f"={register},{register},{register}")  # ($2: low)

    def store(value):
        if streamed:
            _store_streamed(builder, value, at, 2 * value.type.count)
        else:
            builder.store(value, at, align=2)

    with builder.if_else(_denormal_in(builder, halves), likely=False) as (soft, hard):
        with soft:
            store(integer_bits())
        with hard:
            store(builder.call(narrow2, [halves[1], halves[0]]))


def _wide32_for(mode: int, streamed: bool, half: bool):
    """A 16-bit out[i:i + 32] in one 64-byte store (streamed: out + i aligned to 64 bytes): 16-lane
    vectors through the formula (the C kernels' x86-64-v4 rows take the same steps), narrowed
    (half: to float16 as the 8-lane steps convert theirs, streamed; else to bfloat16 by one 512-bit
    vcvtne2ps2bf16, or, where a lane is denormal, by the integer code 8 lanes at a time)."""
    h32 = ir.VectorType(ir.IntType(16), 32)

    @intrinsic
    def wide32(typingctx, a, b, out, i, A, B, K, m, j):
        def codegen(context, builder, signature, args):
            eighths = [_inputs8(builder, context, mode, signature, args, k) for k in range(4)]
            halves = []
            for k in (0, 1):
                lo, hi = eighths[2 * k], eighths[2 * k + 1]
                joined = [None if u is None else _joined(builder, u, w) for u, w in zip(lo, hi, strict=True)]
                halves.append(_formula16(builder, mode, *joined))
            at = _at(context, builder, signature.args[2], args[2], args[3], h32)
            if half:  # (streamed only: ordinary float16 rows are the loops LLVM vectorizes)
                value = _joined(builder, *(_narrowed8(builder, types.uint16, h) for h in halves))
                _store_streamed(builder, value, at, 64)
                return context.get_dummy_value()

            def integer_bits():
                quarters = [
                    builder.shuffle_vector(h, h, ir.Constant(ir.VectorType(_I32, LANES8), list(range(q, q + 8))))
                    for h in halves
                    for q in (0, 8)
                ]
                bits = [_narrowed8(builder, types.int16, q) for q in quarters]
                return _joined(builder, _joined(builder, bits[0], bits[1]), _joined(builder, bits[2], bits[3]))

            _narrowed_store(builder, halves, at, streamed, integer_bits)
            return context.get_dummy_value()

        return types.void(a, b, out, types.intp, A, B, K, m, types.intp), codegen

    return wide32


_HARDWARE32 = {(mode, streamed): _wide32_for(mode, streamed, False) for mode in Apply for streamed in (False, True)}
_HALF32 = {mode: _wide32_for(mode, True, True) for mode in Apply}  # (float16 rows: streamed only)


def _hardware16_for(mode: int, streamed: bool):
    """bfloat16 out[i:i + 16] in one 32-byte store (streamed: out + i aligned to 32 bytes): two
    sets of 8 lanes (lanes j and j + 8 of tile coefficients) through the 8-lane intrinsic's
    operations, narrowed by one vcvtne2ps2bf16, or by the integer code where a lane is denormal."""

    @intrinsic
    def hardware16(typingctx, a, b, out, i, A, B, K, m, j):
        def codegen(context, builder, signature, args):
            halves = [_formula8(builder, mode, *_inputs8(builder, context, mode, signature, args, k)) for k in (0, 1)]
            at = _at(context, builder, signature.args[2], args[2], args[3], _H16)

            def integer_bits():
                return _joined(builder, *(_narrowed8(builder, types.int16, h) for h in halves))

            _narrowed_store(builder, halves, at, streamed, integer_bits)
            return context.get_dummy_value()

        return types.void(a, b, out, types.intp, A, B, K, m, types.intp), codegen

    return hardware16


_HARDWARE16 = {(mode, streamed): _hardware16_for(mode, streamed) for mode in Apply for streamed in (False, True)}


def _middle_for(mode: int, step: str, streamed: bool):
    """The middle of a 16-bit row from lane j (see _row_for); returns the lane after it.  Streamed
    (j at a 16-byte boundary): one 8-value store if that is not a 32-byte boundary, then 16 values
    per 32-byte store; where `step` narrows by the CPU, a 16-value step to the first 64-byte
    boundary and 32 values per 64-byte store before those.  Ordinary: 32, then 16 at a time.
    step: "pairs" (bfloat16 with a channel's coefficients), "hardware" (bfloat16 narrowed by the
    CPU, as the C kernels' x86-64-v4 build), "half" (float16 streamed where Numba compiles for
    AVX-512: 32 values a 64-byte store, as that build stores them) or "vectors"."""
    steps = {"pairs": _PAIRS16[mode], "hardware": _HARDWARE16[mode, streamed], "vectors": _SIXTEEN[mode],
             "half": _SIXTEEN[mode]}  # fmt: skip
    step16, streamed8 = steps[step], _APPLY8[mode, True]
    step32 = {"hardware": _HARDWARE32[mode, streamed], "half": _HALF32[mode]}.get(step)
    wide = step32 is not None  # (compile-time constants, as streamed)

    @njit(inline="always")
    def middle(a, b, out, start, L, A, B, K, m, j, addr):
        if streamed and (addr + 2 * j) % 32 and j + LANES8 <= L:
            streamed8(a, b, out, start + j, A, B, K, m, j)
            j += LANES8
        if wide:
            if streamed and (addr + 2 * j) % 64 and j + 16 <= L:
                step16(a, b, out, start + j, A, B, K, m, j)
                j += 16
            while j + 32 <= L:
                step32(a, b, out, start + j, A, B, K, m, j)
                j += 32
        while j + 16 <= L:
            step16(a, b, out, start + j, A, B, K, m, j)
            j += 16
        return j

    return middle


@njit(inline="always")
def _no_middle(a, b, out, start, L, A, B, K, m, j, addr):
    return j


def _lane(v, j):
    """Coefficient v at lane j: a tile's lane, or the float itself."""


@overload(_lane, inline="always")
def _lane_impl(v, j):
    if isinstance(v, types.Array):
        return lambda v, j: v[j]
    return lambda v, j: v


@njit(inline="always", fastmath=FASTMATH)
def _values(a, b, out, amode, start, n, A, B, K, m):
    """Values start + j for j below n (a row of fewer than 8), one by one, with ordinary stores."""
    for j in range(n):
        _store(out, start + j, _apply1(amode, _load(a, start + j), _load(b, start + j), _lane(A, j), _lane(B, j),
                                       _lane(K, j), _lane(m, j)))  # fmt: skip


def _row_for(mode: int, out_type, coefficients, streamed: bool):
    """The row function of streamed_row or hardware_bf16_row for one mode, output type and kind of
    coefficients (Numba types), picked at compile time: the short row value by value; streamed, a
    head to the first boundary of 8 values; the middle (_middle_for: 16-bit outputs); 8 values at
    a time; the last 8 overlapping (ordinary stores)."""
    ordinary8, step8 = _APPLY8[mode, False], _APPLY8[mode, streamed]
    middle = _no_middle
    if out_type.dtype != types.float32:
        step = "vectors"  # (float16, and bfloat16 with tile coefficients on a CPU without AVX512-BF16)
        if out_type.dtype == types.int16 and HARDWARE_BF16:
            step = "hardware"
        elif out_type.dtype == types.uint16 and streamed and WIDE_VECTORS:
            step = "half"
        elif out_type.dtype == types.int16 and not isinstance(coefficients, types.Array):
            step = "pairs"
        if streamed or step == "hardware":  # (ordinary rows take 8-value steps but where the CPU narrows)
            middle = _middle_for(mode, step, streamed)

    def impl(a, b, out, amode, start, L, A, B, K, m):
        size = out.itemsize
        addr = out.ctypes.data + start * size
        if L < LANES8 or (streamed and addr % size):  # (a misaligned output never comes from the kernels' allocator)
            _values(a, b, out, amode, start, L, A, B, K, m)
            return
        j = 0
        if streamed:
            j = ((LANES8 * size - addr % (LANES8 * size)) % (LANES8 * size)) // size
            if j:  # (at a boundary, no ordinary store first: it would leave the line in the cache, dirty,
                # just before a streamed store over it)
                ordinary8(a, b, out, start, A, B, K, m, 0)
        j = middle(a, b, out, start, L, A, B, K, m, j, addr)
        while j + LANES8 <= L:
            step8(a, b, out, start + j, A, B, K, m, j)
            j += LANES8
        if j < L:
            ordinary8(a, b, out, start + L - LANES8, A, B, K, m, L - LANES8)

    return impl


def _literal_mode(name, amode):
    if not isinstance(amode, types.IntegerLiteral):
        raise errors.TypingError(f"{name}: amode must be a compile-time constant (an Apply value)")
    return Apply(amode.literal_value)


def streamed_row(a, b, out, amode, start, L, A, B, K, m):
    """out[start:start + L] of an apply pass, streamed: where out + start is not at a boundary of
    8 values, the first 8 with an ordinary store (the head up to that boundary); then 8 at a time
    non-temporally (16-bit outputs: 16 per 32-byte store from the first 32-byte boundary, as the C
    kernels store them; bfloat16 runs with a channel's coefficients in pairs; bfloat16 narrowed by
    the CPU 32 per 64-byte store from the first 64-byte boundary), and the last 8 with
    an ordinary store (the tail).  Values the head or tail store overlaps are written twice with the
    same bits.  A row shorter than 8 goes value by value.  amode: a compile-time constant (the
    sweeps' MODE), so that each sweep lowers its own mode's two intrinsics only.  A..m: a channel's
    floats, or tiles whose lane 0 is the row's first value.  The caller fences (stream_fence) once
    its item is done.  (No scalar loops around the vector ones: LLVM vectorized those too, and
    compiling the kernels took 1.7x as long.)"""


@overload(streamed_row, inline="always", prefer_literal=True)
def _streamed_row_impl(a, b, out, amode, start, L, A, B, K, m):
    return _row_for(_literal_mode("streamed_row", amode), out, A, True)


def hardware_bf16_row(a, b, out, amode, start, L, A, B, K, m):
    """bfloat16 out[start:start + L] of an apply pass with ordinary stores, 32 then 16 values a step
    narrowed by the CPU (HARDWARE_BF16 only), then 8 at a time by the integer code; the last 8
    overlapping (the same bits twice), and a row shorter than 8 value by value.  amode, A..m: as
    for streamed_row."""


@overload(hardware_bf16_row, inline="always", prefer_literal=True)
def _hardware_bf16_row_impl(a, b, out, amode, start, L, A, B, K, m):
    return _row_for(_literal_mode("hardware_bf16_row", amode), out, A, False)
