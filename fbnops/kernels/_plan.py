"""The kernel contract, stated once: the work plan, its tunables and the mode enums.

Everything both compiled backends must agree on is defined here, in Python:

* the tunables (row width, float32 block length, item sizes) and the thread policy;
* the partition of the work into *items* (:func:`plan`), whose body
  (:func:`_partition`, with :func:`_gcd` and :func:`_ceil_div`) is written in the
  common subset of Python and Cython;
* the enums of the kernels' protocol: :class:`Op` (what a call computes),
  :class:`Reduce` (what a reduction pass sums) and :class:`Apply` (the element pass).

The Numba backend, the reference and :mod:`fbnops.kernels.stages` import them;
the Cython kernels get them from two generated files, ``_cython/_plan.pxd`` (the
constants, the enums, the ``Plan`` struct and ``make_plan``, which is
:func:`_partition` compiled by Cython) and ``_cython/_contract.h`` (the enums for
the C row functions of ``_fp.h``).  ``python -m fbnops.kernels._plan`` rewrites
both (and the Tempita-generated dtype dispatch of the kernels); a test keeps them
in step.

The partition depends on the shape (and the element size) only, never on the
thread count, and partials are combined in a fixed order: that is why the results
are bitwise identical for any number of threads.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from enum import IntEnum
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from ..framework.errors import InvalidArgumentError
from ..framework.threads import kernel_threads, serial_after_fork

# The tunables, in one place.
LANES = 512  # minimum row width: folded channels-last rows, channel blocks of small planes
MAX_W = 2 * LANES  # widest channels-first row: a block of ceil(LANES / inner) planes
BLOCK_ROWS = 128  # rows summed in float32 lanes before flushing into float64
STRIP_PIECES = 8  # reductions in strips: rows of W lanes summed per load and store of the lane totals
FOLD_WAYS = 8  # a channel's lane totals are folded in this many running totals (joined pairwise: fixed at 8)
ROW_ITEM_ELEMS = 32768  # channels-last: target elements per item
MAX_ROW_ITEMS = 64
PLANE_ITEM_BYTES = 4 << 20  # channels-first: bytes of (x, dy) per item: about one L2
MIN_ITEMS = 16  # channels-first: split channels so that few channels still share out
STREAM_MIN_BYTES = 4 << 20  # apply passes moving this many bytes (inputs + output) stream (see _streams)
CACHED_MAX_BYTES = 8 << 20  # a gradient pass's inputs under this many bytes are taken to be in the caches (_strips)
STRIP_MAX_SHARE = 2  # a forward's pass adds rows in strips while its input is under 1/2 the last-level cache (_strips)
STRIP_ROWS_SHARE = 2  # ... channels-last rows only while their float32 lanes' bytes are under 1/2 of that (_strips)
STREAM_LLC_QUARTERS = 3  # on AMD, channels-last applies stream from 3/4 of the last-level cache (stream_rows_min_bytes)
SERIAL_BELOW = 1 << 15  # below this many elements one thread beats waking a team (~1-2 us per region)
RUN_MIN_INNER = 128  # channels-first: planes this long are applied run by run, with scalar coefficients
PREFETCH_MAX_BYTES = 128 << 10  # fused channel blocks of at most this many input bytes request the next block's
# planes while they apply (two blocks well inside one 512 KB L2; larger blocks thrash it: see _prefetches) ...
PREFETCH_L2_SHARE = 2  # ... on AMD, blocks of up to 1/2 of L2 (prefetch_block_max_bytes in _host)


class Op(IntEnum):
    """What one kernel call computes (the op is chosen per call, the passes follow from it)."""

    GRAD_TRAIN = 0  # gradient with batch statistics: one RED_GRAD pass, APPLY_FULL
    GRAD_FROZEN = 1  # gradient with frozen statistics: one RED_GRAD pass, APPLY_B
    FWD_TRAIN = 2  # forward, training: RED_SUM (the mean), RED_SQ (the variance), APPLY_A
    FWD_INFER = 3  # forward, inference: no pass, APPLY_A


class Reduce(IntEnum):
    """What one reduction pass sums per channel, into the totals s0 and s1 (a = x, b = dy, m = centre)."""

    RED_GRAD = 0  # s0 += b;  s1 += (a - m) * b
    RED_SUM = 1  # s0 += a
    RED_SQ = 2  # s1 += (a - m) ** 2


class Apply(IntEnum):
    """The element pass's formula, with per-channel coefficients A, B, K."""

    APPLY_FULL = 0  # A*((b + K) + B*(a - m))  (training gradient; gamma*r stays outside, as in TF)
    APPLY_B = 1  # A*b                      (frozen gradient)
    APPLY_A = 2  # B*(a - m) + K            (forward)


