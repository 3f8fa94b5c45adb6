# The innermost loops and the work items of the kernels (included by _batch_norm_impl.pxi,
# whose head maps the call chain).  Throughout: a is x, b is dy (x again where the op has
# no dy), m the centre tile, W the row width in lanes, P the call's Plan.

from ._fp cimport (FB_BF16_ROWS, FB_HALF_ROWS, fb_apply_bf16_rows, fb_apply_bf16_rows_streamed, fb_apply_bf16_run,
                  fb_apply_bf16_run_streamed, fb_apply_f32_rows, fb_apply_f32_rows_streamed, fb_apply_f32_run_streamed,
                  fb_apply_half_rows, fb_apply_half_rows_streamed, fb_apply_half_run, fb_apply_half_run_streamed,
                  fb_f32_lanes, fb_f32_row, fb_f32_tiles, fb_f64_lanes,
                  fb_prefetch_lines, fb_reduce_bf16_row, fb_reduce_bf16_rows, fb_reduce_f32_row, fb_reduce_f32_rows,
                  fb_reduce_half_row, fb_reduce_half_rows, fb_stream_copy, fb_stream_fence, FB_F32_WIDE,
                  FB_ROW_BLOCKS)

# ---------------------------------------------------------------------------------------
# Innermost loops.  All data is processed as rows of W lanes with per-lane tiles
# (m, A, B, K) and per-lane float32 accumulators in L1.  A lane always holds the same
# channel: channels-last rows are (folded) rows of C; channels-first rows are a block
# of whole small planes side by side, or a LANES-wide piece of one large plane.
# ---------------------------------------------------------------------------------------

cdef inline void reduce_rows(Reduce mode, const storage_t* a, const storage_t* b, Py_ssize_t nrows,
                             Py_ssize_t W, const float* m, float* s0, float* s1) noexcept nogil:
    cdef Py_ssize_t r, j
    cdef float d, dy
    if storage_t is fb_half:
        if FB_HALF_ROWS:  # x86-64-v3: rows converted 8 lanes at a time, in registers (see _rows16.h)
            for r in range(nrows):
                fb_reduce_half_row(mode, a, b, W, m, s0, s1)
                a += W
                b += W
            return
    if storage_t is fb_bf16:
        if FB_BF16_ROWS:
            for r in range(nrows):
                fb_reduce_bf16_row(mode, a, b, W, m, s0, s1)
                a += W
                b += W
            return
    if storage_t is float:
        if FB_F32_WIDE:  # x86-64-v4: 16 lanes a step (the same adds per lane)
            for r in range(nrows):
                fb_reduce_f32_row(mode, a, b, W, m, s0, s1)
                a += W
                b += W
            return
    for r in range(nrows):
        if mode == RED_GRAD:
            for j in range(W):
                dy = load(b, j)
                s0[j] += dy
                s1[j] += (load(a, j) - m[j]) * dy
        elif mode == RED_SUM:
            for j in range(W):
                s0[j] += load(a, j)
        else:
            for j in range(W):
                d = load(a, j) - m[j]
                s1[j] += d * d
        a += W
        b += W


cdef inline void reduce_group(Reduce mode, const storage_t* a, Py_ssize_t stride, Py_ssize_t L,
                              const float* m, float* s0, float* s1) noexcept nogil:
    """Eight rows of a forward pass (RED_SUM, RED_SQ), L lanes each, `stride` apart, added in row
    order with one load and store of each lane total: the same adds as eight reduce_rows rows, so
    the same bits (the Numba backend's _reduce_rows).  Not for the gradient's pass: its group of
    four, with both totals, was no faster than row by row (0.95-1.05 of the time, two builds side
    by side); GCC vectorized it only as one loop per total."""
    cdef Py_ssize_t j, s2 = 2 * stride, s3 = 3 * stride
    cdef const storage_t* a4 = a + 4 * stride  # (rows 4-7)
    cdef float t, mj, d0, d1, d2, d3
    if mode == RED_SUM:
        for j in range(L):
            t = (((s0[j] + load(a, j)) + load(a, j + stride)) + load(a, j + s2)) + load(a, j + s3)
            s0[j] = (((t + load(a4, j)) + load(a4, j + stride)) + load(a4, j + s2)) + load(a4, j + s3)
    else:
        for j in range(L):
            mj = m[j]
            d0, d1, d2, d3 = load(a, j) - mj, load(a, j + stride) - mj, load(a, j + s2) - mj, load(a, j + s3) - mj
            t = (((s1[j] + d0 * d0) + d1 * d1) + d2 * d2) + d3 * d3
            d0, d1, d2, d3 = load(a4, j) - mj, load(a4, j + stride) - mj, load(a4, j + s2) - mj, load(a4, j + s3) - mj
            s1[j] = (((t + d0 * d0) + d1 * d1) + d2 * d2) + d3 * d3


