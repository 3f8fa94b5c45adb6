"""fork safety: a child forked after the parent ran a parallel kernel computes the same bits.

libgomp's and Numba's thread pools do not survive fork(): without care the child hangs
(Cython/OpenMP) or is killed (Numba's OpenMP layer).  Each scenario runs in its own
Python process under a timeout, so a hang or a crash fails the test instead of pytest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from fbnops.testing import extras

SCRIPT = textwrap.dedent("""
    import hashlib, multiprocessing, sys
    import numpy as np
    import fbnops

    backend = sys.argv[1]
    fbnops.set_backend(backend)
    fbnops.set_num_threads(2)
    rng = np.random.default_rng(0)
    cases = [((16, 32, 32, 16), "NHWC"), ((8, 16, 24, 24), "NCHW")]  # parallel sizes (> 32768 elements)

    def digest():
        h = hashlib.sha256()
        for shape, fmt in cases:
            x = rng.standard_normal(shape).astype(np.float32)
            c = shape[-1] if fmt == "NHWC" else shape[1]
            v = np.ones(c, np.float32)
            g = fbnops.raw_ops.FusedBatchNormGradV3(
                y_backprop=x, x=x, scale=v, reserve_space_1=v * 0.1, reserve_space_2=v, reserve_space_3=v,
                data_format=fmt)
            f = fbnops.raw_ops.FusedBatchNormV3(x=x, scale=v, offset=v, mean=v, variance=v, data_format=fmt)
            for a in (*g[:3], *f[:3]):
                h.update(np.asarray(a).tobytes())
        return h.hexdigest()

    def child(queue):
        global rng
        rng = np.random.default_rng(0)
        fbnops.set_num_threads(2)  # asking for threads in the child must not hang either
        queue.put(digest())

    parent = digest()  # the parent's thread pools are now running
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=child, args=(queue,)) for _ in range(2)]
    for p in procs:
        p.start()
    got = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    rng = np.random.default_rng(0)
    again = digest()  # the parent still runs in parallel afterwards
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    assert got == [parent, parent] and again == parent, (parent, got, again)
    print("ok")
""")


@pytest.mark.parametrize("backend", ["cython", "numba"])
def test_kernels_in_a_forked_child_give_the_same_bits(backend):
    if not hasattr(os, "fork"):
        pytest.skip("no fork() on this platform")
    extras.require_backend(backend)
    # its own session, so that on a hang the forked children are killed with it
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, backend],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{backend}: a kernel hung in a forked child")
    assert proc.returncode == 0 and out.strip() == "ok", err[-3000:]
