"""The thread policy: FBNOPS_NUM_THREADS, then OMP_NUM_THREADS, then the usable cores; hostile counts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import fbnops
from fbnops.errors import InvalidArgumentError
from fbnops.framework import threads
from fbnops.testing import extras


@pytest.fixture
def restore_threads():
    with threads.setting_kept():
        yield


def test_set_and_get(restore_threads):
    fbnops.set_num_threads(3)
    assert fbnops.get_num_threads() == 3
    fbnops.set_num_threads(np.int64(2))
    assert fbnops.get_num_threads() == 2


@pytest.mark.parametrize("bad", [0, -1, -(2**63), 1.5, 2.0, True, "2", None, float("nan")])
def test_bad_counts_are_typed_errors_naming_the_argument(restore_threads, bad):
    before = fbnops.get_num_threads()
    with pytest.raises(InvalidArgumentError, match="num_threads"):
        fbnops.set_num_threads(bad)
    assert fbnops.get_num_threads() == before


@pytest.mark.parametrize("huge", [10**4, 2**31, 2**64])
def test_huge_counts_are_clamped_with_a_warning(restore_threads, huge):
    with pytest.warns(RuntimeWarning, match="clamped"):
        fbnops.set_num_threads(huge)
    assert fbnops.get_num_threads() == threads.MAX_THREADS <= max(64, 4 * (os.cpu_count() or 1))
    x = np.ones((4, 2, 2, 3), np.float32)  # and the kernels still run
    v = np.ones(3, np.float32)
    assert np.isfinite(fbnops.raw_ops.FusedBatchNormV3(x=x, scale=v, offset=v, mean=v, variance=v).y).all()


def test_environment_precedence(monkeypatch):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    monkeypatch.delenv("FBNOPS_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert threads.default_num_threads() == cores
    monkeypatch.setenv("OMP_NUM_THREADS", "3,2")  # OpenMP's nested list: the first level counts
    assert threads.default_num_threads() == 3
    monkeypatch.setenv("FBNOPS_NUM_THREADS", " 5 ")
    assert threads.default_num_threads() == 5
    monkeypatch.setenv("FBNOPS_NUM_THREADS", "")
    assert threads.default_num_threads() == 3


@pytest.mark.parametrize("value", ["0", "-2", "zero", "1.5", "2**31"])
def test_bad_fbnops_num_threads_is_a_typed_error(monkeypatch, value):
    monkeypatch.setenv("FBNOPS_NUM_THREADS", value)
    with pytest.raises(InvalidArgumentError, match="FBNOPS_NUM_THREADS"):
        threads.default_num_threads()


@pytest.mark.parametrize("var", ["FBNOPS_NUM_THREADS", "OMP_NUM_THREADS"])
def test_huge_environment_counts_are_clamped(monkeypatch, var):
    monkeypatch.delenv("FBNOPS_NUM_THREADS", raising=False)
    monkeypatch.setenv(var, str(2**31))
    with pytest.warns(RuntimeWarning, match="clamped"):
        assert threads.default_num_threads() == threads.MAX_THREADS


def test_bad_omp_num_threads_is_ignored_with_a_warning(monkeypatch):
    monkeypatch.delenv("FBNOPS_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "many")
    with pytest.warns(RuntimeWarning, match="OMP_NUM_THREADS"):
        assert threads.default_num_threads() >= 1


def test_importing_the_backends_changes_no_global_state():
    """No warning filters, no thread settings at import; Numba's count restored after a call."""
    extras.require("numba", "numba")
    code = textwrap.dedent("""
        import warnings, numba, numpy as np
        filters, nthreads = list(warnings.filters), numba.get_num_threads()
        import fbnops, fbnops.kernels.numba_backend as nb
        assert warnings.filters == filters, "warning filters changed at import"
        assert numba.get_num_threads() == nthreads
        fbnops.set_num_threads(1)
        x = np.ones((64, 32, 32), np.float32)  # big enough for the parallel path
        v = np.ones(32, np.float32)
        for n in (2, 1):
            fbnops.set_num_threads(n)
            nb.batch_norm(x, v, v, v, v, epsilon=1e-3, is_training=True)
            assert numba.get_num_threads() == nthreads, (n, numba.get_num_threads())
        print("ok")
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("FBNOPS_NUM_THREADS", "OMP_NUM_THREADS")}
    with warnings.catch_warnings():
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


@pytest.fixture
def adaptive_default(monkeypatch):
    """The default count (the cores, 2) on a machine where other processes keep one core busy."""
    monkeypatch.setattr(threads, "_num_threads", [2])
    monkeypatch.setattr(threads, "_from_cores", [True])
    monkeypatch.delenv("FBNOPS_ADAPTIVE_THREADS", raising=False)
    monkeypatch.setattr(threads, "idle_cores", lambda n: 1)


def test_configured_count_is_this_threads_alone(adaptive_default):
    """Inside configured_count() this thread's kernels take the count as configured; another
    thread's kernels, meanwhile, still take the idle cores, and so does this one's afterwards."""
    import threading

    seen = {}
    with threads.configured_count():
        seen["inside"] = threads.kernel_threads()
        other = threading.Thread(target=lambda: seen.update(other=threads.kernel_threads()))
        other.start()
        other.join()
    seen["after"] = threads.kernel_threads()
    assert seen == {"inside": 2, "other": 1, "after": 1}


def test_setting_kept_restores_the_adaptive_default(adaptive_default):
    with threads.setting_kept():
        fbnops.set_num_threads(3)
        assert threads.kernel_threads() == 3
    assert threads.kernel_threads() == 1 and fbnops.get_num_threads() == 2


def test_reading_the_default_changes_no_setting(adaptive_default):
    """default_num_threads() only reads: a count the user set stays one to use as given."""
    with threads.setting_kept():
        fbnops.set_num_threads(2)
        assert threads.default_num_threads() >= 1
        assert threads.kernel_threads() == 2


def test_the_cli_thread_option_is_its_commands_alone(adaptive_default, capsys):
    from fbnops import cli

    assert cli.main(["--threads", "3", "info"]) == 0
    assert "threads   3" in capsys.readouterr().out
    assert threads.kernel_threads() == 1 and fbnops.get_num_threads() == 2


@pytest.mark.parametrize("value", [None, "0", " 0 ", "1", "", "off"])
@pytest.mark.parametrize("through_bytes", [True, False])
def test_adaptive_switch_reads_the_environment_at_every_call(adaptive_default, monkeypatch, value, through_bytes):
    """FBNOPS_ADAPTIVE_THREADS=0 (spaces allowed) turns the idle-core count off, set or unset at any
    time; read through the bytes behind os.environ, or through os.environ where there are none."""
    if not through_bytes:
        monkeypatch.setattr(threads, "_ENVIRON_BYTES", None)
    assert threads.kernel_threads() == 1
    if value is not None:
        monkeypatch.setenv("FBNOPS_ADAPTIVE_THREADS", value)
    assert threads.kernel_threads() == (2 if value is not None and value.strip() == "0" else 1)
    monkeypatch.delenv("FBNOPS_ADAPTIVE_THREADS", raising=False)
    assert threads.kernel_threads() == 1
