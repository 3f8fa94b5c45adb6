# GENERATED from fbnops/kernels/_plan.py by `python -m fbnops.kernels._plan`: do not edit.

cdef enum:
    LANES = 512
    MAX_W = 1024
    BLOCK_ROWS = 128
    STRIP_PIECES = 8
    FOLD_WAYS = 8
    ROW_ITEM_ELEMS = 32768
    MAX_ROW_ITEMS = 64
    PLANE_ITEM_BYTES = 4194304
    MIN_ITEMS = 16
    STREAM_MIN_BYTES = 4194304
    CACHED_MAX_BYTES = 8388608
    RUN_MIN_INNER = 128
    STRIP_ROWS_SHARE = 2


cdef enum Op:
    GRAD_TRAIN = 0
    GRAD_FROZEN = 1
    FWD_TRAIN = 2
    FWD_INFER = 3


cdef enum Reduce:
    RED_GRAD = 0
    RED_SUM = 1
    RED_SQ = 2


cdef enum Apply:
    APPLY_FULL = 0
    APPLY_B = 1
    APPLY_A = 2


cdef struct Plan:
    bint channels_last
    Py_ssize_t outer
    Py_ssize_t C
    Py_ssize_t inner
    Py_ssize_t width  # lanes per row
    Py_ssize_t fold  # channels-last: input rows per folded row
    Py_ssize_t rows  # channels-last: folded rows in total
    Py_ssize_t nitems
    Py_ssize_t block  # channels-first: channels per item (planes side by side in one row)
    Py_ssize_t run  # channels-first: lanes per channel in a row (lane j is channel j // run)
    Py_ssize_t per_channel  # channels-first: items per channel block (batch ranges)
    bint runs  # channels-first: apply a channel's runs with scalar coefficients (see Plan)


cdef inline Py_ssize_t _gcd(Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    while b:
        a, b = b, a % b
    return a


cdef inline Py_ssize_t _ceil_div(Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    return (a + b - 1) // b


cdef inline Plan _partition(Py_ssize_t outer, Py_ssize_t C, Py_ssize_t inner, Py_ssize_t itemsize) noexcept nogil:
    cdef Py_ssize_t fold, rows, nitems, block, run, width, nblocks, per_channel, runs
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


cdef inline Py_ssize_t _moves(Py_ssize_t elems, Py_ssize_t itemsize, Py_ssize_t full) noexcept nogil:
    """The bytes an apply pass moves: x, dy too if `full` (the training gradient's), and the
    output, `elems` values each."""
    return elems * itemsize * (3 if full else 2)


cdef inline bint _streams(Py_ssize_t channels_last, Py_ssize_t block, Py_ssize_t elems, Py_ssize_t itemsize, Py_ssize_t full, Py_ssize_t threshold, Py_ssize_t rows_threshold) noexcept nogil:
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


cdef inline bint _strips(Py_ssize_t elems, Py_ssize_t itemsize, Py_ssize_t ninputs, Py_ssize_t threshold, Py_ssize_t one_input_max, Py_ssize_t channels_last) noexcept nogil:
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


cdef inline Py_ssize_t _inputs(Py_ssize_t amode) noexcept nogil:
    """The tensors an op's passes read (an Apply value in): x alone for a forward, x and dy for a
    gradient (which the next block's prefetch requests: _prefetches)."""
    return 1 if amode == Apply.APPLY_A else 2


cdef inline Py_ssize_t _reduce_inputs(Py_ssize_t mode) noexcept nogil:
    """The tensors a reduction pass reads (a Reduce value in): x and dy for a gradient's, x alone
    for a forward's (whether its rows go in strips: _strips)."""
    return 2 if mode == Reduce.RED_GRAD else 1


cdef inline bint _adds_to(Py_ssize_t mode, Py_ssize_t h) noexcept nogil:
    """Whether a reduction pass (a Reduce value) adds to total h: s0 (h = 0, the sum of dy or of x)
    in every pass but the variance's, s1 (h = 1) in every pass but the mean's.  Each backend's
    items clear, flush, fold and combine only these; the other total stays 0.  (The Cython
    kernels compile this source; the C row functions get it as fb_adds_to, from _as_c.)"""
    return mode != (Reduce.RED_SQ if h == 0 else Reduce.RED_SUM)


cdef inline bint _prefetches(Py_ssize_t outer, Py_ssize_t block, Py_ssize_t inner, Py_ssize_t itemsize, Py_ssize_t ninputs, Py_ssize_t max_bytes) noexcept nogil:
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


cdef inline Plan make_plan(Py_ssize_t outer, Py_ssize_t C, Py_ssize_t inner, Py_ssize_t itemsize) noexcept nogil:
    return _partition(outer, C, inner, itemsize)
