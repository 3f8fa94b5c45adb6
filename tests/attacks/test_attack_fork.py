"""Class 2, fork: a kernel in a forked child (after the parent ran a parallel kernel) gives the parent's bits."""

from __future__ import annotations

import multiprocessing as mp

from fbnops.framework.threads import set_num_threads

from .helpers import bits, fork_child_bits, grad_inputs, raw_grad
from .runner import Variant, attack


@attack(
    2,
    "kernel in a forked child after a parallel {label} kernel",
    expect="ok",
    timeout=60,
    variants=[Variant(b, (b,), extra="numba" if b == "numba" else "") for b in ("cython", "numba", "reference")],
)
def test_kernel_in_a_forked_child(backend: str):
    return fork_child_bits(backend)


def _grad_bits() -> bytes:
    return bits(raw_grad(**grad_inputs((8, 16, 16, 32), "NHWC")))


def _put_equal(queue, want: bytes) -> None:
    queue.put(_grad_bits() == want)


@attack(2, "multiprocessing fork workers after a parallel kernel", expect="ok", timeout=90)
def test_multiprocessing_fork_workers():
    set_num_threads(2)
    want = _grad_bits()
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_put_equal, args=(queue, want)) for _ in range(3)]
    for p in procs:
        p.start()
    got = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
    assert all(got) and all(p.exitcode == 0 for p in procs), (got, [p.exitcode for p in procs])
    return "same bits"