cdef inline void reduce_strided(Reduce mode, const storage_t* a, const storage_t* b, Py_ssize_t nrows,
                                Py_ssize_t stride, Py_ssize_t span, Py_ssize_t W, const float* m, float* s0,
                                float* s1) noexcept nogil:
    """nrows rows `stride` elements apart, each `span` elements folded onto W lanes (lane j
    takes elements j, j + W, ... below span), row after row.  16-bit rows on x86-64-v3 keep the
    lane totals in registers across all the rows; a forward pass's other rows of one piece each
    go eight at a time (reduce_group), the rest one piece at a time (reduce_rows)."""
    cdef Py_ssize_t r = 0, pos
    if storage_t is fb_half:
        if FB_HALF_ROWS:
            fb_reduce_half_rows(mode, a, b, nrows, stride, span, W, m, s0, s1)
            return
    if storage_t is fb_bf16:
        if FB_BF16_ROWS:
            fb_reduce_bf16_rows(mode, a, b, nrows, stride, span, W, m, s0, s1)
            return
    if storage_t is float:
        if FB_F32_WIDE and mode != RED_GRAD:  # (the gradient's pass: row by row, below, as in reduce_group)
            fb_reduce_f32_rows(mode, a, b, nrows, stride, span, W, m, s0, s1)
            return
    if span <= W and mode != RED_GRAD:  # one row per span: eight rows at a time (reduce_group)
        while r + 8 <= nrows:
            reduce_group(mode, a + r * stride, stride, span, m, s0, s1)
            r += 8
    if stride == W and span == W:  # (contiguous rows: one call)
        reduce_rows(mode, a + r * W, b + r * W, nrows - r, W, m, s0, s1)
        return
    for r in range(r, nrows):
        pos = 0
        while pos < span:
            reduce_rows(mode, a + r * stride + pos, b + r * stride + pos, 1, min(W, span - pos), m, s0, s1)
            pos += W


cdef inline void apply_rows(Apply mode, const storage_t* a, const storage_t* b, storage_t* out,
                            Py_ssize_t nrows, Py_ssize_t W, const float* A, const float* B,
                            const float* K, const float* m) noexcept nogil:
    cdef Py_ssize_t r, j
    if storage_t is fb_half:
        if FB_HALF_ROWS:  # x86-64-v3: rows converted 8 lanes at a time, in registers (see _rows16.h)
            fb_apply_half_rows(mode, a, b, out, nrows, W, A, B, K, m)
            return
    if storage_t is fb_bf16:
        if FB_BF16_ROWS:  # x86-64-v3: 8 lanes at a time, narrowed with integer vector code (see _fp.h)
            fb_apply_bf16_rows(mode, a, b, out, nrows, W, A, B, K, m)
            return
    if storage_t is float:
        if FB_HALF_ROWS and mode == APPLY_A:
            fb_apply_f32_rows(mode, a, b, out, nrows, W, A, B, K, m)
            return
    for r in range(nrows):
        if mode == APPLY_FULL:
            for j in range(W):
                store(out, j, A[j] * ((load(b, j) + K[j]) + B[j] * (load(a, j) - m[j])))
        elif mode == APPLY_B:
            for j in range(W):
                store(out, j, A[j] * load(b, j))
        else:
            for j in range(W):
                store(out, j, B[j] * (load(a, j) - m[j]) + K[j])
        a += W
        b += W
        out += W


cdef inline void apply_run(Apply mode, const storage_t* a, const storage_t* b, storage_t* out,
                           Py_ssize_t L, float A, float B, float K, float m) noexcept nogil:
    cdef Py_ssize_t i
    if storage_t is fb_half:
        if FB_HALF_ROWS:  # x86-64-v3: converted 8 lanes at a time, in registers (see _rows16.h)
            fb_apply_half_run(mode, a, b, out, L, A, B, K, m)
            return
    if storage_t is fb_bf16:
        if FB_BF16_ROWS:
            fb_apply_bf16_run(mode, a, b, out, L, A, B, K, m)
            return
    if mode == APPLY_FULL:
        for i in range(L):
            store(out, i, A * ((load(b, i) + K) + B * (load(a, i) - m)))
    elif mode == APPLY_B:
        for i in range(L):
            store(out, i, A * load(b, i))
    else:
        for i in range(L):
            store(out, i, B * (load(a, i) - m) + K)