CONTRACT_ENUMS = (Op, Reduce, Apply)


def apply_mode(op):
    """The element pass of an op (an Op value in, an Apply value out: plain ints, as the Numba
    kernels compile it too)."""
    if op == Op.GRAD_TRAIN:
        return Apply.APPLY_FULL.value
    if op == Op.GRAD_FROZEN:
        return Apply.APPLY_B.value
    return Apply.APPLY_A.value


# Emitted into the Cython build as compile-time constants (array bounds need them).
PXI_CONSTANTS = (
    "LANES", "MAX_W", "BLOCK_ROWS", "STRIP_PIECES", "FOLD_WAYS", "ROW_ITEM_ELEMS", "MAX_ROW_ITEMS", "PLANE_ITEM_BYTES",
    "MIN_ITEMS", "STREAM_MIN_BYTES", "CACHED_MAX_BYTES", "RUN_MIN_INNER", "STRIP_ROWS_SHARE",
)  # fmt: skip
CYTHON_DIR = Path(__file__).parent / "_cython"


class Plan(NamedTuple):
    """The work partition of one ``(outer, C, inner)`` shape.

    Every element is visited as part of a *row* of ``width`` lanes, lane ``j``
    always holding the same channel.  Channels-last (inner == 1): rows of C
    channels, ``fold`` input rows folded into one when C is small; items are
    ranges of the ``rows`` folded rows.  Channels-first: rows of ``block`` whole
    small planes side by side (``run`` = inner lanes per channel), or LANES-wide
    pieces of one large plane (block 1); items are (channel block, batch range)
    pairs, ``per_channel`` batch ranges per block.  ``runs``: the apply pass writes a
    channels-first item channel by channel, a plane's run at a time with the channel's scalar
    coefficients (one load per vector, not four per-lane tiles): one-channel blocks, and planes
    of RUN_MIN_INNER elements or more (measured 0.84-0.98x at 12x12 to 16x16).
    """

    channels_last: bool
    outer: int
    C: int
    inner: int
    width: int
    fold: int
    rows: int
    nitems: int
    block: int
    run: int
    per_channel: int
    runs: bool


def check_plan_args(outer: int, C: int, inner: int, itemsize: int) -> None:
    """Refuse sizes no kernel is ever called with (empty inputs never reach a kernel): the
    plan divides by them."""
    for name, value in (("outer", outer), ("C", C), ("inner", inner), ("itemsize", itemsize)):
        if isinstance(value, bool) or not hasattr(value, "__index__") or value < 1:
            raise InvalidArgumentError(f"plan: {name} must be a positive integer, got {value!r}")


@lru_cache(maxsize=4096)
def plan(outer: int, C: int, inner: int, itemsize: int = 4) -> Plan:
    """The partition for a shape: a function of the shape and element size only."""
    check_plan_args(outer, C, inner, itemsize)
    return _partition(outer, C, inner, itemsize)


# The partition's body, in the subset of Python that Cython compiles to C as it stands
# (positive integers only: // and % agree in both): render_plan_pxd() emits these three
# functions as the C kernels' make_plan, so there is one definition (and _streams and _prefetches, below).


def _gcd(a, b):
    while b:
        a, b = b, a % b
    return a


def _ceil_div(a, b):
    return (a + b - 1) // b


def _partition(outer, C, inner, itemsize):
    if inner == 1:
        fold = 1
        if C < LANES:  # fold rows until the row is a multiple of 16 lanes and >= LANES
            fold = 16 // _gcd(C, 16)
            while fold * C < LANES and fold < outer:
                fold *= 2
        rows = _ceil_div(outer, fold)
        nitems = max(1, min(_ceil_div(outer * C, ROW_ITEM_ELEMS), MAX_ROW_ITEMS, rows))
        return Plan(True, outer, C, inner, C * fold, fold, rows, nitems, 0, 0, 0, False)
    if inner < LANES:  # small planes: a row is `block` whole planes (contiguous in memory)
        block = min(C, _ceil_div(LANES, inner))
        run = inner
        width = block * inner
    else:  # large planes: rows of LANES lanes, all of one channel
        block = 1
        run = LANES
        width = LANES
    nblocks = _ceil_div(C, block)
    per_channel = max(_ceil_div(outer * block * inner * 2 * itemsize, PLANE_ITEM_BYTES), _ceil_div(MIN_ITEMS, nblocks))
    per_channel = max(1, min(per_channel, outer))
    runs = block == 1 or inner >= RUN_MIN_INNER
    return Plan(False, outer, C, inner, width, 1, 0, nblocks * per_channel, block, run, per_channel, runs)


