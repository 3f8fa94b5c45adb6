# The work plan of the Cython kernels: the C twin of fbnops/kernels/_plan.py:plan(), which
# is the one definition (tests/test_kernels.py checks the two agree over random shapes).
# The constants come from _plan_constants.pxi, generated from _plan.py.

include "_plan_constants.pxi"

cdef struct Plan:
    bint channels_last
    Py_ssize_t outer, C, inner
    Py_ssize_t width        # lanes per row
    Py_ssize_t fold         # channels-last: input rows per folded row
    Py_ssize_t rows         # channels-last: folded rows in total
    Py_ssize_t nitems
    Py_ssize_t block        # channels-first: channels per item (planes side by side in one row)
    Py_ssize_t run          # channels-first: lanes per channel in a row (lane j is channel j // run)
    Py_ssize_t per_channel  # channels-first: items per channel block (batch ranges)


cdef inline Py_ssize_t _gcd(Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    while b:
        a, b = b, a % b
    return a


cdef inline Plan make_plan(Py_ssize_t outer, Py_ssize_t C, Py_ssize_t inner, Py_ssize_t itemsize) noexcept nogil:
    cdef Plan P
    cdef Py_ssize_t k, nblocks
    P.outer = outer
    P.C = C
    P.inner = inner
    P.channels_last = inner == 1
    if P.channels_last:
        P.fold = 1
        if C < LANES:  # fold rows until the row is a multiple of 16 lanes and >= LANES
            P.fold = 16 // _gcd(C, 16)
            while P.fold * C < LANES and P.fold < outer:
                P.fold *= 2
        P.width = C * P.fold
        P.rows = (outer + P.fold - 1) // P.fold
        k = (outer * C + ROW_ITEM_ELEMS - 1) // ROW_ITEM_ELEMS
        P.nitems = max(1, min(k, MAX_ROW_ITEMS, P.rows))
        P.block = 0
        P.run = 0
        P.per_channel = 0
    else:
        P.fold = 1
        P.rows = 0
        if inner < LANES:  # small planes: a row is `block` whole planes (contiguous in memory)
            P.block = min(C, (LANES + inner - 1) // inner)
            P.run = inner
            P.width = P.block * inner
        else:  # large planes: rows of LANES lanes, all of one channel
            P.block = 1
            P.run = LANES
            P.width = LANES
        nblocks = (C + P.block - 1) // P.block
        k = (outer * P.block * inner * 2 * itemsize + PLANE_ITEM_BYTES - 1) // PLANE_ITEM_BYTES
        k = max(k, (MIN_ITEMS + nblocks - 1) // nblocks)
        P.per_channel = max(1, min(k, outer))
        P.nitems = nblocks * P.per_channel
    return P