cdef inline void apply_rows_streamed(Apply mode, const storage_t* a, const storage_t* b, storage_t* out,
                                     Py_ssize_t nrows, Py_ssize_t W, const float* A, const float* B,
                                     const float* K, const float* m) noexcept nogil:
    """apply_rows with non-temporal stores (see _stream.h): x86-64-v3 stores them from its
    registers; elsewhere, a row at a time into an L1 buffer, copied out."""
    if FB_HALF_ROWS:  # (FB_BF16_ROWS with it)
        if storage_t is fb_half:
            fb_apply_half_rows_streamed(mode, a, b, out, nrows, W, A, B, K, m)
        elif storage_t is fb_bf16:
            fb_apply_bf16_rows_streamed(mode, a, b, out, nrows, W, A, B, K, m)
        else:
            fb_apply_f32_rows_streamed(mode, a, b, out, nrows, W, A, B, K, m)
        return
    cdef fb_f32_row row  # (storage_t is at most 4 bytes)
    cdef float* buf = row.v
    cdef Py_ssize_t r, j, n
    for r in range(nrows):
        j = 0
        while j < W:
            n = min(<Py_ssize_t> MAX_W, W - j)
            apply_rows(mode, a + j, b + j, <storage_t*> buf, 1, n, A + j, B + j, K + j, m + j)
            fb_stream_copy(out + j, buf, n * sizeof(storage_t))
            j += n
        a += W
        b += W
        out += W


cdef inline void apply_run_streamed(Apply mode, const storage_t* a, const storage_t* b, storage_t* out,
                                    Py_ssize_t L, float A, float B, float K, float m) noexcept nogil:
    """apply_run with non-temporal stores: x86-64-v3 stores them from its registers; elsewhere, in
    pieces through an L1 buffer, copied out."""
    if FB_HALF_ROWS:  # (FB_BF16_ROWS with it)
        if storage_t is fb_half:
            fb_apply_half_run_streamed(mode, a, b, out, L, A, B, K, m)
        elif storage_t is fb_bf16:
            fb_apply_bf16_run_streamed(mode, a, b, out, L, A, B, K, m)
        else:
            fb_apply_f32_run_streamed(mode, a, b, out, L, A, B, K, m)
        return
    cdef fb_f32_row row
    cdef float* buf = row.v
    cdef Py_ssize_t i = 0, n
    while i < L:
        n = min(<Py_ssize_t> MAX_W, L - i)
        apply_run(mode, a + i, b + i, <storage_t*> buf, n, A, B, K, m)
        fb_stream_copy(out + i, buf, n * sizeof(storage_t))
        i += n


cdef inline void used_lanes(Reduce mode, Py_ssize_t W, Py_ssize_t* lo, Py_ssize_t* hi) noexcept nogil:
    """The lanes [lo, hi) of acc[0:2W] a pass adds to (_plan._adds_to): s0's, s1's or both."""
    lo[0] = 0 if _adds_to(mode, 0) else W
    hi[0] = 2 * W if _adds_to(mode, 1) else W


cdef struct LaneBlock:
    # The state of an item's float32 lanes between spans.
    Py_ssize_t rows     # rows summed into the lanes since the last flush
    bint flushed        # the float64 partials hold totals (the first flush assigns them)


cdef inline void flush(Reduce mode, Py_ssize_t W, float* acc, double* part, LaneBlock* state) noexcept nogil:
    """part += acc over the pass's lanes, and acc zeroed for the next rows.  The first flush
    assigns instead, so part is never zeroed: the same bits, since every reader adds part's
    totals onto a +0 (fold_lanes, combine_rows), where 0 + v and v differ only in a zero's sign."""
    cdef Py_ssize_t j, lo, hi
    used_lanes(mode, W, &lo, &hi)
    if state.flushed:
        for j in range(lo, hi):
            part[j] += acc[j]
            acc[j] = 0
    else:
        for j in range(lo, hi):
            part[j] = acc[j]
            acc[j] = 0
    state.flushed = True
    state.rows = 0


ctypedef fused lane_t:
    float
    double