def _moves(elems, itemsize, full):
    """The bytes an apply pass moves: x, dy too if `full` (the training gradient's), and the
    output, `elems` values each."""
    return elems * itemsize * (3 if full else 2)


def _streams(channels_last, block, elems, itemsize, full, threshold, rows_threshold):
    """Whether an apply pass writes its output with non-temporal stores: when what it moves
    (_moves) is `threshold` bytes or more (a channels-last pass: `rows_threshold`, the host's
    STREAM_ROWS_MIN_BYTES from _host), past what the caches hold, so the output's lines
    would be read from memory only to be overwritten
    (measured between PyTorch's calls, as the benchmark times them: 0.53-0.94x of the old rule's
    time, the output alone at the threshold, for the 16-bit (32,28,28,128) forwards, 0.63-0.91x
    for (32,14,14,256) float32 channels-last; the same bits: see docs/performance.md).  4 MiB, the
    two cores' L2 on the 2 MB-L2 host: passes of 4-8 MiB took 0.75-0.93x of their time streamed
    (float32 forwards of 3.2 MB outputs, the float16 (32,14,14,256) forward), the rest 0.99-1.03x.

    Never for blocks of small planes: their rows are short runs (at most MAX_W elements) whose
    end lines other items write too, and streamed partial lines cost more than the cached
    stores save (paired runs: 1.08x slower in float32, up to 1.6x in float16)."""
    if not channels_last and block > 1:
        return False
    return _moves(elems, itemsize, full) >= (rows_threshold if channels_last else threshold)


def _strips(elems, itemsize, ninputs, threshold, one_input_max, channels_last):
    """Whether a reduction pass reading `ninputs` tensors of `elems` values adds its rows in strips
    (groups of rows, each lane total loaded and stored once per group, which reads the rows out of
    address order).  A gradient's pass (x and dy) does only when its inputs fit in the caches, under
    `threshold` (CACHED_MAX_BYTES): from memory, its 16 streams lose (the C kernels' 16-bit ones up
    to 1.13x; Numba's float16 (32,56,56,64) gradients 1.73x Cython's time, against 1.16x row by
    row).  A forward's passes (one input) do while the input is under `one_input_max`
    (STRIP_MAX_BYTES: half the last-level cache, so that the input and its output stay there between
    passes).  Strips won wherever the input was cached: 0.93 of the time by median on a host whose
    300 MB L3 held every benchmark input.  From DRAM they lose: on an AMD Zen 5 (32 MB L3), the
    C kernels' channels-last 16-bit forwards of 18-37 MiB took 0.64-0.87 of the time row by row,
    float32 0.89 at 24.5 MiB, channels-first 12544-value planes 0.83-0.93; under 16 MiB 0.94-1.19.
    Channels-last rows (a piece is a row of lanes, read across all of it) strip only while the
    input, counted as the float32 values the lanes add, is under a STRIP_ROWS_SHARE-th of that,
    a quarter of the last-level cache: on the same host, each call after PyTorch's, their
    forwards of 3.2M values or more took 0.68-0.98 of the time row by row (16-bit (32,28,28,128)
    and (32,56,56,64), float32 (32,28,28,128); 1 and 2 threads), while of 1.6M values (float32
    and 16-bit (32,14,14,256)) rows took 0.99-1.10 (docs/performance.md).
    A threshold of 0 (the test hook) turns strips off.  (The x86-64-v4 C build sums a forward's rows
    of one piece in register blocks either way: reduce_span in _loops.pxi.)"""
    if ninputs != 1 or not channels_last:
        return threshold > 0 and elems * itemsize * ninputs < (one_input_max if ninputs == 1 else threshold)
    return threshold > 0 and elems * 4 < one_input_max // STRIP_ROWS_SHARE


def _inputs(amode):
    """The tensors an op's passes read (an Apply value in): x alone for a forward, x and dy for a
    gradient (which the next block's prefetch requests: _prefetches)."""
    return 1 if amode == Apply.APPLY_A else 2


