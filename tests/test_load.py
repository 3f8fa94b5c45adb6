"""On a busy machine the default thread count shrinks to the idle cores; a chosen count does not.

A process that keeps one core busy is started beside a fresh interpreter; that interpreter's
kernels must then use one thread fewer by default, use exactly the count it is given when one
is set, and give the same bits either way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

needs_cores = pytest.mark.skipif(
    CORES < 2 or not os.path.exists("/proc/stat"), reason="needs 2 or more cores and Linux's /proc/stat"
)

PROBE = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    import fbnops
    from fbnops.framework import load, threads
    from fbnops.kernels._plan import threads_for

    x = np.random.default_rng(0).standard_normal((32, 7, 7, 512)).astype(np.float32)
    empty = np.zeros(0, np.float32)
    def run():
        return fbnops.raw_ops.FusedBatchNormV3(x=x, scale=np.ones(512, np.float32), offset=np.zeros(512, np.float32),
                                               mean=empty, variance=empty).y.tobytes()
    load.busy_elsewhere(); time.sleep(2 * load.WINDOW); run()  # a first window, then a reading
    time.sleep(2 * load.WINDOW)
    default = threads_for(x.size)
    bits = run()
    fbnops.set_num_threads(threads.get_num_threads())
    chosen = threads_for(x.size)
    same = run() == bits
    print(json.dumps(dict(busy=load.busy_elsewhere(), default=default, chosen=chosen, same=same)))
    """
)


def probe(env_extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("FBNOPS_NUM_THREADS", "OMP_NUM_THREADS")}
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def one_core_busy():
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


@needs_cores
def test_a_busy_core_is_left_to_its_process(one_core_busy):
    seen = probe()
    assert seen["busy"] >= 0.7, seen  # the other process's core is seen as taken...
    assert seen["default"] <= CORES - 1, seen  # ...and the default team leaves it
    assert seen["chosen"] == CORES, seen  # a count the user sets is used as given
    assert seen["same"], seen  # the same bits at either thread count


@needs_cores
def test_adaptive_threads_can_be_turned_off(one_core_busy):
    seen = probe({"FBNOPS_ADAPTIVE_THREADS": "0"})
    assert seen["busy"] >= 0.7 and seen["default"] == CORES, seen


@pytest.mark.parametrize(
    "cores, busy, free",
    [(2, 0.0, 2), (2, 0.25, 2), (2, 0.35, 1), (2, 0.5, 1), (2, 1.0, 1), (2, 2.0, 1), (4, 1.2, 3), (4, 1.5, 2)],
)
def test_a_core_is_free_only_when_others_barely_use_it(monkeypatch, cores, busy, free):
    from fbnops.framework import load

    monkeypatch.setattr(load, "busy_elsewhere", lambda: busy)
    assert load.idle_cores(cores) == free
