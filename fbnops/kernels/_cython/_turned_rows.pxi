# Channels-last rows that start off a 64-byte line, read from the line on (included by _loops.pxi;
# see reduce_span there): where the rows are, and the lane totals turned to match.

cdef struct Turn:
    # Channels-last rows whose data start j0 > 0 elements before a 64-byte line (NumPy's large
    # arrays start 16 bytes past one): read from that line on, with the lanes turned to match.
    Py_ssize_t j0
    const float* m      # the centre tile turned by j0: m[(k + j0) % W] at k
    float* acc          # scratch for the totals turned the same way (2W)


cdef inline void turn_lanes(Reduce mode, Py_ssize_t W, Py_ssize_t j0, float* plain, float* turned,
                            bint back) noexcept nogil:
    """turned[k] = plain[(k + j0) % W] in each half of [0, 2W) the pass adds to (back: plain from
    turned), as two copies (no division per lane)."""
    cdef Py_ssize_t h, lo, hi, head = W - j0
    used_lanes(mode, W, &lo, &hi)
    h = lo
    while h < hi:
        if back:
            memcpy(plain + h + j0, turned + h, head * sizeof(float))
            memcpy(plain + h, turned + h + head, j0 * sizeof(float))
        else:
            memcpy(turned + h, plain + h + j0, head * sizeof(float))
            memcpy(turned + h + head, plain + h, j0 * sizeof(float))
        h += W


cdef inline Py_ssize_t turn_of(Reduce mode, const storage_t* a, const storage_t* b, Py_ssize_t W) noexcept nogil:
    """j0 for rows of W lanes at a (and b, for a gradient), or 0: rows that start on a line, or
    not all at the same place in one (W * itemsize not a multiple of 64), or x and dy at
    different places, are read as they are; so are rows wider than the turned tiles' stack
    buffers (MAX_W lanes)."""
    cdef size_t off = <size_t> a % 64
    if off == 0 or off % sizeof(storage_t) or (W * sizeof(storage_t)) % 64 or W > MAX_W:
        return 0
    if mode == RED_GRAD and <size_t> b % 64 != off:
        return 0
    return (64 - off) // sizeof(storage_t)
