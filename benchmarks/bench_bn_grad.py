"""Batch-norm benchmark: fbnops vs PyTorch, TensorFlow, real oneDNN, the NumPy reference, Numba
and the streaming floor.

The implementation lives in ``fbnops.tools.bench`` (also ``fbnops bench``); see its modules.

    python benchmarks/bench_bn_grad.py [--quick] [--peers torch,tf,onednn,ref,numba] [--plot perf.png]
"""

import sys

from fbnops.tools.bench.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
