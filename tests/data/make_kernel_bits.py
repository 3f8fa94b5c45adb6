"""The kernels' bits lock: SHA-256 of every backend's output bytes over a grid of cases.

Run ``python tests/data/make_kernel_bits.py`` to (re)write ``kernel_bits.json`` beside
this file; ``tests/test_kernel_bits.py`` recomputes the digests and compares.  Rewrite
the file only when a change of the kernels' bits is intended (never for a refactor or
a speed-up: those must keep every digest).

The grid: shapes chosen to reach every branch of the work plan (folded and wide
channels-last rows, channel blocks of small planes, large planes, fused and split
channels-first items, serial and parallel sizes) in the four layouts, the three
storage dtypes, the four modes (gradient training/frozen, forward training/inference)
and 1 and 2 threads.  Kernels are called on the canonical ``(outer, C, inner)`` view.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

from fbnops.framework.registry import known_backends

BITS_FILE = Path(__file__).with_name("kernel_bits.json")
# The registry's backends (cython, numba, reference), plus the portable Cython build by name: the
# x86-64-v3 build contracts a * b + c into FMA instructions, so the two builds differ in the last bit
# and each has its own digests (the portable build is what runs on a CPU without AVX2/FMA).
BACKENDS = (*known_backends(), "cython-baseline")
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
MODES = ("grad_training", "grad_frozen", "forward_training", "forward_inference")
THREADS = (1, 2)
EPSILON = 1e-3

# (layout, tensor shape in that layout)
CASES = [
    ("NHWC", (2, 3, 5, 7)),  # tiny, serial, folded rows with a short last row
    ("NHWC", (8, 24, 20, 24)),  # folded rows, several items, parallel
    ("NHWC", (64, 3, 3, 301)),  # wide odd rows
    ("NHWC", (4, 8, 8, 640)),  # rows wider than LANES
    ("NCHW", (2, 3, 5, 7)),  # tiny, one channel block of small planes
    ("NCHW", (4, 3, 60, 61)),  # large planes split over the batch
    ("NCHW", (24, 37, 7, 7)),  # channel blocks of small planes, split over the batch
    ("NCHW", (2, 512, 7, 7)),  # one fused item per channel block
    ("NCHW", (2, 20, 32, 32)),  # large planes, fused items
    ("NDHWC", (2, 3, 4, 5, 6)),
    ("NDHWC", (4, 6, 8, 8, 40)),
    ("NCDHW", (3, 9, 2, 3, 4)),
    ("NCDHW", (2, 4, 3, 40, 50)),
    # (appended: a case's inputs are seeded by its index)
    ("NCHW", (130, 16, 25, 41)),  # 3 rows a plane (the last one lane), a float64 flush inside a plane
    ("NCHW", (130, 176, 7, 7)),  # channel blocks of small planes over 130 rows: flushes between grouped rows
]


def canonical(shape, layout):
    """(outer, C, inner) of a tensor: channels-last folds every non-channel axis into outer."""
    if layout in ("NHWC", "NDHWC"):
        return (int(np.prod(shape[:-1])), shape[-1], 1)
    return (shape[0], shape[1], int(np.prod(shape[2:])))


def case_inputs(index, shape, layout, dtype):
    rng = np.random.default_rng(1000 + index)
    view = canonical(shape, layout)
    C = view[1]
    x = (rng.standard_normal(view) * 2 + 1).astype(DTYPES[dtype])
    dy = rng.standard_normal(view).astype(DTYPES[dtype])
    vec = lambda lo, spread: (rng.random(C) * spread + lo).astype(np.float32)  # noqa: E731
    return dict(x=x, dy=dy, scale=vec(0.5, 1), offset=vec(-1, 2), mean=vec(0.9, 0.2), variance=vec(0.5, 4))


def backend_module(name):
    import importlib

    module = {"cython": "cython_backend", "numba": "numba_backend", "reference": "reference"}[name.split("-")[0]]
    return importlib.import_module(f"fbnops.kernels.{module}")


@contextlib.contextmanager
def build_variant(backend: str):
    """Run ``cython-baseline`` on the portable build, whichever build this CPU would choose."""
    if backend != "cython-baseline":
        yield
        return
    from fbnops.kernels import cython_backend
    from fbnops.kernels._cython import batch_norm

    chosen, cython_backend._bn = cython_backend._bn, batch_norm
    try:
        yield
    finally:
        cython_backend._bn = chosen


def run_mode(kernels, mode, inp):
    training = mode.endswith("training")
    if mode.startswith("grad"):
        return kernels.batch_norm_grad(
            inp["x"], inp["dy"], inp["scale"], inp["mean"], inp["variance"], epsilon=EPSILON, is_training=training
        )
    return kernels.batch_norm(
        inp["x"], inp["scale"], inp["offset"], inp["mean"], inp["variance"], epsilon=EPSILON, is_training=training
    )


def digest(outputs) -> str:
    h = hashlib.sha256()
    for o in outputs:
        o = np.ascontiguousarray(o)
        h.update(f"{o.dtype.str}{o.shape}".encode())
        h.update(o.tobytes())
    return h.hexdigest()


def compute_bits(backends=BACKENDS) -> dict[str, str]:
    from fbnops.framework import threads

    bits = {}
    with threads.setting_kept():
        for backend in backends:
            with build_variant(backend):
                bits.update(_backend_bits(backend))
    return bits


def _backend_bits(backend: str) -> dict[str, str]:
    from fbnops.framework import threads

    kernels, bits = backend_module(backend), {}
    for index, (layout, shape) in enumerate(CASES):
        for dtype in DTYPES:
            inp = case_inputs(index, shape, layout, dtype)
            for mode in MODES:
                for n in THREADS:
                    threads.set_num_threads(n)
                    key = f"{backend}/{layout}/{'x'.join(map(str, shape))}/{dtype}/{mode}/t{n}"
                    with np.errstate(all="ignore"):
                        bits[key] = digest(run_mode(kernels, mode, inp))
    return bits


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the stored file instead of writing it")
    args = parser.parse_args(argv)
    bits = compute_bits()
    if args.check:
        stored = json.loads(BITS_FILE.read_text())["bits"]
        bad = [k for k in bits if stored.get(k) != bits[k]]
        print(f"{len(bad)} of {len(bits)} digests differ", *bad[:20], sep="\n")
        return 1 if bad else 0
    BITS_FILE.write_text(json.dumps({"epsilon": EPSILON, "bits": bits}, indent=0, sort_keys=True) + "\n")
    print(f"wrote {len(bits)} digests to {BITS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
