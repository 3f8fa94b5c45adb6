# cython: language_level=3, boundscheck=False, wraparound=False
"""Large output arrays from a small pool of blocks whose pages are already mapped.

Why: a fresh 50 MB output is memory the kernel has never handed to this process.
Every 4 KiB page faults on its first write and is zeroed by the kernel first, which
costs about as much as the whole apply pass (measured: ``out = a + b`` over 51 MB
takes 8.0 ms into an old buffer and 11.9 ms into a new one).  Training loops call
the op with the same shapes step after step, so the output of step k is usually
freed before step k+1 asks for one of the same size: the pool hands that block back.

How: an output owns a :class:`_Block` (its NumPy ``base``); when the last array or
view of it dies, ``__dealloc__`` returns the block to the pool instead of freeing
it.  The pool keeps at most ``MAX_FREE`` blocks and ``limit_bytes`` bytes (default
``min(1 GiB, RAM / 8)``; ``FBNOPS_OUTPUT_POOL_BYTES=0`` turns it off) and frees
the rest.  Blocks are 2 MiB aligned and advised as huge pages.  Every pool
operation holds the GIL (allocation, and ``__dealloc__``), so no lock is needed.
Handed-out blocks are traced by ``tracemalloc`` like NumPy's own data; free blocks
in the pool are not (they belong to no array).  Small outputs (< ``MIN_BYTES``)
are plain ``np.empty``: the C allocator already reuses those.
"""

import os

import numpy as np

from libc.stdint cimport uintptr_t
from libc.stdlib cimport free
from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES


cdef extern from "stdlib.h" nogil:
    int posix_memalign(void** memptr, size_t alignment, size_t size)

cdef extern from *:
    """
    #include <sys/mman.h>
    #include <stdint.h>
    static void fbnops_advise_huge(void* p, size_t n) {
    #ifdef MADV_HUGEPAGE
        madvise(p, n, MADV_HUGEPAGE);
    #endif
    }
    """
    void fbnops_advise_huge(void* p, size_t n) nogil

cdef extern from "Python.h":
    int PyTraceMalloc_Track(unsigned int domain, uintptr_t ptr, size_t size)
    int PyTraceMalloc_Untrack(unsigned int domain, uintptr_t ptr)

DEF MAX_FREE = 8
cdef size_t ALIGN = 2 << 20  # 2 MiB: a huge page
MIN_BYTES = 1 << 20
cdef char* BYTE_FORMAT = "B"
cdef unsigned int TRACE_DOMAIN = 389047  # NumPy's tracemalloc domain (NPY_TRACE_DOMAIN)

cdef void* free_ptr[MAX_FREE]
cdef size_t free_cap[MAX_FREE]
cdef int nfree = 0
cdef size_t free_bytes = 0
cdef size_t limit = 0
cdef Py_ssize_t hits = 0, misses = 0


def _default_limit() -> int:
    env = os.environ.get("FBNOPS_OUTPUT_POOL_BYTES", "").strip()
    if env:
        try:
            return max(int(env), 0)
        except ValueError:
            raise ValueError(f"FBNOPS_OUTPUT_POOL_BYTES must be a number of bytes, got {env!r}") from None
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 8 << 30
    return min(1 << 30, ram // 8)


limit = _default_limit()


cdef class _Block:
    """The memory of one output: back to the pool (or freed) when no array uses it any more."""
    cdef void* ptr
    cdef size_t capacity
    cdef size_t nbytes

    def __getbuffer__(self, Py_buffer* view, int flags):
        view.buf = self.ptr
        view.obj = self
        view.len = self.nbytes
        view.readonly = 0
        view.itemsize = 1
        view.format = BYTE_FORMAT if flags & PyBUF_FORMAT else NULL
        view.ndim = 1
        view.shape = &view.len if flags & PyBUF_ND else NULL
        view.strides = &view.itemsize if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        pass

    def __dealloc__(self):
        if self.ptr == NULL:
            return
        PyTraceMalloc_Untrack(TRACE_DOMAIN, <uintptr_t> self.ptr)
        _give_back(self.ptr, self.capacity)
        self.ptr = NULL


cdef void _give_back(void* ptr, size_t capacity) noexcept:
    global nfree, free_bytes
    if nfree < MAX_FREE and free_bytes + capacity <= limit:
        free_ptr[nfree] = ptr
        free_cap[nfree] = capacity
        nfree += 1
        free_bytes += capacity
    else:
        free(ptr)


cdef void* _take(size_t capacity) noexcept:
    """A free block of exactly this capacity (the most recently returned: warmest in cache), or NULL."""
    global nfree, free_bytes, hits
    cdef int i, j
    cdef void* p
    for i in range(nfree - 1, -1, -1):
        if free_cap[i] == capacity:
            p = free_ptr[i]
            for j in range(i, nfree - 1):
                free_ptr[j] = free_ptr[j + 1]
                free_cap[j] = free_cap[j + 1]
            nfree -= 1
            free_bytes -= capacity
            hits += 1
            return p
    return NULL


def empty(shape, dtype):
    """An uninitialised C-contiguous array, from the pool when it is large."""
    global misses
    dt = np.dtype(dtype)
    cdef Py_ssize_t count = 1
    for d in shape:
        count *= d
    cdef size_t nbytes = count * dt.itemsize
    if nbytes < MIN_BYTES or limit == 0:
        return np.empty(shape, dt)
    cdef size_t capacity = (nbytes + ALIGN - 1) // ALIGN * ALIGN
    cdef void* p = _take(capacity)
    if p == NULL:
        if posix_memalign(&p, ALIGN, capacity) != 0:
            raise MemoryError(f"fbnops: cannot allocate an output of {nbytes} bytes")
        fbnops_advise_huge(p, capacity)
        misses += 1
    cdef _Block block = _Block.__new__(_Block)
    block.ptr = p
    block.capacity = capacity
    block.nbytes = nbytes
    PyTraceMalloc_Track(TRACE_DOMAIN, <uintptr_t> p, nbytes)
    return np.frombuffer(block, dt, count).reshape(shape)


def empty_like(a):
    return empty(a.shape, a.dtype)


def stats() -> dict:
    """The pool's counters: blocks and bytes held free, hits, misses (new blocks), the limit."""
    return dict(free_blocks=nfree, free_bytes=free_bytes, hits=hits, misses=misses, limit=limit)


def set_limit(Py_ssize_t nbytes) -> int:
    """Set the pool's byte limit (0: off); frees what no longer fits.  Returns the old limit."""
    global limit, nfree, free_bytes
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    old = limit
    limit = nbytes
    while nfree and free_bytes > limit:
        nfree -= 1
        free_bytes -= free_cap[nfree]
        free(free_ptr[nfree])
    return old