def _reduce_inputs(mode):
    """The tensors a reduction pass reads (a Reduce value in): x and dy for a gradient's, x alone
    for a forward's (whether its rows go in strips: _strips)."""
    return 2 if mode == Reduce.RED_GRAD else 1


def _adds_to(mode, h):
    """Whether a reduction pass (a Reduce value) adds to total h: s0 (h = 0, the sum of dy or of x)
    in every pass but the variance's, s1 (h = 1) in every pass but the mean's.  Each backend's
    items clear, flush, fold and combine only these; the other total stays 0.  (The Cython
    kernels compile this source; the C row functions get it as fb_adds_to, from _as_c.)"""
    return mode != (Reduce.RED_SQ if h == 0 else Reduce.RED_SUM)


def _prefetches(outer, block, inner, itemsize, ninputs, max_bytes):
    """Whether a fused channel block requests the next block's planes (software prefetch) while
    it applies its own: the thread's next item, whose first pass would otherwise wait on memory
    plane by plane (each plane a short run, one plane stride from the next: too short for the
    hardware's stream prefetchers to ramp up).  Only for blocks of at most `max_bytes` of inputs
    (the host's PREFETCH_BLOCK_MAX_BYTES, from _host): PREFETCH_MAX_BYTES, 128 KB, measured on a
    host with 512 KB of L2 between PyTorch's calls, 2 threads: 0.79-0.87x for the 16-bit
    (32,28,28,128) forwards, 0.85-0.91x for their gradients, 0.83x on 1 thread; but 1.06-1.13x for
    (32,56,56,64) gradients, whose 400 KB blocks the prefetch pushed out of L2.  On an AMD Zen 5
    (1 MB of L2) blocks of 134-392 KB gained too (0.80-0.92x) and 784 KB ones lost (1.13-1.28x):
    there, up to 1/PREFETCH_L2_SHARE of L2.  Bits unchanged."""
    return outer * block * inner * itemsize * ninputs <= max_bytes


def fused(p: Plan) -> bool:
    """Channels-first items that hold a whole channel block run reduce -> coefficients -> apply
    back to back while the block is in cache (one parallel region instead of three)."""
    return not p.channels_last and p.per_channel == 1


def threads_for(nelems: int) -> int:
    """Threads for a kernel over ``nelems`` elements: one below SERIAL_BELOW (and in a
    child forked after the parent ran a parallel kernel), else the configured count (the
    idle cores, when it is the default)."""
    if nelems < SERIAL_BELOW or serial_after_fork():
        return 1
    return kernel_threads()


# ---------------------------------------------------------------------------------------
# The generator: the contract above, emitted for the Cython kernels and their C helpers
# ---------------------------------------------------------------------------------------

_GENERATED = "GENERATED from fbnops/kernels/_plan.py by `python -m fbnops.kernels._plan`: do not edit."
PLAN_FIELD_COMMENTS = {
    "width": "lanes per row",
    "fold": "channels-last: input rows per folded row",
    "rows": "channels-last: folded rows in total",
    "block": "channels-first: channels per item (planes side by side in one row)",
    "run": "channels-first: lanes per channel in a row (lane j is channel j // run)",
    "per_channel": "channels-first: items per channel block (batch ranges)",
    "runs": "channels-first: apply a channel's runs with scalar coefficients (see Plan)",
}


def _as_cython(fn, returns: str) -> list[str]:
    """fn's source as a ``cdef inline ... noexcept nogil`` function over Py_ssize_t (every
    argument and local of the plan functions is a non-negative size)."""
    code = fn.__code__
    args = ", ".join(f"Py_ssize_t {a}" for a in code.co_varnames[: code.co_argcount])
    local_names = code.co_varnames[code.co_argcount : code.co_nlocals]
    body = inspect.getsource(fn).splitlines()[1:]
    head = [f"cdef inline {returns} {fn.__name__}({args}) noexcept nogil:"]
    if local_names:
        head.append(f"    cdef Py_ssize_t {', '.join(local_names)}")
    return head + body + ["", ""]


