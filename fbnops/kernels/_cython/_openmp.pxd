# Every OpenMP call of fbnops goes through this file (the scikit-learn pattern).
#
# Cython wraps prange/parallel in ``#ifdef _OPENMP`` itself, so kernels that only use
# prange run serially when built without OpenMP.  Direct omp_* calls would fail at
# import in such a build (undefined symbol), hence the stubs below.

cdef extern from *:
    """
    #ifdef _OPENMP
        #include <omp.h>
        #define FBNOPS_OPENMP_ENABLED 1
    #else
        #define FBNOPS_OPENMP_ENABLED 0
        static int omp_get_max_threads(void) { return 1; }
        static int omp_get_thread_num(void) { return 0; }
    #endif
    """
    bint FBNOPS_OPENMP_ENABLED
    int omp_get_max_threads() noexcept nogil
    int omp_get_thread_num() noexcept nogil
