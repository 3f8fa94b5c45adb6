"""``fbnops demo --ranks N``: a synchronized training step on N MPI processes, checked and explained.

Launches ``mpiexec -n N python -m mpi4py -m fbnops.distributed.demo_worker``, then prints how
far the result is from the single-process op on the whole batch, whether every rank holds
the same statistics, and what crossed the wire.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["main", "find_mpiexec", "run_mpiexec"]

TIMEOUT = 120  # seconds for the whole run: MPI itself has no timeouts


def find_mpiexec() -> str | None:
    """``mpiexec`` next to this Python (the MPICH wheel installs it there), else on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


def run_mpiexec(cmd: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True)`` in a session of its own, so that a
    timeout kills every rank, not only ``mpiexec`` (which would leave the ranks orphaned)."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kwargs
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _fail(message: str) -> int:
    print(f"fbnops: error: {message}", file=sys.stderr)  # the CLI's one-line form
    return 2


def main(ranks: int) -> int:
    """Run the demo on ``ranks`` processes; returns the exit code (0 ok, 1 mismatch or failure, 2 setup)."""
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        return _fail(f"--ranks must be a positive integer, got {ranks!r}")
    mpiexec = find_mpiexec()
    if importlib.util.find_spec("mpi4py") is None or mpiexec is None:
        return _fail("demo --ranks needs MPI (mpi4py and mpiexec not found): pip install 'fbnops[mpi]'")
    env = dict(os.environ, FBNOPS_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // ranks)))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo.json"
        cmd = [
            mpiexec,
            "-n",
            str(ranks),
            sys.executable,
            "-m",
            "mpi4py",
            "-m",
            "fbnops.distributed.demo_worker",
            str(out),
        ]
        try:
            run = run_mpiexec(cmd, TIMEOUT, env=env)
        except subprocess.TimeoutExpired:
            return _fail(f"mpiexec did not finish within {TIMEOUT} s")
        if run.returncode != 0 or not out.exists():
            tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["no output"]
            print(f"fbnops demo: mpiexec failed (exit {run.returncode}): {tail[0]}", file=sys.stderr)
            return 1
        report = json.loads(out.read_text())
    return _print(report)


def _print(r: dict) -> int:
    n, h, w, c = r["shape"]
    print(f"Synchronized batch norm on {r['ranks']} MPI rank(s): global batch {n}x{h}x{w}x{c} (NHWC, float32)")
    print(f"samples per rank: {r['shards']}\n")
    ok = True
    for mode in ("default", "reproducible"):
        e = r[mode]
        worst = max(e["max_rel_diff"].values())
        print(f"{mode} mode")
        print(f"  vs the single-process op on the whole batch: max relative difference {worst:.2e}"
              f"{' (bit for bit)' if e['bitwise_vs_single_process'] else ''}")  # fmt: skip
        if "bitwise_vs_one_rank" in e:
            print(f"  bitwise equal to the same call on one rank: {'yes' if e['bitwise_vs_one_rank'] else 'NO'}")
            ok &= e["bitwise_vs_one_rank"]
        print(f"  statistics identical on every rank:          {'yes' if e['identical_on_all_ranks'] else 'NO'}")
        print(f"  collectives per step (forward + gradient):   {e['collectives']}")
        print(
            f"  bytes sent by rank 0 per step:               {e['bytes_sent']} ({e['bytes_sent'] / c:.1f} per channel)"
        )
        print(f"  step time on rank 0:                         {e['seconds'] * 1e3:.2f} ms\n")
        ok &= e["identical_on_all_ranks"] and worst <= 1e-5
    print("OK: every rank agrees with the single-process op." if ok else "MISMATCH: see above.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2))