cdef inline double fold_lanes(const lane_t* v, Py_ssize_t n) noexcept nogil:
    """v[0] + ... + v[n-1] in a fixed order, in float64: eight running totals (lane j into total
    j % 8, two vector adds a step), then joined pairwise.  One chain of n dependent adds took ~9%
    of a 16-bit forward; eight chains overlap.  float32 lanes are folded straight from the
    accumulators when they never flushed: each is widened exactly, as a flush would."""
    cdef double t[FOLD_WAYS]
    cdef Py_ssize_t j = 0, k
    for k in range(FOLD_WAYS):
        t[k] = 0
    while j + FOLD_WAYS <= n:
        for k in range(FOLD_WAYS):
            t[k] += v[j + k]
        j += FOLD_WAYS
    for k in range(n - j):
        t[k] += v[j + k]
    return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]))


include "_turned_rows.pxi"


cdef inline void reduce_span(Reduce mode, const storage_t* a, const storage_t* b, Py_ssize_t start,
                             Py_ssize_t stop, Py_ssize_t W, const float* m, float* acc, double* part,
                             LaneBlock* state, bint strips, const Turn* turn=NULL) noexcept nogil:
    """Accumulate elements [start, stop) as rows of W lanes (the last row may be short).

    float32 lanes ``acc[0:2W]`` take at most BLOCK_ROWS rows, then flush into the
    float64 ``part``; the row count carries over between spans of the same item.  Rows
    in strips go several at a time (reduce_strided, see _plan._strips), the others one by one;
    in the x86-64-v4 build (FB_ROW_BLOCKS) a forward pass's rows always go to reduce_strided,
    which sums them in 256-lane blocks (fb_blocks_NAME in _wide512.h).

    With a `turn`, n >= 2 whole rows go as lanes [0, j0) of the first row, n - 1 rows read from
    its first line boundary on (lane k of such a row is lane (k + j0) % W, so they add into turned
    totals with a turned centre tile), and lanes [j0, W) of the last row.  Every lane still takes
    its rows in order through the same operations: the same bits, with the vector loads inside
    lines (a 512-bit load 16 bytes off a line spans two).  (One call site for the rows, turned or
    not: GCC unswitched the loops by mode in one inlined copy and not in another, 1.14-1.28x slower.)
    """
    cdef Py_ssize_t n, rows, last, pos = start, j0 = 0
    cdef const storage_t* ra
    cdef const storage_t* rb
    cdef const float* rm
    cdef float* racc
    while pos < stop:
        n = min((stop - pos) // W, BLOCK_ROWS - state.rows)
        if n > 0:
            ra, rb, rm, racc, rows = a + pos, b + pos, m, acc, n
            j0 = turn.j0 if turn != NULL and n > 1 else 0
            if j0:
                reduce_rows(mode, a + pos, b + pos, 1, j0, m, acc, acc + W)
                turn_lanes(mode, W, j0, acc, turn.acc, False)
                ra, rb, rm, racc, rows = a + pos + j0, b + pos + j0, turn.m, turn.acc, n - 1
            if strips or (FB_ROW_BLOCKS and mode != RED_GRAD):  # (x86-64-v4: a forward's rows in blocks)
                reduce_strided(mode, ra, rb, rows, W, W, W, rm, racc, racc + W)
            else:
                reduce_rows(mode, ra, rb, rows, W, rm, racc, racc + W)
            if j0:
                turn_lanes(mode, W, j0, acc, turn.acc, True)
                last = pos + (n - 1) * W + j0
                reduce_rows(mode, a + last, b + last, 1, W - j0, m + j0, acc + j0, acc + W + j0)
            pos += n * W
        else:  # a short last row
            n = 1
            reduce_rows(mode, a + pos, b + pos, 1, stop - pos, m, acc, acc + W)
            pos = stop
        state.rows += n
        if state.rows == BLOCK_ROWS:
            flush(mode, W, acc, part, state)


# ---------------------------------------------------------------------------------------
# Items.  Channels-last: a range of folded rows.  Channels-first: (channel block, batch range).
# ---------------------------------------------------------------------------------------

cdef inline void row_item_bounds(const Plan* P, Py_ssize_t item, Py_ssize_t* r0, Py_ssize_t* r1,
                                 Py_ssize_t* tail) noexcept nogil:
    """Full folded rows [r0, r1) of the item, plus `tail` elements of a last partial row."""
    cdef Py_ssize_t total = P.outer * P.C
    r0[0] = P.rows * item // P.nitems
    r1[0] = P.rows * (item + 1) // P.nitems
    tail[0] = 0
    if r1[0] * P.width > total:  # the last folded row is partial
        r1[0] -= 1
        tail[0] = total - r1[0] * P.width


cdef void reduce_row_item(const Plan* P, Reduce mode, Py_ssize_t item, const storage_t* a,
                          const storage_t* b, const float* m_tile, float* acc, double* part, bint strips) noexcept nogil:
    cdef Py_ssize_t r0, r1, tail, j, lo, hi, W = P.width
    cdef LaneBlock state = LaneBlock(0, False)
    cdef fb_f32_row m_turned
    cdef fb_f32_lanes acc_turned
    cdef Turn turn
    used_lanes(mode, W, &lo, &hi)
    for j in range(lo, hi):  # (only the totals the pass adds to: combine_rows reads only those)
        acc[j] = 0
    row_item_bounds(P, item, &r0, &r1, &tail)
    turn.j0 = turn_of(mode, a, b, W)
    if turn.j0:
        memcpy(m_turned.v, m_tile + turn.j0, (W - turn.j0) * sizeof(float))
        memcpy(m_turned.v + W - turn.j0, m_tile, turn.j0 * sizeof(float))
        turn.m = m_turned.v
        turn.acc = acc_turned.v
    reduce_span(mode, a, b, r0 * W, r1 * W + tail, W, m_tile, acc, part, &state, strips,
                &turn if turn.j0 else NULL)
    flush(mode, W, acc, part, &state)  # (assigns part, if no span flushed)


cdef void apply_row_item(const Plan* P, Apply mode, Py_ssize_t item, const storage_t* a,
                         const storage_t* b, storage_t* out, const float* tiles, bint stream) noexcept nogil:
    cdef Py_ssize_t r0, r1, tail, W = P.width
    row_item_bounds(P, item, &r0, &r1, &tail)
    if stream:
        apply_rows_streamed(mode, a + r0 * W, b + r0 * W, out + r0 * W, r1 - r0, W,
                            tiles, tiles + W, tiles + 2 * W, tiles + 3 * W)
    else:
        apply_rows(mode, a + r0 * W, b + r0 * W, out + r0 * W, r1 - r0, W,
                   tiles, tiles + W, tiles + 2 * W, tiles + 3 * W)
    if tail:  # (a short last row: ordinary stores)
        apply_rows(mode, a + r1 * W, b + r1 * W, out + r1 * W, 1, tail,
                   tiles, tiles + W, tiles + 2 * W, tiles + 3 * W)
    if stream:
        fb_stream_fence()


cdef inline void block_bounds(const Plan* P, Py_ssize_t item, Py_ssize_t* c0, Py_ssize_t* nch,
                              Py_ssize_t* n0, Py_ssize_t* n1) noexcept nogil:
    """Channels [c0, c0 + nch) and batch range [n0, n1) of a channels-first item."""
    cdef Py_ssize_t blk = item // P.per_channel, k = item % P.per_channel
    c0[0] = blk * P.block
    nch[0] = min(P.block, P.C - c0[0])
    n0[0] = P.outer * k // P.per_channel
    n1[0] = P.outer * (k + 1) // P.per_channel


cdef inline void fold_channels(const Plan* P, Reduce mode, Py_ssize_t nch, const lane_t* lanes,
                               double* sums) noexcept nogil:
    """Each channel's lanes [c * run, (c + 1) * run) of s0 and s1 folded into its totals."""
    cdef Py_ssize_t c, R = P.run, W = P.width
    for c in range(nch):  # (a total the pass does not add to stays 0)
        sums[c] = fold_lanes(lanes + c * R, R) if _adds_to(mode, 0) else 0
        sums[P.block + c] = fold_lanes(lanes + W + c * R, R) if _adds_to(mode, 1) else 0


cdef void reduce_plane_item(const Plan* P, Reduce mode, Py_ssize_t item, const storage_t* a,
                            const storage_t* b, const float* center, double* sums, bint strips) noexcept nogil:
    """Totals of one (channel block, batch range) item: sums[0:nch] and sums[block:block+nch].

    Each batch index contributes the item's planes as rows of `width` lanes; lane j
    belongs to channel c0 + j // run.  The lanes are folded per channel at the end.
    """
    cdef fb_f32_lanes acc_buf
    cdef fb_f64_lanes lanes_buf
    cdef fb_f32_row m_buf
    cdef float* acc = acc_buf.v
    cdef double* lanes = lanes_buf.v
    cdef float* m_tile = m_buf.v
    cdef Py_ssize_t j, c, n, k, base, c0, nch, n0, n1, pieces, lo, hi
    cdef Py_ssize_t W = P.width, R = P.run, span
    cdef LaneBlock state = LaneBlock(0, False)
    block_bounds(P, item, &c0, &nch, &n0, &n1)
    span = nch * P.inner
    for c in range(nch):  # (nested loops, not j // R: integer division is slow)
        for j in range(c * R, (c + 1) * R):
            m_tile[j] = center[c0 + c] if center != NULL else 0
    used_lanes(mode, W, &lo, &hi)
    for j in range(lo, hi):
        acc[j] = 0
    pieces = _ceil_div(span, W)  # rows of W lanes per batch index (the last may be short)
    n = n0
    while n < n1:
        base = (n * P.C + c0) * P.inner
        k = min(n1 - n, (BLOCK_ROWS - state.rows) // pieces, STRIP_PIECES // pieces) if strips else 0
        if k == 0:  # large planes, or a flush falls inside this batch index's planes
            reduce_span(mode, a, b, base, base + span, W, m_tile, acc, lanes, &state, strips)
            n += 1
            continue
        reduce_strided(mode, a + base, b + base, k, P.C * P.inner, span, W, m_tile, acc, acc + W)
        n += k
        state.rows += k * pieces
        if state.rows == BLOCK_ROWS:
            flush(mode, W, acc, lanes, &state)
    if state.flushed:
        flush(mode, W, acc, lanes, &state)
        fold_channels(P, mode, nch, lanes, sums)
    else:  # (fewer than BLOCK_ROWS rows never flush: no float64 copy of the lanes, zeroed, added and read back)
        fold_channels(P, mode, nch, acc, sums)


cdef inline void prefetch_next_block(Apply mode, Py_ssize_t at, Py_ssize_t nbytes, const storage_t* a,
                                     const storage_t* b) noexcept nogil:
    """Request the next channel block's part at `at` (x, and dy where the op reads it: _plan._inputs)."""
    fb_prefetch_lines(a + at, nbytes)
    if _inputs(mode) > 1:
        fb_prefetch_lines(b + at, nbytes)


cdef void apply_plane_item(const Plan* P, const Params* params, Apply mode, Py_ssize_t item,
                           const storage_t* a, const storage_t* b, storage_t* out, bint stream,
                           bint prefetch) noexcept nogil:
    """The element pass of one item; with `prefetch`, each long plane of the next channel block
    (the thread's next item, when items are whole blocks) is requested as this block's is applied
    (blocks of small planes measured no gain)."""
    cdef fb_f32_tiles tiles_buf
    cdef float* tiles = tiles_buf.v
    cdef Py_ssize_t j, c, n, base, c0, nch, n0, n1, span, W = P.width
    block_bounds(P, item, &c0, &nch, &n0, &n1)
    span = nch * P.inner
    prefetch = prefetch and P.runs and c0 + nch < P.C
    if P.runs:  # long planes: a channel's run of a row at a time, its scalar coefficients (see _plan.Plan)
        for n in range(n0, n1):
            for c in range(c0, c0 + nch):
                base = (n * P.C + c) * P.inner
                if prefetch:
                    prefetch_next_block(mode, base + span, P.inner * sizeof(storage_t), a, b)
                if stream:
                    apply_run_streamed(mode, a + base, b + base, out + base, P.inner, params.A[c], params.B[c], params.K[c],
                                       params.center[c])
                else:
                    apply_run(mode, a + base, b + base, out + base, P.inner, params.A[c], params.B[c], params.K[c], params.center[c])
        if stream:
            fb_stream_fence()
        return
    for c in range(c0, c0 + nch):
        for j in range((c - c0) * P.run, (c - c0 + 1) * P.run):
            tiles[j] = params.A[c]
            tiles[W + j] = params.B[c]
            tiles[2 * W + j] = params.K[c]
            tiles[3 * W + j] = params.center[c]
    for n in range(n0, n1):  # (never streamed: see streams() in _batch_norm_impl.pxi)
        base = (n * P.C + c0) * P.inner
        apply_rows(mode, a + base, b + base, out + base, 1, span, tiles, tiles + W, tiles + 2 * W, tiles + 3 * W)
