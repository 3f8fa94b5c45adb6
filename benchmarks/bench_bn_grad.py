"""Batch-norm gradient benchmark: fbnops vs PyTorch, TensorFlow, the NumPy reference and Numba.

The implementation lives in ``fbnops.bench`` (also ``fbnops bench``); see its docstring.

    python benchmarks/bench_bn_grad.py [--quick] [--peers torch,tf,ref,numba] [--plot perf.png]
"""

import sys

from fbnops.bench import main

if __name__ == "__main__":
    sys.exit(main())