def _as_c(fn, returns: str) -> str:
    """fn, a single ``return`` of comparisons and conditional expressions over its arguments and
    the contract's enum members, as a ``static inline`` C function ``fb<name>`` over ints (a member
    ``Reduce.RED_SQ`` is ``FB_RED_SQ``): the rule in the C row functions' own words."""
    body = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0].body
    (ret,) = [node for node in body if isinstance(node, ast.Return)]
    ops = {ast.Eq: "==", ast.NotEq: "!="}

    def c(node) -> str:
        if isinstance(node, ast.IfExp):
            return f"({c(node.test)} ? {c(node.body)} : {c(node.orelse)})"
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in ops:
            return f"({c(node.left)} {ops[type(node.ops[0])]} {c(node.comparators[0])})"
        if isinstance(node, ast.Attribute) and getattr(node.value, "id", None) in {e.__name__ for e in CONTRACT_ENUMS}:
            return f"FB_{node.attr}"
        if isinstance(node, (ast.Name, ast.Constant)):
            return ast.unparse(node)
        raise ValueError(f"{fn.__name__}: no C rendering of {ast.unparse(node)!r}")

    args = ", ".join(f"int {a}" for a in fn.__code__.co_varnames[: fn.__code__.co_argcount])
    return f"static inline {returns} fb{fn.__name__}({args}) {{ return {c(ret.value)}; }}"


def render_plan_pxd() -> str:
    """``_cython/_plan.pxd``: the tunables, the enums, the Plan struct and make_plan."""
    lines = [f"# {_GENERATED}", "", "cdef enum:"]
    lines += [f"    {name} = {globals()[name]}" for name in PXI_CONSTANTS]
    for enum in CONTRACT_ENUMS:
        lines += ["", "", f"cdef enum {enum.__name__}:"]
        lines += [f"    {member.name} = {member.value}" for member in enum]
    lines += ["", "", "cdef struct Plan:"]
    for field, kind in Plan.__annotations__.items():
        ctype = "bint" if getattr(kind, "__forward_arg__", kind) in ("bool", bool) else "Py_ssize_t"
        comment = f"  # {PLAN_FIELD_COMMENTS[field]}" if field in PLAN_FIELD_COMMENTS else ""
        lines.append(f"    {ctype} {field}{comment}")
    lines += ["", ""]
    lines += _as_cython(_gcd, "Py_ssize_t") + _as_cython(_ceil_div, "Py_ssize_t")
    lines += _as_cython(_partition, "Plan") + _as_cython(_moves, "Py_ssize_t") + _as_cython(_streams, "bint")
    lines += _as_cython(_strips, "bint") + _as_cython(_inputs, "Py_ssize_t") + _as_cython(_reduce_inputs, "Py_ssize_t")
    lines += _as_cython(_adds_to, "bint") + _as_cython(_prefetches, "bint")
    signature = "Py_ssize_t outer, Py_ssize_t C, Py_ssize_t inner, Py_ssize_t itemsize"
    lines += [
        f"cdef inline Plan make_plan({signature}) noexcept nogil:",
        "    return _partition(outer, C, inner, itemsize)",
    ]
    return "\n".join(lines) + "\n"


def render_contract_h() -> str:
    """``_cython/_contract.h``: MAX_W, STRIP_PIECES, the Reduce and Apply enums and _adds_to, for
    the C row functions of ``_fp.h``."""
    lines = [f"/* {_GENERATED} */", "#ifndef FBNOPS_CONTRACT_H", "#define FBNOPS_CONTRACT_H", ""]
    lines += [f"#define FB_MAX_W {MAX_W} /* the widest row: the size of the items' stack buffers */"]
    lines += [f"#define FB_STRIP_PIECES {STRIP_PIECES} /* pieces a strip sums per load and store of its totals */", ""]
    for enum in (Reduce, Apply):
        lines += [f"#define FB_{member.name} {member.value}" for member in enum]
    lines += ["", "/* Whether a reduction pass adds to total h (_adds_to). */", _as_c(_adds_to, "int")]
    return "\n".join(lines + ["", "#endif"]) + "\n"


def render_dispatch_pxi() -> str:
    """``_cython/_dispatch.pxi``: the storage-type switches of the drivers, from its Tempita template."""
    from Cython import Tempita  # (a build-time tool: only the generator needs it)

    template = CYTHON_DIR / "_dispatch.pxi.tp"
    return Tempita.sub(template.read_text(), generated=_GENERATED)


def generated_files() -> dict[Path, str]:
    """Every file the generator writes, and its text."""
    return {
        CYTHON_DIR / "_plan.pxd": render_plan_pxd(),
        CYTHON_DIR / "_contract.h": render_contract_h(),
        CYTHON_DIR / "_dispatch.pxi": render_dispatch_pxi(),
    }


if __name__ == "__main__":
    for path, text in generated_files().items():
        if not path.exists() or path.read_text() != text:  # (an unchanged file keeps its mtime: no rebuild)
            path.write_text(text)
            print(f"wrote {path}", file=sys.stderr)
